//===- npusim_executable.h - Running npusim artifacts on the model -*- C++ -*-===//
//
// An npusim artifact loaded onto a simulated device (sim::Device): constants
// are written to device memory once, programs are verified against the
// machine and kept. Each run copies the inputs host->device over the
// modeled PCIe link, enqueues every task on a compute stream (AI-core
// kernels; AICPU tasks that run the reference kernel on the device's
// buffers), copies the outputs back, and simulates it all.
//
// With batches > 1 the run streams that many batches through two
// activation regions: the inputs of batch i+1 go over PCIe while batch i
// computes, and the outputs of batch i come back while batch i+1 computes
// (a copy-in stream, a compute stream and a copy-out stream ordered by
// events). A training loop (NpusimRunOptions::feeds) runs its steps as
// such batches, its parameters and optimizer state staying on the device
// from step to step.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/ir/graph.h"
#include "graph/ir/tensor.h"
#include "runtime/device_module.h"
#include "runtime/loaded_model.h"
#include "runtime/step_loop.h"
#include "sim/model/device.h"
#include "sim/model/roofline.h"
#include "target/artifact/artifact.pb.h"

namespace kiln::target {

// functional = false: timing only (kernels and AICPU tasks skip their
// arithmetic). A training loop (feeds) is sunk onto the device: the batches
// are its steps, and each feed's output (NAME.next) of one step is copied
// within device memory into its input (NAME) of the next. The fed inputs
// cross PCIe once (the first step) and the fed outputs once (the last
// step's); the other inputs are staged for every step while the one before
// computes.
using NpusimRunOptions = RunOptions;

// What a run measured, beside the simulator's own statistics.
struct NpusimRunSummary {
  sim::RunStats stats;
  int batches = 1;
  bool loop = false;  // the batches were the steps of a loop with feeds
  int64_t fed_bytes = 0;  // a loop: the bytes of the fed inputs (the variables)
  int64_t donated_bytes = 0;  // ... of which computed in place (Buffer.donated: no copy between steps)
  double compute_cycles = 0;   // one batch's tasks, from the first kernel's start to the last task's end
  // One batch's host<->device copies at the link's bandwidth and latency,
  // in the slower direction (H2D and D2H have a lane each).
  double transfer_cycles = 0;
  double estimated_cycles = 0; // the code generators' estimates, summed over the kernel tasks
};

class NpusimExecutable final : public runtime::DeviceModule {
 public:
  // `model` is the artifact's parsed graph (AICPU tasks run its nodes).
  static absl::StatusOr<std::unique_ptr<NpusimExecutable>> Load(const artifact::Artifact& artifact,
                                                                const Model* model);
  ~NpusimExecutable();

  // Runs the inputs (signature order, already checked) and returns the
  // outputs (signature order). With batches > 1 every batch takes the same
  // inputs; the outputs are the last batch's.
  absl::StatusOr<std::vector<Tensor>> Run(std::vector<Tensor> inputs, const NpusimRunOptions& options) override;

  // The DeviceModule side: a simulated device has every run feature but
  // wall-clock latency.
  RunFeatures features() const override;
  int replicas() const override;
  std::string Describe(const RunOptions& options) const override;
  // `title` names the run (the artifact's file and gear): the roofline's
  // title adds the machine and the precision.
  absl::StatusOr<std::string> Report(ReportKind kind, const std::string& title) const override;
  std::vector<std::string> Warnings() const override;
  std::vector<std::pair<std::string, int64_t>> TasksPerEngine() const override;

  const NpusimRunSummary& summary() const { return summary_; }
  const sim::Device& device() const { return *device_; }
  const sim::Machine& machine() const { return machine_; }
  // The report of the last run: the simulator's per-kernel and per-pipe
  // table, then per-task engine totals and the batch throughput.
  std::string ReportText() const;
  std::string ReportCsv() const;
  // The last run's tasks of the first batch, one row each (ReportKind::kTasksCsv).
  std::string ReportTasksCsv() const;
  // The last run's first batch under the machine's roofs: one point per
  // kernel task, named after its node (sim/model/roofline.h).
  std::vector<sim::RooflinePoint> Roofline() const;

 private:
  NpusimExecutable() = default;
  // A task of the last run's first batch as the reports show it.
  struct TaskRow {
    std::string name, engine, bound;
    bool shown = false;  // ran a kernel or an AICPU span (views and unmatched tasks only count)
    double cycles = 0, estimated = 0;
    double cube = -1;    // cube utilization; < 0: not a kernel
    int cores = 0;
    int64_t hbm_read = 0, hbm_write = 0;
    double l2_hit_rate = -1;  // < 0: no L2, or nothing read
    double energy_uj = -1;  // a kernel's actions (sim/model/energy.h); < 0: none modeled
  };
  std::vector<TaskRow> TaskRows() const;
  // A data-parallel module (replicas > 1): inputs whose leading dim is
  // `replicas` times the module's are split into one shard per chip. Chip 0
  // runs on the model with its shard (returned); each other chip's AllReduce
  // inputs come from the reference executor on its shard (timing does not
  // depend on data, so the chips run in step and only chip 0 is simulated).
  // Inputs of one chip's size: every chip holds the same data.
  absl::StatusOr<std::vector<Tensor>> ShardInputs(std::vector<Tensor> inputs);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<sim::Device> device_;
  sim::Machine machine_;
  NpusimRunSummary summary_;
  int replicas_ = 1;
  int tasks_ = 0;
  std::string precision_;
  std::vector<std::pair<std::string, int64_t>> tasks_per_engine_;
};

// The npusim module of a loaded .kiln artifact (of the gear that ran last),
// or null.
const NpusimExecutable* NpusimOf(const runtime::LoadedModel& model);

// What loads the npusim module of a .kiln artifact onto a simulated device.
runtime::ModuleLoader NpusimModuleLoader();

// Loads an npusim .kiln artifact for running: its npusim module on a
// simulated device.
absl::StatusOr<std::unique_ptr<runtime::LoadedModel>> LoadNpusimArtifact(const std::string& path);

}  // namespace kiln::target
