//===- simt_host_run.h - Generated CUDA C++ compiled and run on the host -*- C++ -*-===//
//
// Compiles a cuda kernel's source with the host's C++ compiler against
// tests/cuda/simt_host.h into a shared library with a launcher, loads it
// and runs the kernel's first variant on host memory.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "target/cuda/codegen/cuda_codegen.h"

namespace kiln::simt_host {

// Compiles `source` (a kernel's, after which `v`'s function is defined)
// with a launcher into a shared library and runs it on `args` (device
// pointers are host pointers here).
inline absl::Status RunOnHost(const std::string& name, const std::string& source, const target::cuda::CudaVariant& v,
                              const std::vector<void*>& args) {
  namespace fs = std::filesystem;
  std::vector<std::string> params;
  for (size_t i = 0; i < args.size(); ++i) params.push_back(absl::StrCat("simt::Arg{a[", i, "]}"));
  const std::string unit = absl::StrCat(
      "#include \"tests/cuda/simt_host.h\"\n", source, "extern \"C\" void launch(void** a) {\n",
      "  simt::Launch(simt::Dim3{", v.grid[0], ", ", v.grid[1], ", ", v.grid[2], "}, ", v.block_threads, ", [&] { ",
      v.function, "(", absl::StrJoin(params, ", "), "); });\n}\n");
  // A directory per translation unit (source and launch): dlopen hands back
  // a library of a path it has loaded before.
  const fs::path dir = fs::current_path() / "simt_host" / absl::StrCat(name, "_", std::hash<std::string>()(unit));
  fs::create_directories(dir);
  std::ofstream(dir / "kernel.cc") << unit;
  const fs::path so = dir / "kernel.so";
  const std::string cmd = absl::StrCat(KILN_HOST_CXX, " -std=c++20 -O1 -w -shared -fPIC -pthread -I", KILN_SOURCE_DIR,
                                       " ", (dir / "kernel.cc").string(), " -o ", so.string(), " 2> ",
                                       (dir / "compile.log").string());
  if (std::system(cmd.c_str()) != 0) {
    std::ifstream log(dir / "compile.log");
    std::string first;
    std::getline(log, first);
    return absl::InternalError(absl::StrCat("the kernel does not compile on the host: ", first));
  }
  void* lib = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) return absl::InternalError(dlerror());
  auto launch = reinterpret_cast<void (*)(void**)>(dlsym(lib, "launch"));
  if (!launch) return absl::InternalError("no launch()");
  std::vector<void*> ptrs = args;
  launch(ptrs.data());
  dlclose(lib);
  return absl::OkStatus();
}

}  // namespace kiln::simt_host
