//===- kiln_model_abi.h - The C structs of a package's kiln_model.h -*- C++ -*-===//
//
// A target that writes packages of generated source puts its kiln_model.h
// into every package; the runtime calls packages through these structs,
// whose layouts must stay identical to that header's.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {
struct kiln_tensor_info {
  const char* name;
  int dtype;
  const char* dtype_name;
  int rank;
  const int64_t* dims;
  size_t bytes;
};
struct kiln_host_tensor {
  int dtype;
  int rank;
  const int64_t* dims;
  void* data;
  size_t bytes;
};
struct kiln_host_ops {
  void* (*load)(void* user, const char* graph_kir, size_t kir_len, const void* blobs, size_t blobs_len, char* err,
                size_t err_len);
  int (*run)(void* user, void* graph, int node, const kiln_host_tensor* inputs, int num_inputs,
             kiln_host_tensor* outputs, int num_outputs, char* err, size_t err_len);
  void (*release)(void* user, void* graph);
};
}
