//===- tensor_proto.h - ONNX TensorProto <-> kiln Tensor --------*- C++ -*-===//
//
// Converts ONNX TensorProto messages (initializers, Constant values, the
// .pb files of the ONNX test data) to kiln tensors and back. External data
// is read relative to the model's directory.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "graph/ir/tensor.h"

namespace onnx {
class TensorProto;
}

namespace kiln::onnx_import {

// `base_dir` resolves external data locations; "" forbids external data.
absl::StatusOr<Tensor> TensorFromProto(const onnx::TensorProto& proto, const std::string& base_dir);
void TensorToProto(const Tensor& t, const std::string& name, onnx::TensorProto* proto);

// Reads a file holding one serialized TensorProto.
absl::StatusOr<Tensor> ReadTensorProtoFile(const std::string& path, std::string* name = nullptr);
absl::Status WriteTensorProtoFile(const std::string& path, const Tensor& t, const std::string& name);

}  // namespace kiln::onnx_import
