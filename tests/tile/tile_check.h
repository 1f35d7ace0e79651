//===- tile_check.h - Lowered tile kernels checked against the reference executor -*- C++ -*-===//
//
// What the interpreter tests share: a graph run node by node on the
// reference executor, and for every node that LowerNode takes, its tile
// kernel run on the tile IR interpreter with the node's actual inputs and
// compared with the node's reference outputs.
//
// Arguments bind as the lowering declares them (tile_lowering.cc's
// KernelArgs): the node's present inputs in order (a value passed twice to
// an op is one argument; the inputs of a kiln.Fused body are distinct),
// its outputs, then the constants of a fused body, by name. Outputs start
// as NaN (integers: a sentinel), so an element the kernel never writes
// shows as a mismatch.
//
// Tolerances: |got - want| <= rtol * (|want| + scale), scale the largest
// |want| of the output (at least 1) times sqrt(K) for a GEMM (K its
// reduction length), so accumulated rounding of long sums is allowed for
// and a wrong element is not. rtol is the caller's (1e-4 for f32 matrix
// inputs, 1e-2 for f16), at least 1e-2 for f16 outputs and 2e-2 for bf16.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/exec/executor.h"
#include "graph/ir/dtype_dispatch.h"
#include "graph/ir/graph.h"
#include "target/builtin_targets.h"
#include "target/backend/tile_interpreter.h"
#include "target/backend/tile_lowering.h"

namespace kiln::tile_check {

using target::tile::TileCostFigures;
using target::tile::TileKernel;

// The figures of a built-in target ("cuda", "npusim").
inline TileCostFigures FiguresOfTarget(const std::string& name) {
  auto t = target::CreateBuiltinTarget(name);
  if (!t.ok()) return {};
  return target::tile::FiguresOf((*t)->description());
}

// A tensor of `dt` with values uniform in [lo, hi) (integers rounded).
inline Tensor Random(DType dt, const Dims& dims, uint32_t seed, double lo = -1, double hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  Tensor t(dt, dims);
  DispatchNumeric(dt, [&]<typename T>() {
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      double v = u(rng);
      p[i] = FromDouble<T>(IsFloat(dt) ? v : std::round(v));
    }
  });
  return t;
}

// What checking one node found.
struct NodeResult {
  bool lowered = false;
  std::string why_not;   // LowerNode's error when it did not take the node
  std::string mismatch;  // empty: every output agrees
  std::string kernel;    // the kernel's text, for failure messages
};

// Sanitized as the lowering names arguments (letters, digits and '_').
inline std::string Identifier(const std::string& s) {
  std::string out;
  for (char ch : s) out += std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' ? ch : '_';
  return out.empty() ? "v" : out;
}

// The value each kernel argument stands for, or an error.
inline absl::StatusOr<std::vector<const Value*>> BindArgs(const Node& node, const TileKernel& k) {
  const bool fused = node.domain() == "kiln" && node.op() == "Fused";
  std::vector<const Value*> ins, outs, consts;
  for (const Value* v : node.inputs()) {
    if (!v) continue;
    if (!fused && std::find(ins.begin(), ins.end(), v) != ins.end()) continue;
    ins.push_back(v);
  }
  for (const Value* v : node.outputs()) outs.push_back(v);
  for (const Graph* g : node.subgraphs())
    for (const Value* c : g->Constants()) consts.push_back(c);
  size_t next_in = 0, next_out = 0;
  std::vector<const Value*> bound;
  for (const auto& a : k.args) {
    using Role = target::tile::TileArg::Role;
    if (a.role == Role::kIn || a.role == Role::kOut) {
      auto& list = a.role == Role::kIn ? ins : outs;
      size_t& next = a.role == Role::kIn ? next_in : next_out;
      if (next >= list.size()) return absl::InternalError(absl::StrCat("argument %", a.name, " has no value"));
      bound.push_back(list[next++]);
      continue;
    }
    if (a.role != Role::kConst) return absl::InternalError(absl::StrCat("argument %", a.name, " is a workspace"));
    const Value* found = nullptr;
    for (const Value* c : consts) {
      const std::string base = Identifier(c->name());
      const bool suffixed = a.name.size() > base.size() + 1 && a.name.compare(0, base.size(), base) == 0 &&
                            a.name[base.size()] == '_' &&
                            a.name.find_first_not_of("0123456789", base.size() + 1) == std::string::npos;
      if (a.name == base || suffixed) {
        if (std::find(bound.begin(), bound.end(), c) != bound.end()) continue;
        found = c;
        break;
      }
    }
    if (!found) return absl::InternalError(absl::StrCat("argument %", a.name, " names no constant of the node"));
    bound.push_back(found);
  }
  if (next_in != ins.size() || next_out != outs.size()) {
    return absl::InternalError(absl::StrCat("the kernel declares ", next_in, " of ", ins.size(), " inputs and ",
                                            next_out, " of ", outs.size(), " outputs"));
  }
  return bound;
}

// A tensor of `dt` whose every element shows it was never written.
inline Tensor Unwritten(DType dt, const Dims& dims) {
  Tensor t(dt, dims);
  DispatchNumeric(dt, [&]<typename T>() {
    const T v = IsFloat(dt) ? FromDouble<T>(std::nan("")) : FromDouble<T>(dt == DType::kBool ? 1 : 97);
    for (int64_t i = 0; i < t.numel(); ++i) t.data<T>()[i] = v;
  });
  return t;
}

// "" when `got` agrees with `want`, else the first disagreement.
inline std::string Compare(const Tensor& want, const Tensor& got, double rtol, double k_scale) {
  if (want.numel() != got.numel()) return absl::StrCat(got.numel(), " elements, expected ", want.numel());
  if (want.dtype() == DType::kF16) rtol = std::max(rtol, 1e-2);
  if (want.dtype() == DType::kBF16) rtol = std::max(rtol, 2e-2);
  const bool exact = !IsFloat(want.dtype());
  double largest = 1;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double w = std::fabs(want.GetDouble(i));
    if (std::isfinite(w)) largest = std::max(largest, w);
  }
  const double scale = largest * k_scale;
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double w = want.GetDouble(i), g = got.GetDouble(i);
    bool ok;
    if (exact) ok = w == g;
    else if (std::isnan(w) || std::isnan(g)) ok = std::isnan(w) && std::isnan(g);
    else if (std::isinf(w) || std::isinf(g)) ok = w == g;
    else ok = std::fabs(g - w) <= rtol * (std::fabs(w) + scale);
    if (!ok && bad++ == 0) first = i;
  }
  if (bad == 0) return "";
  return absl::StrCat(bad, " of ", want.numel(), " elements differ; element ", first, ": got ",
                      got.GetDouble(first), ", expected ", want.GetDouble(first));
}

// Lowers `node` for `f`, runs its kernel on the interpreter with the
// values `lookup` gives (constants from the graph) and compares with
// `expected`, the node's reference outputs.
inline NodeResult CheckNode(const Node& node, DType matrix_input, const TileCostFigures& f,
                            const std::function<const Tensor*(const Value*)>& lookup,
                            const std::vector<Tensor>& expected, double rtol) {
  NodeResult r;
  auto k = target::tile::LowerNode(node, matrix_input, f);
  if (!k.ok()) {
    r.why_not = std::string(k.status().message());
    return r;
  }
  r.lowered = true;
  r.kernel = target::tile::Print(*k);
  for (const auto& a : k->args) {
    if (!IsNumeric(a.dtype)) {
      r.mismatch = absl::StrCat("the kernel declares %", a.name, " of ", DTypeName(a.dtype));
      return r;
    }
  }
  auto bound = BindArgs(node, *k);
  if (!bound.ok()) {
    r.mismatch = std::string(bound.status().message());
    return r;
  }
  std::vector<Tensor> tensors;
  tensors.reserve(bound->size());
  for (size_t i = 0; i < bound->size(); ++i) {
    const Value* v = (*bound)[i];
    const auto& a = k->args[i];
    if (a.role == target::tile::TileArg::Role::kOut) {
      tensors.push_back(Unwritten(a.dtype, a.shape));
    } else if (v->is_constant()) {
      tensors.push_back(v->constant());
    } else if (const Tensor* t = lookup(v)) {
      tensors.push_back(*t);
    } else {
      r.mismatch = absl::StrCat("no value for '", v->name(), "'");
      return r;
    }
  }
  std::vector<Tensor*> ptrs;
  for (Tensor& t : tensors) ptrs.push_back(&t);
  absl::Status run = target::tile::RunTileKernel(*k, ptrs);
  if (!run.ok()) {
    r.mismatch = absl::StrCat("interpreter: ", run.message());
    return r;
  }
  double k_scale = 1;
  if (auto p = target::tile::GemmProblemOf(node, matrix_input); p.ok()) k_scale = std::sqrt(static_cast<double>(p->K));
  for (size_t i = 0; i < bound->size(); ++i) {
    if (k->args[i].role != target::tile::TileArg::Role::kOut) continue;
    int o = 0;
    while (o < node.num_outputs() && node.output(o) != (*bound)[i]) ++o;
    if (o >= static_cast<int>(expected.size()) || !expected[o].defined()) continue;
    std::string diff = Compare(expected[o], tensors[i], rtol, k_scale);
    if (!diff.empty()) {
      r.mismatch = absl::StrCat("output %", k->args[i].name, ": ", diff);
      return r;
    }
  }
  return r;
}

// One lowering configuration: a target's figures and the matrix input dtype.
struct Config {
  std::string label;  // "cuda f32", ...
  TileCostFigures figures;
  DType matrix_input = DType::kF32;
  double rtol = 1e-4;
};

// What checking a graph found.
struct GraphResult {
  int nodes = 0;     // top-level nodes run
  int checked = 0;   // (node, config) pairs lowered and compared
  struct Mismatch {
    std::string value;  // the node's first output
    std::string text;   // "config: node (op): why", then the kernel
  };
  std::vector<Mismatch> mismatches;
  std::map<std::string, int> lowered_ops;  // op (fused: kind) -> kernels checked
  std::map<std::string, std::string> why_not;  // op (fused: kind) -> why LowerNode refused one
  std::vector<Tensor> outputs;          // the graph's outputs
};

inline std::string NodeLabel(const Node& n) {
  std::string op = n.domain() == "kiln" && n.op() == "Fused" ? absl::StrCat("kiln.Fused ", n.GetString("kind", ""))
                                                              : n.QualifiedOp();
  return absl::StrCat("'", n.num_outputs() > 0 ? n.output(0)->name() : n.name(), "' (", op, ")");
}

// Runs `g` node by node on the reference executor with `inputs` and checks
// every node's kernel under each of `configs`.
inline absl::StatusOr<GraphResult> CheckGraph(const Graph& g, const std::vector<Tensor>& inputs,
                                              const std::vector<Config>& configs) {
  GraphResult r;
  if (inputs.size() != g.inputs().size()) return absl::InvalidArgumentError("wrong number of inputs");
  absl::flat_hash_map<const Value*, Tensor> env;
  for (size_t i = 0; i < inputs.size(); ++i) env[g.inputs()[i]] = inputs[i];
  auto lookup = [&](const Value* v) -> const Tensor* {
    if (v->is_constant()) return &v->constant();
    auto it = env.find(v);
    return it == env.end() ? nullptr : &it->second;
  };
  Executor exec;
  for (const Node* n : g.nodes()) {
    auto out = exec.RunNode(*n, lookup);
    if (!out.ok()) return out.status();
    ++r.nodes;
    for (const Config& c : configs) {
      NodeResult nr = CheckNode(*n, c.matrix_input, c.figures, lookup, *out, c.rtol);
      const std::string op = n->domain() == "kiln" && n->op() == "Fused" ? n->GetString("kind", "fused") : n->op();
      if (!nr.lowered) {
        r.why_not.emplace(op, nr.why_not);
        continue;
      }
      ++r.checked;
      ++r.lowered_ops[op];
      if (!nr.mismatch.empty()) {
        r.mismatches.push_back({n->num_outputs() > 0 ? n->output(0)->name() : n->name(),
                                absl::StrCat(c.label, ": ", NodeLabel(*n), ": ", nr.mismatch, "\n", nr.kernel)});
      }
    }
    for (int i = 0; i < n->num_outputs(); ++i)
      if (n->output(i) && i < static_cast<int>(out->size())) env[n->output(i)] = (*out)[i];
  }
  for (const Value* v : g.outputs()) {
    const Tensor* t = lookup(v);
    if (!t) return absl::InternalError(absl::StrCat("no value for the output '", v->name(), "'"));
    r.outputs.push_back(*t);
  }
  return r;
}

}  // namespace kiln::tile_check
