//===- host_ops.cc - kiln's reference kernels as a package's host-op provider ===//
#include "runtime/host_ops.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/exec/executor.h"
#include "graph/ir/parser.h"
#include "graph/ir/printer.h"
#include "graph/support/status.h"
#include "runtime/kiln_model_abi.h"

namespace kiln::runtime {
namespace {

void SetError(char* err, size_t len, const std::string& msg) {
  if (!err || len == 0) return;
  size_t n = std::min(msg.size(), len - 1);
  std::memcpy(err, msg.data(), n);
  err[n] = '\0';
}

// The graph the host tasks read, and an executor for its nodes.
struct HostGraph {
  Model model;
  std::vector<const Node*> nodes;
  Executor exec;
  // The last call's results that the caller asked to be sized (rank -1),
  // and their dims: what those outputs point at until the next call.
  std::vector<Tensor> sized;
  std::vector<std::vector<int64_t>> sized_dims;
  std::deque<std::string> sized_strings;  // string results in their serialized form (a deque: they stay put)
};

void* HostLoad(void*, const char* kir, size_t kir_len, const void* blobs, size_t blobs_len, char* err,
               size_t err_len) {
  BlobStore store;
  if (blobs_len > 0) {
    absl::Status s =
        DeserializeBlobStore(absl::string_view(static_cast<const char*>(blobs), blobs_len), &store);
    if (!s.ok()) {
      SetError(err, err_len, std::string(s.message()));
      return nullptr;
    }
  }
  auto model = ParseModel(absl::string_view(kir, kir_len), "host_graph.kir", &store);
  if (!model.ok()) {
    SetError(err, err_len, std::string(model.status().message()));
    return nullptr;
  }
  auto* g = new HostGraph{*std::move(model), {}, Executor(), {}, {}, {}};
  for (const Node* n : g->model.graph->nodes()) g->nodes.push_back(n);
  return g;
}

int HostRun(void*, void* graph, int node, const kiln_host_tensor* inputs, int num_inputs,
            kiln_host_tensor* outputs, int num_outputs, char* err, size_t err_len) {
  auto* g = static_cast<HostGraph*>(graph);
  if (node < 0 || node >= static_cast<int>(g->nodes.size())) {
    SetError(err, err_len, absl::StrCat("no node ", node, " in the host graph"));
    return 1;
  }
  const Node& n = *g->nodes[node];
  std::vector<const Value*> operands = NodeOperands(n);
  if (static_cast<int>(operands.size()) != num_inputs || n.num_outputs() != num_outputs) {
    SetError(err, err_len, absl::StrCat("node ", node, " (", n.QualifiedOp(), ") takes ", operands.size(),
                                        " operands and ", n.num_outputs(), " outputs, not ", num_inputs, " and ",
                                        num_outputs));
    return 1;
  }
  std::vector<Tensor> in;
  for (int i = 0; i < num_inputs; ++i) {
    auto dtype = DTypeFromOnnx(inputs[i].dtype);
    if (!dtype) {
      SetError(err, err_len, absl::StrCat("operand ", i, " has unknown dtype code ", inputs[i].dtype));
      return 1;
    }
    if (*dtype == DType::kString) {
      auto t = DeserializeStrings(Dims(inputs[i].dims, inputs[i].dims + inputs[i].rank), inputs[i].data,
                                  inputs[i].bytes);
      if (!t.ok()) {
        SetError(err, err_len, absl::StrCat("operand ", i, ": ", t.status().message()));
        return 1;
      }
      in.push_back(*std::move(t));
      continue;
    }
    Tensor t(*dtype, Dims(inputs[i].dims, inputs[i].dims + inputs[i].rank));
    if (t.nbytes() != inputs[i].bytes) {
      SetError(err, err_len, absl::StrCat("operand ", i, " holds ", inputs[i].bytes, " bytes, not ", t.nbytes()));
      return 1;
    }
    if (t.nbytes() > 0) std::memcpy(t.raw(), inputs[i].data, t.nbytes());
    in.push_back(std::move(t));
  }
  auto result = g->exec.RunNode(n, [&](const Value* v) -> const Tensor* {
    for (size_t i = 0; i < operands.size(); ++i)
      if (operands[i] == v) return &in[i];
    return nullptr;
  });
  if (!result.ok()) {
    SetError(err, err_len, std::string(result.status().message()));
    return 1;
  }
  g->sized.clear();
  g->sized_dims.clear();
  g->sized_strings.clear();
  g->sized.reserve(num_outputs);
  g->sized_dims.reserve(num_outputs);
  for (int i = 0; i < num_outputs; ++i) {
    if (outputs[i].rank == -1) {  // sized here: the tensor stays with the graph until the next call
      Tensor& t = g->sized.emplace_back(std::move((*result)[i]));
      if (!t.defined()) {
        SetError(err, err_len, absl::StrCat("output ", i, " of ", n.QualifiedOp(), " is not a tensor"));
        return 1;
      }
      std::vector<int64_t>& dims = g->sized_dims.emplace_back(t.dims().begin(), t.dims().end());
      outputs[i].rank = static_cast<int>(dims.size());
      outputs[i].dims = dims.data();
      if (t.dtype() == DType::kString) {  // its elements' serialized form, kept as the tensor is
        std::string& bytes = g->sized_strings.emplace_back(SerializeStrings(t));
        outputs[i].data = bytes.data();
        outputs[i].bytes = bytes.size();
        continue;
      }
      outputs[i].data = t.raw();
      outputs[i].bytes = t.nbytes();
      continue;
    }
    if (!outputs[i].data) continue;
    const Tensor& t = (*result)[i];
    if (!t.defined() || t.nbytes() != outputs[i].bytes) {
      SetError(err, err_len, absl::StrCat("output ", i, " of ", n.QualifiedOp(), " has ",
                                          t.defined() ? t.nbytes() : 0, " bytes, the package planned ",
                                          outputs[i].bytes));
      return 1;
    }
    if (t.nbytes() > 0) std::memcpy(outputs[i].data, t.raw(), t.nbytes());
  }
  return 0;
}

void HostRelease(void*, void* graph) { delete static_cast<HostGraph*>(graph); }

const kiln_host_ops kReferenceHostOps = {HostLoad, HostRun, HostRelease};

}  // namespace

std::string SerializeStrings(const Tensor& t) {
  std::string out;
  const std::string* e = t.data<std::string>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    uint64_t n = e[i].size();
    for (int b = 0; b < 8; ++b) out.push_back(static_cast<char>((n >> (8 * b)) & 0xff));
    out += e[i];
  }
  return out;
}

absl::StatusOr<Tensor> DeserializeStrings(const Dims& dims, const void* bytes, size_t size) {
  Tensor t(DType::kString, dims);
  const unsigned char* p = static_cast<const unsigned char*>(bytes);
  size_t at = 0;
  std::string* e = t.data<std::string>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (size - at < 8) return absl::InvalidArgumentError(absl::StrCat("string element ", i, " is cut short"));
    uint64_t n = 0;
    for (int b = 0; b < 8; ++b) n |= static_cast<uint64_t>(p[at + b]) << (8 * b);
    at += 8;
    if (n > size - at) return absl::InvalidArgumentError(absl::StrCat("string element ", i, " is cut short"));
    e[i].assign(reinterpret_cast<const char*>(p + at), static_cast<size_t>(n));
    at += static_cast<size_t>(n);
  }
  if (at != size)
    return absl::InvalidArgumentError(absl::StrCat(size - at, " bytes follow the ", t.numel(), " string elements"));
  return t;
}

const void* ReferenceHostOps() { return &kReferenceHostOps; }

}  // namespace kiln::runtime
