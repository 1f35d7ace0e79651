//===- cmd_sim.cc - `kiln sim` --------------------------------------------===//
//
// Runs a hand-written NPU program (.kasm) on the SystemC model: fills its
// global-memory arguments as the file says, launches it with its block
// dimension, writes the arguments marked `output=` as .npy files, and prints
// the cycle count (and with --report the per-pipe summary).
//
//===----------------------------------------------------------------------===//
#include <filesystem>
#include <iostream>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "graph/io/npy.h"
#include "graph/support/read_file.h"
#include "sim/isa/asm.h"
#include "sim/machine/machine.h"
#include "sim/model/device.h"
#include "sim/model/report.h"
#include "sim/model/roofline.h"
#include "target/api/executable.h"
#include "tools/kiln/cli_util.h"
#include "tools/kiln/progress_line.h"

ABSL_DECLARE_FLAG(std::string, output_dir);
ABSL_FLAG(std::string, machine, "", "Machine description (.textproto) for `kiln sim`; default ascend910-like.");
ABSL_FLAG(std::string, trace, "", "Write a Chrome trace-event JSON of the run to this file.");
ABSL_FLAG(std::string, trace_window, "", "Trace only the cycles START:END (END left out: to the end).");
ABSL_FLAG(std::string, trace_kernels, "", "Trace only the kernels whose name matches this regular expression.");
ABSL_FLAG(bool, report, false, "Print the per-kernel, per-pipe report.");
ABSL_FLAG(std::string, report_csv, "", "Write the report as CSV to this file.");
ABSL_FLAG(std::string, roofline, "", "Write the roofline of the run: FILE.svg (the chart) or FILE.csv (the table).");
ABSL_FLAG(bool, timing_only, false, "Skip the arithmetic: time the program without computing values.");
ABSL_FLAG(double, cycle_limit, kiln::cli::kDefaultCycleLimit,
          "Stop a `kiln sim` run with an error past this many cycles.");

namespace kiln::cli {
namespace {

// The graph dtype that holds a sim dtype's values in a .npy file.
kiln::DType GraphDType(sim::DType t) {
  switch (t) {
    case sim::DType::kF32: return kiln::DType::kF32;
    case sim::DType::kF16: return kiln::DType::kF16;
    case sim::DType::kBF16: return kiln::DType::kBF16;
    case sim::DType::kS32: return kiln::DType::kI32;
    case sim::DType::kS8: return kiln::DType::kI8;
    case sim::DType::kNone: break;
  }
  return kiln::DType::kUndefined;
}

int Sim(const std::vector<std::string>& args) {
  if (args.size() != 1) return Fail("sim takes one program (PROGRAM.kasm)");
  if (!absl::GetFlag(FLAGS_output_dir).empty() && absl::GetFlag(FLAGS_timing_only))
    return Fail("--output-dir: a --timing-only run computes no outputs to write");
  absl::StatusOr<TraceScope> scope = TraceScopeFromFlags();
  if (!scope.ok()) return Fail(scope.status());
  const std::string& path = args[0];
  auto text = ReadFileBytes(path);
  if (!text.ok()) return Fail(text.status());
  auto file = sim::Assemble(*text, path);
  if (!file.ok()) return Fail(file.status());

  sim::Machine machine = sim::DefaultMachine();
  if (std::string r = absl::GetFlag(FLAGS_roofline); !r.empty())
    if (absl::Status st = CheckRooflinePath(r); !st.ok()) return Fail(st);
  // A program names its output files under --output-dir, never elsewhere.
  for (size_t i = 0; i < file->data.size() && i < file->program.args.size(); ++i) {
    const std::filesystem::path out(file->data[i].output);
    bool escapes = out.is_absolute();
    for (const auto& part : out) escapes |= part == "..";
    if (escapes)
      return Fail(absl::StrCat("argument ", file->program.args[i].name, ": output \"", file->data[i].output,
                               "\" must be a relative path inside --output-dir"));
  }
  if (std::string m = absl::GetFlag(FLAGS_machine); !m.empty()) {
    auto loaded = sim::LoadMachine(m);
    if (!loaded.ok()) return Fail(loaded.status());
    machine = *std::move(loaded);
  }
  auto dev = sim::Device::Create(machine);
  if (!dev.ok()) return Fail(dev.status());
  sim::Device& d = **dev;
  const sim::Program& prog = file->program;
  auto kernel = d.LoadProgram(prog);
  if (!kernel.ok()) return Fail(kernel.status());

  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::vector<sim::DevAddr> addrs;
  for (size_t i = 0; i < prog.args.size(); ++i) {
    const sim::Arg& a = prog.args[i];
    const sim::ArgData& data = file->data[i];
    auto addr = d.Malloc(a.Bytes());
    if (!addr.ok()) return Fail(addr.status());
    addrs.push_back(*addr);
    int64_t count = a.Bytes() / sim::DTypeSize(a.dtype);
    if (data.init == sim::InitKind::kRandom) {
      std::vector<uint8_t> bytes(a.Bytes());
      sim::RandomFill(a.dtype, data.seed, bytes.data(), count);
      if (absl::Status s = d.Write(*addr, bytes.data(), a.Bytes()); !s.ok()) return Fail(s);
    } else if (data.init == sim::InitKind::kNpy) {
      std::string npy = (dir / data.npy).string();
      auto t = ReadNpy(npy);
      if (!t.ok()) return Fail(t.status());
      if (t->dtype() != GraphDType(a.dtype) || t->numel() != count)
        return Fail(absl::StrCat("argument ", a.name, ": '", npy, "' holds ", kiln::DTypeName(t->dtype()), " x ",
                                 t->numel(), ", expected ", sim::DTypeName(a.dtype), " x ", count));
      if (absl::Status s = d.Write(*addr, t->raw(), a.Bytes()); !s.ok()) return Fail(s);
    }
  }
  sim::StreamId stream = d.CreateStream();
  if (absl::Status s = d.Launch(stream, *kernel, file->block_dim, addrs); !s.ok()) return Fail(s);

  sim::RunOptions opt;
  opt.functional = !absl::GetFlag(FLAGS_timing_only);
  opt.trace = !absl::GetFlag(FLAGS_trace).empty();
  opt.trace_options.from = scope->from;
  opt.trace_options.to = scope->to;
  opt.trace_options.kernels = scope->kernels;
  opt.cycle_limit = absl::GetFlag(FLAGS_cycle_limit);
  ProgressLine progress;
  if (progress.active())
    opt.progress = [&progress](double cycles) {
      progress.Show(absl::StrFormat("%.2f M cycles simulated", cycles / 1e6));
    };
  auto stats = d.Run(opt);
  progress.Clear();
  if (!stats.ok()) return Fail(stats.status());

  // Outputs are files only where --output-dir asks for them, never in the
  // working directory unasked; without it their first values are printed.
  const std::string dir_flag = absl::GetFlag(FLAGS_output_dir);
  std::filesystem::path out_dir = dir_flag;
  for (size_t i = 0; i < prog.args.size(); ++i) {
    const sim::Arg& a = prog.args[i];
    if (file->data[i].output.empty()) continue;
    Dims dims(a.shape.begin(), a.shape.end());
    Tensor t(GraphDType(a.dtype), dims);
    if (absl::Status s = d.Read(addrs[i], t.raw(), a.Bytes()); !s.ok()) return Fail(s);
    if (!opt.functional) {
      std::cout << a.name << ": " << sim::DTypeName(a.dtype) << "[" << absl::StrJoin(a.shape, ",")
                << "] not computed (--timing-only)\n";
      continue;
    }
    if (dir_flag.empty()) {
      std::cout << a.name << ": " << Summarize(t) << " (--output-dir=DIR writes DIR/" << file->data[i].output << ")\n";
      continue;
    }
    std::filesystem::path out = out_dir / file->data[i].output;
    if (!out.parent_path().empty()) std::filesystem::create_directories(out.parent_path());
    if (absl::Status s = WriteNpy(out.string(), t); !s.ok()) return Fail(s);
    std::cout << a.name << ": wrote " << out.string() << "\n";
  }
  std::cout << absl::StrFormat("%s: %.0f cycles (%.3f us at %.0f MHz), %d instructions, block_dim %d\n", prog.name,
                               stats->total_cycles, stats->seconds * 1e6, machine.chip().clock_mhz(),
                               stats->instructions, file->block_dim);
  if (absl::GetFlag(FLAGS_report))
    std::cout << sim::ReportText(*stats, machine) << "\n"
              << sim::RooflineText(sim::Roofline(*stats, machine), sim::MachineRoofs(machine));
  if (std::string csv = absl::GetFlag(FLAGS_report_csv); !csv.empty())
    if (absl::Status s = WriteFile(csv, sim::ReportCsv(*stats, machine)); !s.ok()) return Fail(s);
  if (std::string r = absl::GetFlag(FLAGS_roofline); !r.empty())
    if (absl::Status s = WriteRoofline(r, sim::Roofline(*stats, machine), sim::MachineRoofs(machine),
                                       absl::StrCat(prog.name, " on ", machine.name()));
        !s.ok())
      return Fail(s);
  if (std::string tr = absl::GetFlag(FLAGS_trace); !tr.empty()) {
    const double mhz = machine.chip().clock_mhz();
    const target::ReportKind kind = target::TraceKindOf(tr);
    const sim::TraceFormat format = kind == target::ReportKind::kTracePerfetto ? sim::TraceFormat::kPerfetto
                                    : kind == target::ReportKind::kTraceJsonGz ? sim::TraceFormat::kJsonGz
                                                                               : sim::TraceFormat::kJson;
    if (absl::Status s = WriteFile(tr, d.trace().Write(format, mhz)); !s.ok())
      return Fail(s);
    if (d.trace().truncated())
      std::cerr << "kiln: warning: the trace reached its size bound and was truncated\n";
  }
  return 0;
}

}  // namespace

extern const Command kSimCommand;
const Command kSimCommand = {
    "sim", "run hand-written NPU assembly on the SystemC model",
    R"(usage: kiln sim PROGRAM.kasm [--machine=FILE] [--trace=FILE] [--trace-window=START:END] [--trace-kernels=REGEX]
                 [--report] [--report-csv=FILE] [--roofline=FILE]
                 [--timing-only] [--cycle-limit=N] [--output-dir=DIR]

Assembles PROGRAM.kasm (docs/kasm.md), fills its global-memory arguments as
their `.arg` lines say (zeros, init=random(SEED), init=npy("FILE") relative to
the .kasm file), runs it with its `.block_dim` on the NPU model, writes each
argument marked output="FILE" as a .npy under --output-dir (without it, prints
the output's first values), and prints the cycle count. Deadlocks, runaway programs and bad memory accesses are errors.

flags:
  --machine=FILE       machine description (sim/machines/*.textproto); default ascend910-like
  --trace=FILE         the trace: Perfetto's protobuf format when FILE ends in
                       .pftrace, Chrome trace-event JSON otherwise (Perfetto or
                       chrome://tracing), gzip-compressed when FILE ends in .gz
  --trace-window=START:END  trace only these cycles (END left out: to the end)
  --trace-kernels=REGEX  trace only the kernels whose name matches
  --report             per-kernel, per-pipe busy cycles, utilization and bound,
                       then the roofline table
  --report-csv=FILE    the per-kernel, per-pipe report as CSV
  --roofline=FILE      the roofline of the run: FILE.svg (the chart) or FILE.csv
  --timing-only        skip the arithmetic (outputs are not computed; --output-dir
                       is refused with it)
  --cycle-limit=N      stop with an error past N cycles (default 1e10)
  --output-dir=DIR     where outputs are written (none is written without it)
)",
    Sim};

}  // namespace kiln::cli
