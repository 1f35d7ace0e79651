//===- trace.cc - Chrome trace-event JSON ---------------------------------===//
#include "sim/model/trace.h"

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <map>
#include <regex>
#include <set>
#include <zlib.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/isa/asm.h"

namespace kiln::sim {

void Trace::Reset(const TraceOptions& options) {
  options_ = options;
  truncated_ = false;
  slices_.clear();
  counters_.clear();
  labels_.clear();
  names_.clear();
  last_.clear();
  kept_programs_.clear();
}

bool Trace::Room() {
  if (static_cast<int64_t>(slices_.size() + counters_.size()) < options_.max_events) return true;
  truncated_ = true;
  return false;
}

int32_t Trace::Label(const std::string& s) {
  // Few distinct labels: a linear search from the back finds recent ones fast.
  for (size_t i = labels_.size(); i-- > 0;)
    if (labels_[i] == s) return static_cast<int32_t>(i);
  labels_.push_back(s);
  return static_cast<int32_t>(labels_.size() - 1);
}

bool Trace::InWindow(double start, double end) const {
  return end >= options_.from && (options_.to <= 0 || start <= options_.to);
}

bool Trace::KeepsProgram(const Program* prog) {
  if (options_.kernels.empty() || !prog) return true;
  for (const auto& [p, keep] : kept_programs_)
    if (p == prog) return keep;
  bool keep = false;
  try {
    keep = std::regex_search(prog->name, std::regex(options_.kernels));
  } catch (const std::regex_error&) {
  }
  kept_programs_.emplace_back(prog, keep);
  return keep;
}

namespace {
int64_t TrackKey(int pid, int tid) { return static_cast<int64_t>(pid) * 64 + tid; }
}  // namespace

void Trace::Instruction(int core, Pipe pipe, const Program* prog, int pc, double start, double end, bool mergeable,
                        int64_t flow_out, int64_t flow_in) {
  if (!enabled_ || !InWindow(start, end) || !KeepsProgram(prog)) return;
  int tid = static_cast<int>(pipe);
  int64_t key = TrackKey(core, tid);
  auto it = std::find_if(last_.begin(), last_.end(), [&](const auto& p) { return p.first == key; });
  if (mergeable && it != last_.end() && flow_out < 0 && flow_in < 0) {
    Slice& s = slices_[it->second];
    // Back to back, or within the merge gap (barriers and flag hand-offs
    // are never `mergeable`).
    const bool near = start >= s.end && start - s.end <= options_.merge_gap_cycles;
    if (near && s.program == prog && s.count > 0 && prog->insts[s.pc].op == prog->insts[pc].op &&
        prog->insts[s.pc].dtype == prog->insts[pc].dtype && s.flow_out < 0 && s.flow_in < 0) {
      s.end = end;
      s.busy += end - start;
      ++s.count;
      return;
    }
  }
  if (!Room()) return;
  slices_.push_back(Slice{core, tid, start, end, prog, pc, -1, 1, flow_out, flow_in, end - start});
  if (it != last_.end()) it->second = static_cast<int64_t>(slices_.size() - 1);
  else last_.emplace_back(key, static_cast<int64_t>(slices_.size() - 1));
}

void Trace::Named(int pid, int tid, const std::string& name, double start, double end, bool mergeable) {
  if (!enabled_ || !InWindow(start, end)) return;
  int64_t key = TrackKey(pid, tid);
  auto it = std::find_if(last_.begin(), last_.end(), [&](const auto& p) { return p.first == key; });
  int32_t label = Label(name);
  if (mergeable && it != last_.end()) {
    Slice& s = slices_[it->second];
    if (!s.program && s.label == label && start >= s.end && start - s.end <= options_.merge_gap_cycles) {
      s.end = end;
      s.busy += end - start;
      ++s.count;
      return;
    }
  }
  if (!Room()) return;
  slices_.push_back(Slice{pid, tid, start, end, nullptr, -1, label, 1, -1, -1, end - start});
  if (it != last_.end()) it->second = static_cast<int64_t>(slices_.size() - 1);
  else last_.emplace_back(key, static_cast<int64_t>(slices_.size() - 1));
}

void Trace::Count(int pid, const std::string& name, double t, double value, bool rate) {
  // Samples before the window are kept (the value the window starts with).
  if (!enabled_ || (options_.to > 0 && t > options_.to) || !Room()) return;
  counters_.push_back(Counter{pid, Label(name), t, value, rate});
}

void Trace::NameTrack(int pid, int tid, const std::string& process, const std::string& thread) {
  for (const TrackName& n : names_)
    if (n.pid == pid && n.tid == tid) return;
  names_.push_back(TrackName{pid, tid, process, thread});
}

namespace {

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppend(&out, absl::StrFormat("\\u%04x", c));
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

namespace {

// A counter's samples (time, value), sorted by time, as written: one per
// window of `w` cycles from `from` on (a rate: the window's average of the
// step function the samples define; a level: its peak), each only where
// the value changes; w <= 0: every change. The value before `from` enters
// as the first sample.
std::vector<std::pair<double, double>> Windowed(std::vector<std::pair<double, double>> in, double w, bool rate,
                                                double from, double to) {
  std::stable_sort(in.begin(), in.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::pair<double, double>> out;
  auto put = [&out](double t, double v) {
    if (out.empty() || out.back().second != v) out.emplace_back(t, v);
  };
  // The value entering the window: the last sample at or before `from`.
  double cur = 0;
  size_t i = 0;
  bool entered = false;
  while (i < in.size() && in[i].first < from) {
    cur = in[i++].second;
    entered = true;
  }
  if (w <= 0 || i >= in.size()) {
    if (entered) put(from, cur);
    for (; i < in.size(); ++i)
      if (to <= 0 || in[i].first <= to) put(in[i].first, in[i].second);
    return out;
  }
  int64_t win = static_cast<int64_t>(std::floor((entered ? from : in[i].first) / w));
  double last = std::max(static_cast<double>(win) * w, from), integral = 0, peak = cur;
  auto close = [&](double end) {
    integral += cur * (end - last);
    peak = std::max(peak, cur);
    const double start = std::max(static_cast<double>(win) * w, from);
    put(start, rate ? integral / std::max(1e-9, end - start) : peak);
  };
  for (; i < in.size(); ++i) {
    const double t = in[i].first;
    if (to > 0 && t > to) break;
    if (t >= static_cast<double>(win + 1) * w) {
      close(static_cast<double>(win + 1) * w);
      ++win;
      // Windows the value holds through.
      if (t >= static_cast<double>(win + 1) * w) {
        put(static_cast<double>(win) * w, cur);
        win = static_cast<int64_t>(std::floor(t / w));
      }
      last = static_cast<double>(win) * w;
      integral = 0;
      peak = cur;
    }
    integral += cur * (t - last);
    cur = in[i].second;
    peak = std::max(peak, cur);
    last = t;
  }
  close(static_cast<double>(win + 1) * w);
  put(static_cast<double>(win + 1) * w, cur);
  return out;
}

}  // namespace

std::string Trace::ToJson(double clock_mhz) const {
  auto us = [&](double cycles) { return absl::StrFormat("%.4f", cycles / clock_mhz); };
  std::string out = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  bool first = true;
  auto emit = [&](const std::string& e) {
    if (!first) out += ",\n";
    first = false;
    out += e;
  };
  std::set<int> pids;
  for (const TrackName& n : names_) {
    if (!pids.count(n.pid)) {
      pids.insert(n.pid);
      emit(absl::StrFormat(R"({"ph":"M","name":"process_name","pid":%d,"tid":0,"args":{"name":"%s"}})", n.pid,
                           Escape(n.process)));
      emit(absl::StrFormat(R"({"ph":"M","name":"process_sort_index","pid":%d,"tid":0,"args":{"sort_index":%d}})", n.pid,
                           n.pid));
    }
    emit(absl::StrFormat(R"({"ph":"M","name":"thread_name","pid":%d,"tid":%d,"args":{"name":"%s"}})", n.pid, n.tid,
                         Escape(n.thread)));
    emit(absl::StrFormat(R"({"ph":"M","name":"thread_sort_index","pid":%d,"tid":%d,"args":{"sort_index":%d}})", n.pid,
                         n.tid, n.tid));
  }
  // The span written: the window, narrowed to the kept kernels' span when
  // only some kernels are traced.
  double from = options_.from, to = options_.to;
  if (!options_.kernels.empty()) {
    double lo = -1, hi = -1;
    for (const Slice& s : slices_)
      if (s.program) {
        lo = lo < 0 ? s.start : std::min(lo, s.start);
        hi = std::max(hi, s.end);
      }
    if (lo >= 0) {
      from = std::max(from, lo);
      to = to > 0 ? std::min(to, hi) : hi;
    }
  }
  for (const Slice& s : slices_) {
    if (!s.program && (s.end < from || (to > 0 && s.start > to))) continue;
    std::string name, args;
    const std::string busy = s.count > 1 ? absl::StrFormat(R"(,"busy_cycles":%.0f)", s.busy) : "";
    if (s.program) {
      const Inst& in = s.program->insts[s.pc];
      const OpInfo& info = Info(in.op);
      name = info.name;
      if (info.ndtypes >= 1) absl::StrAppend(&name, ".", DTypeName(in.dtype));
      if (info.ndtypes == 2) absl::StrAppend(&name, ".", DTypeName(in.dtype2));
      std::string text = InstText(*s.program, in);
      args = absl::StrFormat(R"({"kernel":"%s","pc":%d,"count":%d%s,"inst":"%s"})", Escape(s.program->name), s.pc,
                             s.count, busy, Escape(text));
    } else {
      name = labels_[s.label];
      args = absl::StrFormat(R"({"count":%d%s})", s.count, busy);
    }
    emit(absl::StrFormat(R"({"ph":"X","name":"%s","cat":"%s","pid":%d,"tid":%d,"ts":%s,"dur":%s,"args":%s})",
                         Escape(name), s.program ? "inst" : "op", s.pid, s.tid, us(s.start), us(s.end - s.start),
                         args));
    // A flow leaves its set_flag and enters its wait_flag just before each
    // slice ends (the moment the flag is set, the moment the wait releases),
    // inside the slice so viewers bind it there.
    double at = s.end - std::min(0.5, (s.end - s.start) / 2);
    if (s.flow_out >= 0)
      emit(absl::StrFormat(R"({"ph":"s","name":"flag","cat":"flag","id":%d,"pid":%d,"tid":%d,"ts":%s})", s.flow_out,
                           s.pid, s.tid, us(at)));
    if (s.flow_in >= 0)
      emit(absl::StrFormat(R"({"ph":"f","bp":"e","name":"flag","cat":"flag","id":%d,"pid":%d,"tid":%d,"ts":%s})",
                           s.flow_in, s.pid, s.tid, us(at)));
  }
  // Counters, series by series in the order they first appear.
  std::vector<std::pair<int, int32_t>> series;
  std::map<std::pair<int, int32_t>, std::pair<bool, std::vector<std::pair<double, double>>>> samples;
  for (const Counter& c : counters_) {
    auto key = std::make_pair(c.pid, c.label);
    auto [it, fresh] = samples.try_emplace(key);
    if (fresh) series.push_back(key);
    it->second.first = c.rate;
    it->second.second.emplace_back(c.t, c.value);
  }
  for (const auto& key : series) {
    const auto& [rate, values] = samples[key];
    for (const auto& [t, v] : Windowed(values, options_.counter_window_cycles, rate, from, to))
      emit(absl::StrFormat(R"({"ph":"C","name":"%s","pid":%d,"tid":0,"ts":%s,"args":{"value":%.6g}})",
                           Escape(labels_[key.second]), key.first, us(t), v));
  }
  out += "\n],\"metadata\":{\"clock_mhz\":";
  absl::StrAppend(&out, clock_mhz, ",\"truncated\":", truncated_ ? "true" : "false", "}}\n");
  return out;
}

std::string Trace::ToJsonGz(double clock_mhz) const {
  const std::string json = ToJson(clock_mhz);
  z_stream z{};
  // windowBits 15 + 16: a gzip stream; level 6, zlib's default.
  if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return std::string();
  std::string out(deflateBound(&z, json.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(json.data()));
  z.avail_in = static_cast<uInt>(json.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return rc == Z_STREAM_END ? out : std::string();
}

}  // namespace kiln::sim
