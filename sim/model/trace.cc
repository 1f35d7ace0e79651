//===- trace.cc - Recording a trace of a run ------------------------------===//
#include "sim/model/trace.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

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
  energy_bins_.clear();
  energy_bin_cycles_ = options.counter_window_cycles > 0 ? options.counter_window_cycles : 100;
  static_watts_ = power_clock_mhz_ = 0;
  power_label_ = -1;
}

void Trace::SetPower(double static_watts, double clock_mhz) {
  static_watts_ = static_watts;
  power_clock_mhz_ = clock_mhz;
  NameTrack(kPower, 0, "Power", "chip");
  power_label_ = Label("chip power W");
}

void Trace::Energy(double start, double end, double pj) {
  if (!enabled_ || !(pj > 0) || !(start >= 0) || !(end >= start)) return;
  const double w = energy_bin_cycles_;
  const int64_t first = static_cast<int64_t>(start / w), last = static_cast<int64_t>(end / w);
  // Bounded like the events: a span past max_events windows is not kept.
  if (last >= options_.max_events) {
    truncated_ = true;
    return;
  }
  if (static_cast<int64_t>(energy_bins_.size()) <= last) energy_bins_.resize(last + 1, 0.0);
  if (first == last || end <= start) {
    energy_bins_[first] += pj;
    return;
  }
  const double per_cycle = pj / (end - start);
  for (int64_t b = first; b <= last; ++b) {
    const double lo = std::max(start, static_cast<double>(b) * w), hi = std::min(end, static_cast<double>(b + 1) * w);
    if (hi > lo) energy_bins_[b] += per_cycle * (hi - lo);
  }
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

Trace::Span Trace::WrittenSpan() const {
  Span span{options_.from, options_.to};
  if (options_.kernels.empty()) return span;
  double lo = -1, hi = -1;
  for (const Slice& s : slices_)
    if (s.program) {
      lo = lo < 0 ? s.start : std::min(lo, s.start);
      hi = std::max(hi, s.end);
    }
  if (lo >= 0) {
    span.from = std::max(span.from, lo);
    span.to = span.to > 0 ? std::min(span.to, hi) : hi;
  }
  return span;
}

std::string Trace::SliceName(const Slice& s) const {
  if (!s.program) return labels_[s.label];
  const Inst& in = s.program->insts[s.pc];
  const OpInfo& info = Info(in.op);
  std::string name = info.name;
  if (info.ndtypes >= 1) absl::StrAppend(&name, ".", DTypeName(in.dtype));
  if (info.ndtypes == 2) absl::StrAppend(&name, ".", DTypeName(in.dtype2));
  return name;
}

std::vector<Trace::Series> Trace::CounterSeries(const Span& span) const {
  std::vector<Series> out;
  std::map<std::pair<int, int32_t>, size_t> index;
  std::vector<std::vector<std::pair<double, double>>> raw;
  for (const Counter& c : counters_) {
    auto [it, fresh] = index.try_emplace(std::make_pair(c.pid, c.label), out.size());
    if (fresh) {
      out.push_back(Series{c.pid, c.label, c.rate, {}});
      raw.emplace_back();
    }
    out[it->second].rate = c.rate;
    raw[it->second].emplace_back(c.t, c.value);
  }
  for (size_t i = 0; i < out.size(); ++i)
    out[i].samples = Windowed(std::move(raw[i]), options_.counter_window_cycles, out[i].rate, span.from, span.to);
  // The chip's power: each window's energy over its time, and the static power.
  if (power_clock_mhz_ > 0 && !energy_bins_.empty()) {
    std::vector<std::pair<double, double>> watts;
    const double seconds = energy_bin_cycles_ / (power_clock_mhz_ * 1e6);
    for (size_t b = 0; b < energy_bins_.size(); ++b)
      watts.emplace_back(static_cast<double>(b) * energy_bin_cycles_, static_watts_ + energy_bins_[b] * 1e-12 / seconds);
    watts.emplace_back(static_cast<double>(energy_bins_.size()) * energy_bin_cycles_, static_watts_);
    out.push_back(
        Series{kPower, power_label_, true, Windowed(std::move(watts), energy_bin_cycles_, true, span.from, span.to)});
  }
  return out;
}

std::string Trace::Write(TraceFormat format, double clock_mhz) const {
  switch (format) {
    case TraceFormat::kJsonGz: return ToJsonGz(clock_mhz);
    case TraceFormat::kPerfetto: return ToPerfetto(clock_mhz);
    case TraceFormat::kJson: break;
  }
  return ToJson(clock_mhz);
}

}  // namespace kiln::sim
