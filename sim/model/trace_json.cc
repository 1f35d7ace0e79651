//===- trace_json.cc - A trace as Chrome trace-event JSON -----------------===//
//
// One process per AI core (and for HBM, the AICPU cluster, the host, PCIe
// and the links), a thread per track; slices as complete ("X") events with
// their instruction's kernel, pc and text, or their count and busy cycles
// when merged; flag hand-offs as flow events; counters as "C" events.
//
//===----------------------------------------------------------------------===//
#include <set>
#include <zlib.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/isa/asm.h"
#include "sim/model/trace.h"

namespace kiln::sim {
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
  const Span span = WrittenSpan();
  for (const Slice& s : slices_) {
    if (!s.program && !span.Touches(s)) continue;
    std::string args;
    const std::string busy = s.count > 1 ? absl::StrFormat(R"(,"busy_cycles":%.0f)", s.busy) : "";
    if (s.program) {
      std::string text = InstText(*s.program, s.program->insts[s.pc]);
      args = absl::StrFormat(R"({"kernel":"%s","pc":%d,"count":%d%s,"inst":"%s"})", Escape(s.program->name), s.pc,
                             s.count, busy, Escape(text));
    } else {
      args = absl::StrFormat(R"({"count":%d%s})", s.count, busy);
    }
    emit(absl::StrFormat(R"({"ph":"X","name":"%s","cat":"%s","pid":%d,"tid":%d,"ts":%s,"dur":%s,"args":%s})",
                         Escape(SliceName(s)), s.program ? "inst" : "op", s.pid, s.tid, us(s.start),
                         us(s.end - s.start), args));
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
  for (const Series& series : CounterSeries(span))
    for (const auto& [t, v] : series.samples)
      emit(absl::StrFormat(R"({"ph":"C","name":"%s","pid":%d,"tid":0,"ts":%s,"args":{"value":%.6g}})",
                           Escape(labels_[series.label]), series.pid, us(t), v));
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
