//===- trace.cc - Chrome trace-event JSON ---------------------------------===//
#include "sim/model/trace.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/isa/asm.h"

namespace kiln::sim {

void Trace::Reset(int64_t max_events) {
  max_events_ = max_events;
  truncated_ = false;
  slices_.clear();
  counters_.clear();
  labels_.clear();
  names_.clear();
  last_.clear();
}

bool Trace::Room() {
  if (static_cast<int64_t>(slices_.size() + counters_.size()) < max_events_) return true;
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

namespace {
int64_t TrackKey(int pid, int tid) { return static_cast<int64_t>(pid) * 64 + tid; }
}  // namespace

void Trace::Instruction(int core, Pipe pipe, const Program* prog, int pc, double start, double end, bool mergeable,
                        int64_t flow_out, int64_t flow_in) {
  if (!enabled_) return;
  int tid = static_cast<int>(pipe);
  int64_t key = TrackKey(core, tid);
  auto it = std::find_if(last_.begin(), last_.end(), [&](const auto& p) { return p.first == key; });
  if (mergeable && it != last_.end()) {
    Slice& s = slices_[it->second];
    if (s.program == prog && s.count > 0 && s.end == start && prog->insts[s.pc].op == prog->insts[pc].op &&
        prog->insts[s.pc].dtype == prog->insts[pc].dtype && s.flow_out < 0 && s.flow_in < 0) {
      s.end = end;
      ++s.count;
      return;
    }
  }
  if (!Room()) return;
  slices_.push_back(Slice{core, tid, start, end, prog, pc, -1, 1, flow_out, flow_in});
  if (it != last_.end()) it->second = static_cast<int64_t>(slices_.size() - 1);
  else last_.emplace_back(key, static_cast<int64_t>(slices_.size() - 1));
}

void Trace::Named(int pid, int tid, const std::string& name, double start, double end, bool mergeable) {
  if (!enabled_) return;
  int64_t key = TrackKey(pid, tid);
  auto it = std::find_if(last_.begin(), last_.end(), [&](const auto& p) { return p.first == key; });
  int32_t label = Label(name);
  if (mergeable && it != last_.end()) {
    Slice& s = slices_[it->second];
    if (!s.program && s.label == label && s.end == start) {
      s.end = end;
      ++s.count;
      return;
    }
  }
  if (!Room()) return;
  slices_.push_back(Slice{pid, tid, start, end, nullptr, -1, label, 1, -1, -1});
  if (it != last_.end()) it->second = static_cast<int64_t>(slices_.size() - 1);
  else last_.emplace_back(key, static_cast<int64_t>(slices_.size() - 1));
}

void Trace::Count(int pid, const std::string& name, double t, double value) {
  if (!enabled_ || !Room()) return;
  counters_.push_back(Counter{pid, Label(name), t, value});
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
  std::map<const Program*, std::vector<std::string>> texts;
  for (const Slice& s : slices_) {
    std::string name, args;
    if (s.program) {
      const Inst& in = s.program->insts[s.pc];
      const OpInfo& info = Info(in.op);
      name = info.name;
      if (info.ndtypes >= 1) absl::StrAppend(&name, ".", DTypeName(in.dtype));
      if (info.ndtypes == 2) absl::StrAppend(&name, ".", DTypeName(in.dtype2));
      std::string text = InstText(*s.program, in);
      args = absl::StrFormat(R"({"kernel":"%s","pc":%d,"count":%d,"inst":"%s"})", Escape(s.program->name), s.pc,
                             s.count, Escape(text));
    } else {
      name = labels_[s.label];
      args = absl::StrFormat(R"({"count":%d})", s.count);
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
  for (const Counter& c : counters_)
    emit(absl::StrFormat(R"({"ph":"C","name":"%s","pid":%d,"tid":0,"ts":%s,"args":{"value":%.6g}})",
                         Escape(labels_[c.label]), c.pid, us(c.t), c.value));
  out += "\n],\"metadata\":{\"clock_mhz\":";
  absl::StrAppend(&out, clock_mhz, ",\"truncated\":", truncated_ ? "true" : "false", "}}\n");
  return out;
}

}  // namespace kiln::sim
