//===- cuda_values.h - What a value needs to live on the GPU -*- C++ -*-===//
//
// A cuda package gives a value device memory when the device can hold it
// (a tensor of static shape and a fixed-width dtype); host tasks hold any
// tensor of a fixed-width dtype, its shape known when compiling or not.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <vector>

#include "graph/ir/graph.h"

namespace kiln::target::cuda {

// A dtype of fixed width the device holds (not strings, not wider than 8 bytes).
bool FixedWidth(DType t);
// A tensor the host holds for the host tasks: of a fixed-width dtype or of
// strings, its shape known at compile time or not.
bool HostStorable(const Value* v);
// A tensor of static shape and a fixed-width dtype.
bool DeviceStorable(const Value* v);
// A string tensor of static shape: a model input the caller gives as C
// strings, kept on the host (kiln_model.h).
bool HostStringInput(const Value* v);
// The bytes of a device-storable value.
int64_t StaticBytes(const Value* v);
// The dims of a ranked value, -1 for those known only at run time.
std::vector<int64_t> DimsOf(const Value* v);
// A view op (Reshape, Flatten, ...) whose output names its input's bytes.
bool IsView(const Node& n);

}  // namespace kiln::target::cuda
