//===- run_setup.h - What `kiln run` and `kiln diff` share before a run -*- C++ -*-===//
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/ir/tensor.h"
#include "target/api/target.h"
#include "tools/driver/load_artifact.h"

namespace kiln::cli {

// A tensor from a NumPy .npy file or an ONNX TensorProto .pb file.
absl::StatusOr<Tensor> ReadTensorFile(const std::string& path);

// Reads the --input files, matching them by name to `names` (`described`:
// each input's name and type, for errors); an input not given reads its
// initial value (`initial[i]`, where defined). A name the model does not
// take is an error naming the nearest one it does.
absl::StatusOr<std::vector<Tensor>> InputsByName(const std::vector<std::string>& names,
                                                 const std::vector<std::string>& described,
                                                 const std::vector<Tensor>& initial = {});

// The target that recognizes the artifact at `path`, or why none does.
using driver::TargetOfArtifact;

}  // namespace kiln::cli
