//===- nvcc.h - Compiling generated CUDA with nvcc in tests -------*- C++ -*-===//
//
// Writes a translation unit to a fresh temporary directory and compiles it
// with /usr/local/cuda/bin/nvcc to a cubin (so ptxas checks the inline PTX
// too), keeping the PTX; tests skip when nvcc is missing.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace kiln::target::cuda::testing {

constexpr char kNvcc[] = "/usr/local/cuda/bin/nvcc";

inline bool HaveNvcc() { return std::filesystem::exists(kNvcc); }

inline std::string ReadAll(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct NvccResult {
  bool ok = false;
  std::string log;  // nvcc's output
  std::string ptx;
  std::filesystem::path dir;
};

// Compiles `source` for `arch` ("sm_80", "sm_90a") with warnings as errors.
inline NvccResult CompileCuda(const std::string& source, const std::string& arch, const std::string& stem) {
  NvccResult r;
  r.dir = std::filesystem::temp_directory_path() /
          absl::StrCat("kiln_cuda_codegen_", stem, "_", arch, "_", std::to_string(::getpid()));
  std::filesystem::remove_all(r.dir);
  std::filesystem::create_directories(r.dir);
  const auto cu = r.dir / "kernels.cu";
  {
    std::ofstream out(cu);
    out << source;
  }
  const std::string cmd = absl::StrCat(kNvcc, " -std=c++17 -Werror all-warnings -arch=", arch,
                                       " -cubin --keep --keep-dir ", r.dir.string(), " -o ",
                                       (r.dir / "kernels.cubin").string(), " ", cu.string(), " > ",
                                       (r.dir / "log.txt").string(), " 2>&1");
  r.ok = std::system(cmd.c_str()) == 0;
  r.log = ReadAll(r.dir / "log.txt");
  for (const auto& e : std::filesystem::directory_iterator(r.dir)) {
    if (e.path().extension() == ".ptx") r.ptx += ReadAll(e.path());
  }
  return r;
}

// The PTX text of one .entry (up to the next .entry), or "" when absent.
inline std::string EntryPtx(const std::string& ptx, const std::string& fn) {
  const std::string head = absl::StrCat(".entry ", fn, "(");
  size_t at = ptx.find(head);
  if (at == std::string::npos) return "";
  size_t end = ptx.find(".entry ", at + head.size());
  return ptx.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

}  // namespace kiln::target::cuda::testing
