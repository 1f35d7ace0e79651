//===- version.h - The version of the target API ----------------*- C++ -*-===//
//
// The target API (the headers of target/api/ and the graph IR they expose)
// is compiled into kiln and into every target plugin. A plugin says which
// version it was built against (KILN_TARGET_PLUGIN in target_registry.h);
// kiln refuses a plugin of another version, naming both, before it calls
// anything in it: a plugin built against other class layouts would crash
// instead of failing.
//
// Bump KILN_TARGET_API_VERSION whenever a declaration in target/api/ or a
// layout in graph/ir/ changes.
//
//===----------------------------------------------------------------------===//
#pragma once

// Version 1: compile only (kiln_register_targets without a version).
// Version 2: the runtime half (Executable), declared settings, host kernels,
// the versioned entry point.
// Version 3: TilingFigures describe persistent GEMM schedules (engine
// latencies, bursts, issue queues), so a target's matrix kernels take their
// tiling from the shared cost model.
// Version 4: ReportKind::kTasksCsv, a run's tasks one per row (`kiln run
// --report-tasks`, `kiln diff`); kTraceJsonGz; RunOptions say what a trace
// covers (trace_from, trace_to, trace_kernels) and take a progress callback.
// Version 5: ReportKind::kTracePerfetto (Perfetto's protobuf trace) and
// TraceKindOf, the trace kind a file's name asks for.
// Version 6: TaskReportRow::energy_uj, and kTasksCsvHeader's energy_uj
// column (a run's tasks with their energy).
// Version 7: TargetDescription::golden and TargetRegistry::DefaultTarget, so
// the driver's default target is the one that declares itself golden.
// Version 8: TaskReportRow::l2_hit_rate, and kTasksCsvHeader's l2_hit_rate
// column (the share of GM reads a cache served).
// Version 9: TargetDescription::links (LinkFigures), the links between
// devices that the shared bucket planner times collectives with.
#define KILN_TARGET_API_VERSION 9

// kiln's own release, printed by `kiln --version` and recorded by the CMake
// package (KilnConfigVersion.cmake).
#define KILN_VERSION_STRING "0.9.0"

namespace kiln::target {

inline constexpr int kTargetApiVersion = KILN_TARGET_API_VERSION;

}  // namespace kiln::target
