//===- trace_perfetto_test.cc - A trace in Perfetto's protobuf format -----===//
//
// Rules of sim/model/trace_perfetto.cc in its own terms, read back with the
// messages it writes (Perfetto's field numbers, sim/model/perfetto_trace.proto):
// a root track, a group per process in pid order holding its tracks in tid
// order and its counters; every slice a begin and an end on its track, in
// whole nanoseconds at the clock, nested (a zero-cycle slice that starts with
// another inside it); the JSON's arguments as annotations; names interned
// once; a flag's flow from its set_flag's slice to its wait_flag's; counters
// as the JSON's windowed samples; a truncated trace says so.
//
//===----------------------------------------------------------------------===//
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sim/isa/isa.h"
#include "sim/model/perfetto_trace.pb.h"
#include "sim/model/trace.h"
#include "tests/sim/trace_test_util.h"

namespace kiln::sim {
namespace {

namespace pf = ::kiln::sim::perfetto;

// A parsed trace: its tracks, and its slices and counters as read back.
struct Read {
  struct Slice {
    std::string track, name;
    uint64_t begin, end;
    int depth;
    std::map<std::string, std::string> args;
    std::vector<uint64_t> flows_out, flows_in;
  };
  std::map<uint64_t, pf::TrackDescriptor> tracks;
  std::vector<Slice> slices;
  std::vector<std::pair<std::string, std::pair<uint64_t, double>>> counters;  // track, (ns, value)
  std::vector<std::string> instants;
  int interned_names = 0;
  std::string first_error;

  std::string Path(uint64_t uuid) const {
    auto it = tracks.find(uuid);
    if (it == tracks.end()) return "?";
    if (!it->second.has_parent_uuid()) return it->second.name();
    return Path(it->second.parent_uuid()) + "/" + it->second.name();
  }
};

Read Parse(const std::string& bytes) {
  Read r;
  pf::Trace trace;
  if (!trace.ParseFromString(bytes)) {
    r.first_error = "not a Trace";
    return r;
  }
  std::map<uint64_t, std::string> names, annotation_names, strings;
  std::map<uint64_t, std::vector<size_t>> open;  // track -> indices of begun slices
  for (int i = 0; i < trace.packet_size(); ++i) {
    const pf::TracePacket& p = trace.packet(i);
    if (p.trusted_packet_sequence_id() != 1 && r.first_error.empty()) r.first_error = "packet off the sequence";
    if (i == 0 && !(p.first_packet_on_sequence() && p.sequence_flags() == 1)) r.first_error = "no cleared state";
    for (const auto& e : p.interned_data().event_names()) {
      if (!names.emplace(e.iid(), e.name()).second) r.first_error = "event name interned twice";
      ++r.interned_names;
    }
    for (const auto& e : p.interned_data().debug_annotation_names()) annotation_names.emplace(e.iid(), e.name());
    for (const auto& e : p.interned_data().debug_annotation_string_values()) strings.emplace(e.iid(), e.str());
    if (p.has_track_descriptor()) r.tracks[p.track_descriptor().uuid()] = p.track_descriptor();
    if (!p.has_track_event()) continue;
    const pf::TrackEvent& e = p.track_event();
    const std::string track = r.Path(e.track_uuid());
    switch (e.type()) {
      case pf::TrackEvent::TYPE_SLICE_BEGIN: {
        Read::Slice s{track, names[e.name_iid()], p.timestamp(), 0, static_cast<int>(open[e.track_uuid()].size()),
                      {}, {}, {}};
        for (const auto& a : e.debug_annotations())
          s.args[annotation_names[a.name_iid()]] =
              a.has_string_value_iid() ? strings[a.string_value_iid()] : std::to_string(a.int_value());
        s.flows_out.assign(e.flow_ids().begin(), e.flow_ids().end());
        s.flows_in.assign(e.terminating_flow_ids().begin(), e.terminating_flow_ids().end());
        open[e.track_uuid()].push_back(r.slices.size());
        r.slices.push_back(s);
        break;
      }
      case pf::TrackEvent::TYPE_SLICE_END: {
        auto& stack = open[e.track_uuid()];
        if (stack.empty()) {
          r.first_error = "an end without a begin on " + track;
          break;
        }
        r.slices[stack.back()].end = p.timestamp();
        if (p.timestamp() < r.slices[stack.back()].begin) r.first_error = "a slice ends before it begins";
        stack.pop_back();
        break;
      }
      case pf::TrackEvent::TYPE_COUNTER:
        r.counters.push_back({track, {p.timestamp(), e.double_counter_value()}});
        break;
      case pf::TrackEvent::TYPE_INSTANT: r.instants.push_back(names[e.name_iid()]); break;
      default: r.first_error = "an event of no type";
    }
  }
  for (const auto& [uuid, stack] : open)
    if (!stack.empty()) r.first_error = "a slice never ends on " + r.Path(uuid);
  return r;
}

Program MakeProgram(const std::string& name) {
  Program p;
  p.name = name;
  Inst mov;
  mov.op = Op::kMov;
  Inst wait;
  wait.op = Op::kWaitFlag;
  Inst set;
  set.op = Op::kSetFlag;
  p.insts = {mov, wait, set, mov};
  return p;
}

TEST(TracePerfetto, TracksNestUnderTheChipInTheJsonsOrder) {
  const Program p = MakeProgram("k");
  Trace t = FreshTrace();
  t.NameTrack(1, 2, "AI core 1", "MTE2");
  t.NameTrack(0, 5, "AI core 0", "VECTOR");
  t.NameTrack(0, 1, "AI core 0", "MTE1");
  t.NameTrack(Trace::kHbm, 0, "HBM", "traffic");
  t.Instruction(0, Pipe::kMte1, &p, 0, 0, 10, false);
  t.Count(Trace::kHbm, "HBM GB/s", 0, 5);
  const Read r = Parse(t.ToPerfetto(1000));
  ASSERT_EQ(r.first_error, "");
  std::vector<std::pair<std::string, int>> children;  // path, rank, in the order descriptors come
  for (const auto& [uuid, d] : r.tracks) children.push_back({r.Path(uuid), d.sibling_order_rank()});
  const std::vector<std::pair<std::string, int>> want = {
      {"simulated chip (1000 MHz)", 0},
      {"simulated chip (1000 MHz)/AI core 0", 0},
      {"simulated chip (1000 MHz)/AI core 1", 1},
      {"simulated chip (1000 MHz)/HBM", 2},
      {"simulated chip (1000 MHz)/AI core 0/MTE1", 1},
      {"simulated chip (1000 MHz)/AI core 0/VECTOR", 5},
      {"simulated chip (1000 MHz)/AI core 1/MTE2", 2},
      {"simulated chip (1000 MHz)/HBM/traffic", 0},
      {"simulated chip (1000 MHz)/HBM/HBM GB/s", 1000},
  };
  EXPECT_EQ(children, want);
  for (const auto& [uuid, d] : r.tracks) {
    EXPECT_EQ(d.child_ordering(), pf::TrackDescriptor::EXPLICIT);
    EXPECT_EQ(d.has_counter(), d.name() == "HBM GB/s");
  }
}

TEST(TracePerfetto, SlicesAreBeginsAndEndsInNanosecondsAndNest) {
  const Program p = MakeProgram("conv");
  Trace t = FreshTrace();
  t.NameTrack(0, 4, "AI core 0", "Cube");
  // A wait released at cycle 100 as the instruction after it starts: zero
  // cycles, recorded after the longer slice that starts with it.
  t.Instruction(0, Pipe::kCube, &p, 0, 100, 150, false);
  t.Instruction(0, Pipe::kCube, &p, 1, 100, 100, false);
  t.Instruction(0, Pipe::kCube, &p, 0, 150, 160, true);
  t.Instruction(0, Pipe::kCube, &p, 3, 165, 175, true);  // merged into the one before
  const Read r = Parse(t.ToPerfetto(2000));  // 2 GHz: a cycle is half a nanosecond
  ASSERT_EQ(r.first_error, "");
  ASSERT_EQ(r.slices.size(), 3u);
  EXPECT_EQ(r.slices[0].name, "mov");
  EXPECT_EQ(r.slices[0].begin, 50u);
  EXPECT_EQ(r.slices[0].end, 75u);
  EXPECT_EQ(r.slices[0].depth, 0);
  EXPECT_EQ(r.slices[1].name, "wait_flag");
  EXPECT_EQ(r.slices[1].begin, 50u);
  EXPECT_EQ(r.slices[1].end, 50u);
  EXPECT_EQ(r.slices[1].depth, 1);
  EXPECT_EQ(r.slices[2].begin, 75u);
  EXPECT_EQ(r.slices[2].end, 88u);  // cycle 175 = 87.5 ns, rounded
  EXPECT_EQ(r.slices[2].depth, 0);
  EXPECT_EQ(r.slices[2].track, "simulated chip (2000 MHz)/AI core 0/Cube");
  // The JSON's arguments: the kernel, pc and text; count and busy cycles when merged.
  EXPECT_EQ(r.slices[0].args.at("kernel"), "conv");
  EXPECT_EQ(r.slices[0].args.at("pc"), "0");
  EXPECT_EQ(r.slices[0].args.count("count"), 0u);
  EXPECT_EQ(r.slices[2].args.at("count"), "2");
  EXPECT_EQ(r.slices[2].args.at("busy_cycles"), "20");
  EXPECT_EQ(r.slices[2].args.at("inst"), r.slices[0].args.at("inst"));
  EXPECT_EQ(r.interned_names, 2);  // mov and wait_flag, each once
}

TEST(TracePerfetto, FlagsAreFlowsFromTheSetToTheWait) {
  const Program p = MakeProgram("k");
  Trace t = FreshTrace();
  t.Instruction(0, Pipe::kMte2, &p, 2, 0, 1, false, /*flow_out=*/0);
  t.Instruction(0, Pipe::kMte1, &p, 1, 0, 5, false, -1, /*flow_in=*/0);
  const Read r = Parse(t.ToPerfetto(1000));
  ASSERT_EQ(r.first_error, "");
  ASSERT_EQ(r.slices.size(), 2u);
  const auto& set = r.slices[0].name == "set_flag" ? r.slices[0] : r.slices[1];
  const auto& wait = r.slices[0].name == "set_flag" ? r.slices[1] : r.slices[0];
  EXPECT_EQ(set.flows_out, std::vector<uint64_t>{1});
  EXPECT_EQ(wait.flows_in, std::vector<uint64_t>{1});
  EXPECT_TRUE(set.flows_in.empty());
  EXPECT_TRUE(wait.flows_out.empty());
}

TEST(TracePerfetto, CountersAreTheJsonsWindowedSamples) {
  Trace t = FreshTrace();  // 100-cycle windows
  t.Count(Trace::kHbm, "HBM GB/s", 0, 10, /*rate=*/true);
  t.Count(Trace::kHbm, "HBM GB/s", 50, 30, true);
  t.Count(Trace::kHbm, "HBM GB/s", 250, 0, true);
  const Read r = Parse(t.ToPerfetto(1000));
  ASSERT_EQ(r.first_error, "");
  const std::vector<Trace::Series> series = t.CounterSeries(t.WrittenSpan());
  ASSERT_EQ(series.size(), 1u);
  ASSERT_EQ(r.counters.size(), series[0].samples.size());
  for (size_t i = 0; i < r.counters.size(); ++i) {
    EXPECT_EQ(r.counters[i].first, "simulated chip (1000 MHz)/process 100000/HBM GB/s");
    EXPECT_EQ(r.counters[i].second.first, static_cast<uint64_t>(series[0].samples[i].first));  // 1 GHz: ns = cycles
    EXPECT_DOUBLE_EQ(r.counters[i].second.second, series[0].samples[i].second);
  }
  EXPECT_DOUBLE_EQ(r.counters[0].second.second, 20);  // the first window's average
}

TEST(TracePerfetto, ATruncatedTraceSaysSo) {
  const Program p = MakeProgram("k");
  TraceOptions o;
  o.max_events = 1;
  Trace t = FreshTrace(o);
  t.Instruction(0, Pipe::kMte2, &p, 0, 0, 10, false);
  t.Instruction(0, Pipe::kMte2, &p, 0, 10, 20, false);
  ASSERT_TRUE(t.truncated());
  const Read r = Parse(t.ToPerfetto(1000));
  ASSERT_EQ(r.first_error, "");
  EXPECT_EQ(r.slices.size(), 1u);
  ASSERT_EQ(r.instants.size(), 1u);
  EXPECT_NE(r.instants[0].find("truncated"), std::string::npos);
}

TEST(TracePerfetto, WriteGivesTheFormAsked) {
  Trace t = FreshTrace();
  t.Named(Trace::kHost, 0, "launch", 0, 10);
  EXPECT_EQ(t.Write(TraceFormat::kPerfetto, 1000), t.ToPerfetto(1000));
  EXPECT_EQ(t.Write(TraceFormat::kJson, 1000), t.ToJson(1000));
}

}  // namespace
}  // namespace kiln::sim
