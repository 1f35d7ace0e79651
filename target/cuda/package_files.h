//===- package_files.h - The fixed text of a cuda package -------*- C++ -*-===//
//
// The files under target/cuda/package/, byte for byte: target/CMakeLists.txt
// turns each into a generated .cc defining one of these at build time
// (tools/embed_file.cmake), so the text a package carries is real source, compiled
// and warning-checked in kiln's build (package/check/), instead of string
// literals in cuda_launcher.cc. Templates mark what the launcher fills in as
// @NAME@.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "absl/strings/string_view.h"

namespace kiln::target::cuda::package_files {

extern const absl::string_view kKilnModelH;        // kiln_model.h: the C API
extern const absl::string_view kLauncherPrologue;  // launcher_prologue.cc: model.cc before the model's tables
extern const absl::string_view kLauncherRuntime;   // launcher_runtime.cc: model.cc after them
extern const absl::string_view kReadme;            // README.md.in
extern const absl::string_view kReadmeHostTasks;   // README_host_tasks.md: README.md's part when nodes run on the host
extern const absl::string_view kReadmeDataParallel;  // README_data_parallel.md: its part for a data-parallel step
extern const absl::string_view kCMakeLists;        // CMakeLists.txt.in
extern const absl::string_view kBuildScript;       // build.sh.in

}  // namespace kiln::target::cuda::package_files
