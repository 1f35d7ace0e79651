//===- trace_perfetto.cc - A trace in Perfetto's protobuf format ----------===//
//
// The same content as the JSON (trace_json.cc), as Perfetto's TrackEvent
// packets on one sequence:
//  - a root track for the chip; under it, in the JSON's process order, a
//    track group per process (AI core c, HBM, AICPU, host, PCIe, links) and
//    under each its tracks in thread order, then its counters;
//  - a slice as a begin and an end event on its track, nested where slices
//    nest (an instruction of zero cycles inside the one that starts with
//    it), with its arguments as debug annotations: an instruction's kernel,
//    pc and text, and the count and busy cycles of merged slices;
//  - a flag hand-off as a flow from the set_flag's slice to the
//    wait_flag's (flow id = the trace's flow id + 1);
//  - counters as counter events of their windowed samples.
// Slice names, annotation names, kernel names and instruction texts are
// interned: each is written once, in the first packet that uses it, and
// referred to by id after. Timestamps are whole nanoseconds (Perfetto's
// unit) at the chip's clock; the JSON keeps a tenth of one.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include "absl/strings/str_format.h"
#include "sim/isa/asm.h"
#include "sim/model/perfetto_trace.pb.h"
#include "sim/model/trace.h"

namespace kiln::sim {
namespace {

namespace pf = ::kiln::sim::perfetto;

constexpr uint32_t kSequence = 1;
constexpr uint64_t kRootTrack = 1;

// Writes packets one by one into a Trace's bytes, interning strings as it goes.
class Writer {
 public:
  explicit Writer(double clock_mhz) : ns_per_cycle_(1000.0 / clock_mhz) { one_.add_packet(); }

  // A fresh packet on the sequence, at `cycles` when given.
  pf::TracePacket* Begin(double cycles = -1) {
    pf::TracePacket* p = one_.mutable_packet(0);
    p->Clear();
    p->set_trusted_packet_sequence_id(kSequence);
    if (cycles >= 0) p->set_timestamp(static_cast<uint64_t>(std::llround(std::max(0.0, cycles * ns_per_cycle_))));
    if (first_) {
      p->set_first_packet_on_sequence(true);
      p->set_sequence_flags(pf::TracePacket::SEQ_INCREMENTAL_STATE_CLEARED);
      first_ = false;
    } else {
      p->set_sequence_flags(pf::TracePacket::SEQ_NEEDS_INCREMENTAL_STATE);
    }
    return p;
  }
  void End() { one_.AppendToString(&out_); }

  // The id of `s` in `table`; a string seen first here is added to the
  // packet's interned data by `add` (with its new id).
  template <typename Add>
  static uint64_t Intern(std::unordered_map<std::string, uint64_t>& table, const std::string& s, Add add) {
    auto [it, fresh] = table.try_emplace(s, table.size() + 1);
    if (fresh) add(it->second);
    return it->second;
  }
  uint64_t EventName(pf::TracePacket* p, const std::string& s) {
    return Intern(event_names_, s, [&](uint64_t iid) {
      pf::EventName* e = p->mutable_interned_data()->add_event_names();
      e->set_iid(iid);
      e->set_name(s);
    });
  }
  uint64_t AnnotationName(pf::TracePacket* p, const std::string& s) {
    return Intern(annotation_names_, s, [&](uint64_t iid) {
      pf::DebugAnnotationName* e = p->mutable_interned_data()->add_debug_annotation_names();
      e->set_iid(iid);
      e->set_name(s);
    });
  }
  uint64_t String(pf::TracePacket* p, const std::string& s) {
    return Intern(strings_, s, [&](uint64_t iid) {
      pf::InternedString* e = p->mutable_interned_data()->add_debug_annotation_string_values();
      e->set_iid(iid);
      e->set_str(s);
    });
  }
  void Annotate(pf::TracePacket* p, const std::string& name, int64_t value) {
    pf::DebugAnnotation* a = p->mutable_track_event()->add_debug_annotations();
    a->set_name_iid(AnnotationName(p, name));
    a->set_int_value(value);
  }
  void Annotate(pf::TracePacket* p, const std::string& name, const std::string& value) {
    pf::DebugAnnotation* a = p->mutable_track_event()->add_debug_annotations();
    a->set_name_iid(AnnotationName(p, name));
    a->set_string_value_iid(String(p, value));
  }

  std::string Take() { return std::move(out_); }

 private:
  double ns_per_cycle_;
  bool first_ = true;
  pf::Trace one_;  // one packet, reused: appending it writes the packet as the trace's field 1
  std::string out_;
  std::unordered_map<std::string, uint64_t> event_names_, annotation_names_, strings_;
};

void Describe(Writer& w, uint64_t uuid, uint64_t parent, const std::string& name, int rank, bool counter = false) {
  pf::TracePacket* p = w.Begin();
  pf::TrackDescriptor* d = p->mutable_track_descriptor();
  d->set_uuid(uuid);
  d->set_name(name);
  if (parent) d->set_parent_uuid(parent);
  d->set_sibling_order_rank(rank);
  d->set_child_ordering(pf::TrackDescriptor::EXPLICIT);
  if (counter) d->mutable_counter();
  w.End();
}

}  // namespace

std::string Trace::ToPerfetto(double clock_mhz) const {
  Writer w(clock_mhz);
  Describe(w, kRootTrack, 0, absl::StrFormat("simulated chip (%g MHz)", clock_mhz), 0);

  // Tracks: the named ones, then any a slice or counter uses unnamed, each
  // group in pid order (the JSON's process_sort_index), its tracks in tid order.
  std::map<int, std::string> processes;
  std::map<std::pair<int, int>, std::string> threads;
  for (const TrackName& n : names_) {
    processes.try_emplace(n.pid, n.process);
    threads.try_emplace({n.pid, n.tid}, n.thread);
  }
  for (const Slice& s : slices_) {
    processes.try_emplace(s.pid, absl::StrFormat("process %d", s.pid));
    threads.try_emplace({s.pid, s.tid}, absl::StrFormat("track %d", s.tid));
  }
  const Span span = WrittenSpan();
  const std::vector<Series> series = CounterSeries(span);
  for (const Series& c : series) processes.try_emplace(c.pid, absl::StrFormat("process %d", c.pid));

  uint64_t next_uuid = kRootTrack + 1;
  std::map<int, uint64_t> group_uuid;
  int rank = 0;
  for (const auto& [pid, name] : processes) {
    group_uuid[pid] = next_uuid;
    Describe(w, next_uuid++, kRootTrack, name, rank++);
  }
  std::map<std::pair<int, int>, uint64_t> track_uuid;
  for (const auto& [key, name] : threads) {
    track_uuid[key] = next_uuid;
    Describe(w, next_uuid++, group_uuid[key.first], name, key.second);
  }
  std::vector<uint64_t> counter_uuid;
  for (size_t i = 0; i < series.size(); ++i) {
    counter_uuid.push_back(next_uuid);
    Describe(w, next_uuid++, group_uuid[series[i].pid], labels_[series[i].label], 1000 + static_cast<int>(i),
             /*counter=*/true);
  }

  // Slices, track by track: sorted by start (the longer first), each begun
  // after the slices that end by its start are ended, so that begins and
  // ends nest; a slice that would outlast the one it starts in (none does
  // in a model run) is cut at that one's end.
  std::map<std::pair<int, int>, std::vector<int64_t>> by_track;
  for (size_t i = 0; i < slices_.size(); ++i) {
    const Slice& s = slices_[i];
    if (!s.program && !span.Touches(s)) continue;
    by_track[{s.pid, s.tid}].push_back(static_cast<int64_t>(i));
  }
  std::unordered_map<const Program*, std::unordered_map<int32_t, std::string>> texts;
  for (auto& [key, indices] : by_track) {
    const uint64_t uuid = track_uuid[key];
    std::stable_sort(indices.begin(), indices.end(), [&](int64_t a, int64_t b) {
      const Slice &x = slices_[a], &y = slices_[b];
      return x.start < y.start || (x.start == y.start && x.end > y.end);
    });
    std::vector<double> open;  // ends of the slices begun and not yet ended
    auto close = [&](double end) {
      pf::TracePacket* p = w.Begin(end);
      pf::TrackEvent* e = p->mutable_track_event();
      e->set_type(pf::TrackEvent::TYPE_SLICE_END);
      e->set_track_uuid(uuid);
      w.End();
    };
    for (int64_t i : indices) {
      const Slice& s = slices_[i];
      while (!open.empty() && open.back() <= s.start) {
        close(open.back());
        open.pop_back();
      }
      pf::TracePacket* p = w.Begin(s.start);
      pf::TrackEvent* e = p->mutable_track_event();
      e->set_type(pf::TrackEvent::TYPE_SLICE_BEGIN);
      e->set_track_uuid(uuid);
      e->set_name_iid(w.EventName(p, SliceName(s)));
      if (s.program) {
        w.Annotate(p, "kernel", s.program->name);
        w.Annotate(p, "pc", s.pc);
        auto [text, fresh] = texts[s.program].try_emplace(s.pc);
        if (fresh) text->second = InstText(*s.program, s.program->insts[s.pc]);
        w.Annotate(p, "inst", text->second);
      }
      if (s.count > 1) {
        w.Annotate(p, "count", s.count);
        w.Annotate(p, "busy_cycles", std::llround(s.busy));
      }
      if (s.flow_out >= 0) e->add_flow_ids(static_cast<uint64_t>(s.flow_out) + 1);
      if (s.flow_in >= 0) e->add_terminating_flow_ids(static_cast<uint64_t>(s.flow_in) + 1);
      w.End();
      open.push_back(open.empty() ? s.end : std::min(s.end, open.back()));
    }
    for (; !open.empty(); open.pop_back()) close(open.back());
  }

  for (size_t i = 0; i < series.size(); ++i)
    for (const auto& [t, v] : series[i].samples) {
      pf::TracePacket* p = w.Begin(t);
      pf::TrackEvent* e = p->mutable_track_event();
      e->set_type(pf::TrackEvent::TYPE_COUNTER);
      e->set_track_uuid(counter_uuid[i]);
      e->set_double_counter_value(v);
      w.End();
    }

  if (truncated_) {
    double last = 0;
    for (const Slice& s : slices_) last = std::max(last, s.end);
    pf::TracePacket* p = w.Begin(last);
    pf::TrackEvent* e = p->mutable_track_event();
    e->set_type(pf::TrackEvent::TYPE_INSTANT);
    e->set_track_uuid(kRootTrack);
    e->set_name_iid(w.EventName(p, "trace truncated: it reached its size bound"));
    w.End();
  }
  return w.Take();
}

}  // namespace kiln::sim
