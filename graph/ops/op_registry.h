//===- op_registry.h - Operator definitions and their registry --*- C++ -*-===//
//
// Every operator kiln knows has exactly one OpDef: its schema (input and
// output arity, attributes with defaults), its class (what kind of work it
// is), shape and dtype inference, FLOP and byte counts, an upgrader that
// rewrites nodes from older opsets into kiln's canonical form (ONNX opset 17
// semantics), and a host reference kernel.
//
// The reference kernels are the golden model of every test, the constant
// folder's evaluator and the AICPU engine's kernels.
//
// Definitions are added by the Register*Ops functions that op_table.cc lists;
// the registry is built on first use, never by static initializers.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "graph/ir/graph.h"
#include "graph/ir/tensor.h"
#include "graph/ir/type.h"

namespace kiln {

// What kind of work an op does; placement and fusion decisions start here.
enum class OpClass : uint8_t {
  kElementwise,    // one output element from the same-index input elements
  kReduction,      // reduces along axes
  kNormalization,  // softmax, layer/batch/instance norm, LRN
  kMatMul,         // MatMul, Gemm, Einsum
  kConv,           // convolutions
  kPool,           // pooling
  kDataMovement,   // transpose, concat, gather, slice, pad, ...
  kShape,          // reads only shapes: Shape, Size, ...
  kControlFlow,    // If, Loop, Scan
  kRecurrent,      // LSTM, GRU, RNN
  kOther,
};
absl::string_view OpClassName(OpClass c);

// Shape/dtype inference for one node. Inputs whose data is known (constants,
// or folded values) are available through const_input(); inference uses them
// for shape-carrying inputs such as Reshape's `shape`.
class InferContext {
 public:
  // Reads the types of the node's inputs and the data of those that are
  // constants holding data. The operands are kept in the context itself up
  // to the count nearly every op has, so inferring a node allocates only
  // its results.
  explicit InferContext(const Node& node);

  const Node& node() const { return node_; }
  int num_inputs() const { return static_cast<int>(input_types_.size()); }
  int num_outputs() const { return node_.num_outputs(); }
  bool has_input(int i) const { return i < num_inputs() && input_types_[i] != nullptr; }
  // Requires has_input(i).
  const Type& input_type(int i) const { return *input_types_[i]; }
  // Data of input i when known, else null.
  const Tensor* const_input(int i) const {
    return i < static_cast<int>(input_values_.size()) ? input_values_[i] : nullptr;
  }
  void set_output(int i, Type t) { outputs_[i] = std::move(t); }
  const Type& output(int i) const { return outputs_[i]; }
  std::vector<Type>& outputs() { return outputs_; }

  // An InvalidArgument error that names the node and op.
  template <typename... Args>
  absl::Status Error(const Args&... args) const {
    return absl::InvalidArgumentError(absl::StrCat(NodeLabel(), ": ", args...));
  }
  std::string NodeLabel() const;

 private:
  const Node& node_;
  absl::InlinedVector<const Type*, 4> input_types_;
  absl::InlinedVector<const Tensor*, 4> input_values_;
  std::vector<Type> outputs_;
};

// Runs a nested graph (a Loop body, an If branch) with inputs bound to its
// graph inputs; provided by the executor.
using SubgraphRunner =
    std::function<absl::StatusOr<std::vector<Tensor>>(const Graph&, std::vector<Tensor>)>;

// The inputs and outputs of one kernel invocation.
class KernelContext {
 public:
  KernelContext(const Node& node, std::vector<const Tensor*> inputs,
                SubgraphRunner run_subgraph = nullptr);

  const Node& node() const { return node_; }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  int num_outputs() const { return node_.num_outputs(); }
  bool has_input(int i) const { return i < num_inputs() && inputs_[i] != nullptr; }
  // Requires has_input(i).
  const Tensor& input(int i) const { return *inputs_[i]; }
  void set_output(int i, Tensor t) { outputs_[i] = std::move(t); }
  Tensor& output(int i) { return outputs_[i]; }
  std::vector<Tensor>& outputs() { return outputs_; }
  // Allocates, stores and returns output i.
  Tensor& AllocOutput(int i, DType dtype, Dims dims) {
    outputs_[i] = Tensor(dtype, std::move(dims));
    return outputs_[i];
  }
  const SubgraphRunner& run_subgraph() const { return run_subgraph_; }

  template <typename... Args>
  absl::Status Error(const Args&... args) const {
    return absl::InvalidArgumentError(absl::StrCat(NodeLabel(), ": ", args...));
  }
  std::string NodeLabel() const;

 private:
  const Node& node_;
  std::vector<const Tensor*> inputs_;
  std::vector<Tensor> outputs_;
  SubgraphRunner run_subgraph_;
};

// Work of one node, from its (inferred) types.
struct OpCost {
  double flops = 0;
  double bytes_read = 0;
  double bytes_written = 0;
};

using InferFn = absl::Status (*)(InferContext&);
using KernelFn = absl::Status (*)(KernelContext&);
using CostFn = OpCost (*)(const Node&);
// Rewrites a node imported at `opset` into kiln's canonical form (opset-17
// semantics). May replace the node; returns an error when it cannot.
using UpgradeFn = absl::Status (*)(Graph&, Node*, int64_t opset);

struct AttrDef {
  std::string name;
  AttrKind kind;
  bool required = false;
  std::string default_text;  // documentation of the default, "" when none
};

struct OpDef {
  std::string domain;  // "" for the default ONNX domain
  std::string name;
  int min_inputs = 0, max_inputs = 0;    // max -1: variadic
  // Inputs below min_inputs that may still be omitted (bit i: input i), for
  // ops such as Loop whose leading inputs are optional but positional.
  uint64_t optional_inputs = 0;
  int min_outputs = 1, max_outputs = 1;  // max -1: variadic
  std::vector<AttrDef> attrs;
  OpClass op_class = OpClass::kOther;
  int since_version = 1;  // earliest opset whose semantics kiln accepts
  InferFn infer = nullptr;
  KernelFn kernel = nullptr;
  CostFn cost = nullptr;  // default: elementwise-like, one flop per output element
  UpgradeFn upgrade = nullptr;

  const AttrDef* FindAttr(absl::string_view n) const;
  bool InputRequired(int i) const { return i < min_inputs && !(i < 64 && (optional_inputs >> i & 1)); }
  std::string QualifiedName() const { return domain.empty() ? name : absl::StrCat(domain, ".", name); }
};

class OpDefBuilder {
 public:
  explicit OpDefBuilder(OpDef* def) : def_(def) {}
  OpDefBuilder& Inputs(int min, int max) { def_->min_inputs = min; def_->max_inputs = max; return *this; }
  OpDefBuilder& Inputs(int n) { return Inputs(n, n); }
  OpDefBuilder& OptionalInput(int i) { def_->optional_inputs |= uint64_t{1} << i; return *this; }
  OpDefBuilder& Outputs(int min, int max) { def_->min_outputs = min; def_->max_outputs = max; return *this; }
  OpDefBuilder& Outputs(int n) { return Outputs(n, n); }
  OpDefBuilder& Attr(std::string name, AttrKind kind, std::string default_text = "") {
    def_->attrs.push_back({std::move(name), kind, false, std::move(default_text)});
    return *this;
  }
  OpDefBuilder& RequiredAttr(std::string name, AttrKind kind) {
    def_->attrs.push_back({std::move(name), kind, true, ""});
    return *this;
  }
  OpDefBuilder& Class(OpClass c) { def_->op_class = c; return *this; }
  OpDefBuilder& Since(int v) { def_->since_version = v; return *this; }
  OpDefBuilder& Infer(InferFn f) { def_->infer = f; return *this; }
  OpDefBuilder& Kernel(KernelFn f) { def_->kernel = f; return *this; }
  OpDefBuilder& Cost(CostFn f) { def_->cost = f; return *this; }
  OpDefBuilder& Upgrade(UpgradeFn f) { def_->upgrade = f; return *this; }

 private:
  OpDef* def_;
};

class OpRegistry {
 public:
  // The registry of every built-in op, built on first use from op_table.cc.
  static const OpRegistry& Global();

  OpDefBuilder Register(std::string name, std::string domain = "");
  const OpDef* Find(absl::string_view domain, absl::string_view name) const;
  const OpDef* Find(const Node& n) const { return Find(n.domain(), n.op()); }
  // Every definition, sorted by domain then name.
  std::vector<const OpDef*> All() const;

 private:
  std::map<std::pair<std::string, std::string>, std::unique_ptr<OpDef>> defs_;
  // The ops of the default domain by name: what nearly every lookup asks
  // for, found without building a key.
  absl::flat_hash_map<std::string, const OpDef*> default_domain_;
};

// The first def.min_inputs inputs of a node are required, except those marked
// in def.optional_inputs: errors when one is omitted. Inference and the executor check this before calling an op, so
// inference functions and kernels may assume those inputs are present.
absl::Status CheckRequiredInputs(const OpDef& def, const Node& node);

// Runs `def.infer` for `node` with its current input types and known constant
// inputs; returns the inferred output types.
absl::StatusOr<std::vector<Type>> InferNode(const OpDef& def, const Node& node);
// Cost of a node (the op's CostFn or the elementwise default).
OpCost NodeCost(const Node& node);

}  // namespace kiln
