//===- host_ops.h - kiln's reference kernels as a package's host-op provider -*- C++ -*-===//
//
// A package of generated code runs the nodes none of its kernels handles on
// the host, through
// a host-op provider (kiln_model.h's kiln_host_ops): `load` parses the
// package's host_graph.kir, `run` executes one of its nodes on host
// tensors, `release` frees it. ReferenceHostOps is that provider over
// kiln's reference executor; `kiln run` passes it in-process, and
// libkiln_hostops.so (runtime/hostops_library.cc) exports it to
// applications that embed a package: `const kiln_host_ops*
// kiln_host_ops_v1(void)`.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "graph/ir/tensor.h"

namespace kiln::runtime {

// A pointer to a kiln_host_ops whose `user` argument is ignored.
const void* ReferenceHostOps();

// A string tensor's bytes across kiln's C interfaces (kiln_host_ops: a
// host task's operand or result; kiln_model.h: a string output's data):
// each element, in order, as a 64-bit little-endian byte count and its bytes.
std::string SerializeStrings(const Tensor& t);
// The tensor of `dims` those bytes hold; an error when they do not hold
// exactly its elements.
absl::StatusOr<Tensor> DeserializeStrings(const Dims& dims, const void* bytes, size_t size);

}  // namespace kiln::runtime
