//===- cuda_int_kernel.h - Integer and bool elementwise ops as CUDA kernels -*- C++ -*-===//
//
// The tile IR's elementwise kernels compute in f32, which holds integers
// exactly only up to 2^24; the small integer and bool arithmetic of a
// generation step (the position plus one, the position compared with the
// cache's indices, a mask's Not) runs instead as kernels of its own, in the
// tensors' own types: a grid-stride loop over the output's elements, each
// input read through its broadcast strides (numpy style), integer
// arithmetic wrapping as ONNX's does (through unsigned arithmetic).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/ir/graph.h"

namespace kiln::target::cuda {

// What an integer elementwise kernel computes.
struct IntElementwise {
  std::string op;                             // the ONNX op
  std::vector<DType> inputs;                  // their dtypes
  DType output = DType::kI64;
  std::vector<int64_t> dims;                  // the output's
  std::vector<std::vector<int64_t>> strides;  // per input, per output dim (0: broadcast)
};

struct IntElementwiseLaunch {
  IntElementwise what;
  std::string function;  // kiln_int_<op>_<hash>
  std::string source;
  int64_t blocks = 1, threads = 256;
};

// Whether `node` is one of the integer or bool elementwise ops these
// kernels take: Add, Sub, Mul, Max, Min, Neg, Abs over integers; Equal,
// Greater(OrEqual), Less(OrEqual) over integers or bools; Not, And, Or,
// Xor over bools.
bool IsIntElementwise(const Node& node);
absl::StatusOr<IntElementwiseLaunch> MakeIntElementwiseLaunch(const Node& node);
// The same on the host, for emulating the launch: `inputs` and `output`
// point at tensors laid out as the launch reads and writes them.
absl::Status IntElementwiseOnHost(const IntElementwise& what, const std::vector<const void*>& inputs, void* output);

}  // namespace kiln::target::cuda
