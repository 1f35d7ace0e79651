//===- cuda_arg_reduce_kernel.h - ArgMax / ArgMin as CUDA kernels -*- C++ -*-===//
//
// ArgMax and ArgMin over one axis of an f32, f16 or bf16 tensor, on the
// device: the index a generation step's token comes from, so the logits
// need not cross PCIe. The input is viewed as [outer, n, inner]; a thread
// block per output element (a grid-stride loop over them), its threads
// scanning strided elements of the axis, then a warp-shuffle and a
// shared-memory reduction of (value, index) pairs. The order the pairs
// combine in does not matter: a NaN wins (the first, or the last under
// select_last_index), then the larger (smaller) value, then the first (last)
// index, as the reference kernel decides.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "graph/ir/graph.h"

namespace kiln::target::cuda {

// What an arg-reduction kernel computes.
struct ArgReduce {
  int64_t outer = 1, n = 1, inner = 1;
  bool is_max = true, last = false;
  DType input = DType::kF32;
};

struct ArgReduceLaunch {
  ArgReduce what;
  std::string function;  // kiln_argmax_<hash> / kiln_argmin_<hash>
  std::string source;
  int64_t blocks = 1, threads = 256, shared_bytes = 0;
};

bool IsArgReduce(const Node& node);
// The launch of `node` (ArgMax or ArgMin), or why it has none.
absl::StatusOr<ArgReduceLaunch> MakeArgReduceLaunch(const Node& node);
// The reference of `what` on the host, for emulating the launch: y[outer * inner].
void ArgReduceOnHost(const ArgReduce& what, const void* x, int64_t* y);

}  // namespace kiln::target::cuda
