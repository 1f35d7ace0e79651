//===- kernel_harness.cc - Runs one generated npusim kernel ---------------===//
#include "tests/npusim/kernel_harness.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "graph/exec/executor.h"
#include "sim/model/roofline.h"

namespace kiln::testing {

absl::StatusOr<KernelRun> RunKernelOnSim(const target::npusim::GeneratedKernel& kernel, const Node& node,
                                         const absl::flat_hash_map<const Value*, Tensor>& inputs,
                                         const sim::Machine& machine, bool functional) {
  auto dev = sim::Device::Create(machine);
  if (!dev.ok()) return dev.status();
  sim::Device& d = **dev;
  // The arguments in launch order: inputs, outputs, body constants, the
  // workspace; constants the kernel reads as fractals laid out as the driver does.
  size_t first_output = 0;
  const std::vector<const Value*> values = target::npusim::LaunchValues(node, kernel, &first_output);
  auto is_output = [&](size_t i) { return i >= first_output && i < first_output + node.outputs().size(); };
  std::vector<Tensor> data;
  for (size_t i = 0; i < values.size(); ++i) {
    const Value* v = values[i];
    if (is_output(i)) {
      data.push_back(Tensor(v->type().dtype(), v->type().shape().StaticDims()));
    } else if (v->is_constant()) {
      data.push_back(v->constant());
    } else {
      auto it = inputs.find(v);
      if (it == inputs.end()) return absl::InvalidArgumentError(absl::StrCat("no value for input '", v->name(), "'"));
      data.push_back(it->second);
    }
  }
  for (const target::npusim::FractalConstant& f : kernel.fractal_constants) {
    if (f.arg < 0 || f.arg >= static_cast<int>(data.size())) return absl::InternalError("bad fractal argument");
    data[f.arg] = target::npusim::FractalImage(data[f.arg], f);
  }
  std::vector<sim::DevAddr> args;
  std::vector<std::pair<sim::DevAddr, Tensor>> outs;
  for (size_t i = 0; i < data.size(); ++i) {
    const Tensor& t = data[i];
    auto a = d.Malloc(std::max<int64_t>(static_cast<int64_t>(t.nbytes()), 1));
    if (!a.ok()) return a.status();
    args.push_back(*a);
    if (is_output(i)) {
      outs.push_back({*a, t});
    } else if (t.nbytes()) {
      if (absl::Status st = d.Write(*a, t.raw(), static_cast<int64_t>(t.nbytes())); !st.ok()) return st;
    }
  }
  if (kernel.workspace_bytes > 0) {
    auto a = d.Malloc(kernel.workspace_bytes);
    if (!a.ok()) return a.status();
    args.push_back(*a);
  }
  auto k = d.LoadProgram(kernel.program);
  if (!k.ok()) return k.status();
  sim::StreamId s = d.CreateStream();
  // A timing-only run computes the kernels whose control flow reads data,
  // as the npusim executable launches them.
  if (absl::Status st = d.Launch(s, *k, kernel.block_dim, args, !kernel.steering_inputs.empty()); !st.ok()) return st;
  sim::RunOptions ro;
  ro.functional = functional;
  auto stats = d.Run(ro);
  if (!stats.ok()) return stats.status();
  // Every kernel keeps the timing rule the roofline states: no faster than
  // its units' peak rates and HBM's bandwidth allow (sim/model/roofline.h).
  for (const sim::RooflinePoint& p : sim::Roofline(*stats, d.machine()))
    if (p.efficiency() > 1 + 1e-9)
      return absl::InternalError(absl::StrCat("kernel ", p.name, " beats its roofs: ", p.cycles, " cycles against ",
                                              p.compute_bound(), " (compute) and ", p.memory_bound, " (HBM)"));
  KernelRun run;
  run.stats = *stats;
  for (auto& [addr, t] : outs) {
    if (t.nbytes()) {
      if (absl::Status st = d.Read(addr, t.raw(), static_cast<int64_t>(t.nbytes())); !st.ok()) return st;
    }
    run.outputs.push_back(std::move(t));
  }
  return run;
}

absl::StatusOr<std::vector<Tensor>> RunNodeOnReference(const Node& node,
                                                       const absl::flat_hash_map<const Value*, Tensor>& inputs) {
  Executor exec;
  return exec.RunNode(node, [&](const Value* v) -> const Tensor* {
    auto it = inputs.find(v);
    return it == inputs.end() ? nullptr : &it->second;
  });
}

double MaxRelativeError(const Tensor& a, const Tensor& b) {
  if (a.numel() != b.numel()) return INFINITY;
  double worst = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = a.GetDouble(i), y = b.GetDouble(i);
    if (std::isnan(x) != std::isnan(y)) return INFINITY;
    if (std::isnan(x)) continue;
    if (std::isinf(x) || std::isinf(y)) {
      if (x != y) return INFINITY;
      continue;
    }
    worst = std::max(worst, std::fabs(x - y) / std::max(1.0, std::fabs(y)));
  }
  return worst;
}

Tensor RandomTensor(DType dt, const Dims& dims, uint32_t seed) {
  Tensor f(DType::kF32, dims);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& x : f.span<float>()) x = u(rng);
  return dt == DType::kF32 ? f : CastTensor(f, dt);
}

Tensor UniformTensor(DType dt, const Dims& dims, double lo, double hi, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  Tensor f(DType::kF32, dims);
  for (int64_t i = 0; i < f.numel(); ++i) {
    double v = u(gen);
    if (dt == DType::kI32) v = std::round(v);
    f.data<float>()[i] = static_cast<float>(v);
  }
  return dt == DType::kF32 ? f : CastTensor(f, dt);
}

}  // namespace kiln::testing
