//===- exported_model.h - One model of the PyTorch-exported set -*- C++ -*-===//
//
// scripts/export_models.py writes each model to $KILN_MODELS_DIR/NAME:
// model.onnx, input_I.npy and PyTorch's outputs expected_I.npy. The model
// tests read them through LoadExportedModel.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "frontend/onnx/importer.h"
#include "graph/io/npy.h"

namespace kiln {

struct ExportedModel {
  Model model;
  std::vector<Tensor> inputs;    // one per graph input, in order
  std::vector<Tensor> expected;  // PyTorch's outputs, in order
};

inline absl::StatusOr<ExportedModel> LoadExportedModel(const std::string& name) {
  const char* root = std::getenv("KILN_MODELS_DIR");
  if (!root) return absl::FailedPreconditionError("KILN_MODELS_DIR is not set");
  const std::filesystem::path dir = std::filesystem::path(root) / name;
  auto model = onnx_import::ImportFile((dir / "model.onnx").string());
  if (!model.ok()) return model.status();
  ExportedModel m{*std::move(model), {}, {}};
  for (size_t i = 0; i < m.model.graph->inputs().size(); ++i) {
    auto t = ReadNpy((dir / absl::StrCat("input_", i, ".npy")).string());
    if (!t.ok()) return t.status();
    m.inputs.push_back(*std::move(t));
  }
  for (size_t i = 0; i < m.model.graph->outputs().size(); ++i) {
    auto t = ReadNpy((dir / absl::StrCat("expected_", i, ".npy")).string());
    if (!t.ok()) return t.status();
    m.expected.push_back(*std::move(t));
  }
  return m;
}

}  // namespace kiln
