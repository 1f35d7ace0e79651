//===- trace.h - Profiling traces of a run ----------------------*- C++ -*-===//
//
// The model records what each pipe of each core did as slices on tracks, the
// flag hand-offs between pipes as flows, and counters (HBM bandwidth, buffer
// footprints). ToJson() writes Chrome trace-event JSON, which Perfetto and
// chrome://tracing open: a process per AI core with a track per pipe named
// as Ascend's tools name them (SCALAR, MTE1, MTE2, MTE3, Cube, VECTOR, FIXP),
// and processes for HBM, the AICPU cluster, the host's streams, PCIe and the
// chip links (collectives).
//
// Large traces stay usable (TraceOptions): consecutive identical
// instructions on a track become one slice with a count when they abut or
// leave a gap of at most merge_gap_cycles (its args give the instructions'
// busy cycles); counters are written one sample per counter_window_cycles
// (a rate such as HBM's bandwidth as the window's average, a level such as
// a buffer's footprint as its peak), and only when the value changes; a
// trace may be limited to a window of cycles or to the kernels whose name
// matches a regular expression; past max_events recording stops with
// truncated() set (the writer then says so in the trace's metadata).
// ToJsonGz() writes the same JSON gzip-compressed (.json.gz), which
// Perfetto and chrome://tracing open as they are. ToPerfetto() writes the
// same tracks, slices, flows and counters in Perfetto's own protobuf format
// (.pftrace; trace_perfetto.cc), with names and instruction texts interned:
// the smallest form, and the fastest for Perfetto to load.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sim/isa/isa.h"

namespace kiln::sim {

struct TraceOptions {
  int64_t max_events = 4'000'000;   // events kept before the trace is truncated
  double merge_gap_cycles = 16;     // same-op slices this close on a track become one (0: only abutting ones)
  double counter_window_cycles = 100;  // one counter sample per window (0: every change)
  double from = 0, to = 0;          // the cycles recorded (to 0: to the end)
  std::string kernels;              // ECMAScript regex: only kernels whose name it matches (empty: all)
};

// The forms a trace is written in (the caller chooses: kiln's tools by the
// file's name, target::TraceKindOf).
enum class TraceFormat { kJson, kJsonGz, kPerfetto };

class Trace {
 public:
  // Process ids of the non-core processes; AI core c is process c.
  static constexpr int kHbm = 100000, kAicpu = 100001, kHost = 100002, kPcie = 100003, kLinks = 100004,
                       kPower = 100005, kL2 = 100006;

  struct Slice {
    int pid, tid;
    double start, end;           // cycles
    const Program* program;      // instruction slices: the program and pc
    int32_t pc;
    int32_t label;               // other slices: an index into labels()
    int32_t count;               // instructions merged into this slice
    int64_t flow_out, flow_in;   // flow ids leaving / entering this slice, -1 for none
    double busy;                 // cycles its instructions took (end - start less the gaps merged over)
  };
  struct Counter {
    int pid;
    int32_t label;  // the counter's name, an index into labels()
    double t, value;
    bool rate;      // a rate (averaged over a window) rather than a level (its peak)
  };

  void Reset(const TraceOptions& options);
  bool enabled() const { return enabled_; }
  void set_enabled(bool e) { enabled_ = e; }

  // An instruction slice; merges it into the track's last slice when that
  // ran the same op back to back (`mergeable`).
  void Instruction(int core, Pipe pipe, const Program* prog, int pc, double start, double end, bool mergeable,
                   int64_t flow_out = -1, int64_t flow_in = -1);
  // A named slice (stream ops, PCIe transfers, AICPU tasks, collectives, scalar runs).
  void Named(int pid, int tid, const std::string& name, double start, double end, bool mergeable = false);
  // A counter's new value from cycle t on; `rate`: bytes per second and
  // the like, averaged over a window when written (else its peak).
  void Count(int pid, const std::string& name, double t, double value, bool rate = false);
  void NameTrack(int pid, int tid, const std::string& process, const std::string& thread);
  // Dynamic energy spent evenly over the cycles [start, end] (an
  // instruction's action, a transfer). It is written as the counter
  // "chip power W" of the Power process: per counter window, the energy
  // spent in it over its time at `clock_mhz`, plus `static_watts`
  // (SetPower, which also names the track).
  void Energy(double start, double end, double pj);
  void SetPower(double static_watts, double clock_mhz);

  struct TrackName {
    int pid, tid;
    std::string process, thread;
  };

  const std::vector<Slice>& slices() const { return slices_; }
  const std::vector<TrackName>& track_names() const { return names_; }
  const std::vector<Counter>& counters() const { return counters_; }
  const std::vector<std::string>& labels() const { return labels_; }
  bool truncated() const { return truncated_; }

  // What the writers write. The span of cycles: the window, narrowed to
  // the kept kernels' span when only some kernels are traced (to 0: to the
  // end); instruction slices are all within it, other slices are written
  // when they touch it.
  struct Span {
    double from = 0, to = 0;
    bool Touches(const Slice& s) const { return s.end >= from && (to <= 0 || s.start <= to); }
  };
  Span WrittenSpan() const;
  // A slice's name: an instruction's op with its types ("vadd.f16"), else its label.
  std::string SliceName(const Slice& s) const;
  // The counters as written, a series per (process, name) in the order
  // first recorded: one sample per window from the span's start (a rate the
  // window's average, a level its peak), each where the value changes.
  struct Series {
    int pid;
    int32_t label;
    bool rate;
    std::vector<std::pair<double, double>> samples;  // (cycle, value)
  };
  std::vector<Series> CounterSeries(const Span& span) const;

  // Chrome trace-event JSON; timestamps in microseconds at `clock_mhz`.
  std::string ToJson(double clock_mhz) const;
  // The same, gzip-compressed.
  std::string ToJsonGz(double clock_mhz) const;
  // Perfetto's protobuf trace; timestamps in whole nanoseconds at `clock_mhz`.
  std::string ToPerfetto(double clock_mhz) const;
  std::string Write(TraceFormat format, double clock_mhz) const;

 private:
  bool Room();
  int32_t Label(const std::string& s);
  // Whether [start, end] lies in the recorded window.
  bool InWindow(double start, double end) const;
  // Whether `prog`'s slices are kept (TraceOptions::kernels).
  bool KeepsProgram(const Program* prog);

  bool enabled_ = false;
  bool truncated_ = false;
  TraceOptions options_;
  std::vector<std::pair<const Program*, bool>> kept_programs_;
  std::vector<Slice> slices_;
  std::vector<Counter> counters_;
  std::vector<std::string> labels_;
  std::vector<TrackName> names_;
  // Energy per power window (picojoules), the windows' width in cycles,
  // the static power and the clock (SetPower).
  std::vector<double> energy_bins_;
  double energy_bin_cycles_ = 100, static_watts_ = 0, power_clock_mhz_ = 0;
  int32_t power_label_ = -1;  // "chip power W" in labels(), once SetPower named it
  // Index of the last slice on each (pid, tid), for merging.
  std::vector<std::pair<int64_t, int64_t>> last_;  // key = pid * 64 + tid, index
};

}  // namespace kiln::sim
