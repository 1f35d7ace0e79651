//===- cuda_executable.cc - Running cuda packages on a GPU ----------------===//
#include "target/cuda/cuda_executable.h"

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/support/status.h"
#include "runtime/host_ops.h"
#include "runtime/kiln_model_abi.h"

namespace kiln::target {
namespace {

// Runs `command` with its output in `log`; the exit status.
int RunLogged(const std::string& command, const std::string& log) {
  std::string full = absl::StrCat(command, " > '", log, "' 2>&1");
  int rc = std::system(full.c_str());
  if (rc == -1) return -1;
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

std::string Tail(const std::string& path, size_t lines) {
  std::ifstream f(path);
  std::vector<std::string> all;
  for (std::string l; std::getline(f, l);) all.push_back(l);
  size_t from = all.size() > lines ? all.size() - lines : 0;
  std::vector<std::string> last(all.begin() + static_cast<std::ptrdiff_t>(from), all.end());
  return absl::StrJoin(last, " | ");
}

}  // namespace

struct CudaExecutable::Api {
  void* (*load)(const char*, char*, size_t) = nullptr;
  int (*run)(void*, const void* const*, void* const*, char*, size_t) = nullptr;
  void (*free)(void*) = nullptr;
  int (*num_inputs)(const void*) = nullptr;
  int (*num_outputs)(const void*) = nullptr;
  const kiln_tensor_info* (*input)(const void*, int) = nullptr;
  const kiln_tensor_info* (*output)(const void*, int) = nullptr;
  // Packages from before outputs sized at run time lack it.
  const void* (*output_data)(const void*, int) = nullptr;
  const char* (*device)(const void*) = nullptr;
  // Data-parallel steps (packages from before them lack these).
  int (*replicas)(const void*) = nullptr;
  void* (*load_on_device)(const char*, int, char*, size_t) = nullptr;
  int (*init_replicas)(void* const*, int, char*, size_t) = nullptr;
  int (*run_replicas)(void* const*, int, const void* const* const*, void* const* const*, char*, size_t) = nullptr;
  void (*set_host_ops)(void*, const kiln_host_ops*, void*) = nullptr;
};

namespace {

// The devices the CUDA driver sees.
absl::StatusOr<int> CudaDeviceCount() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    return absl::UnavailableError(
        absl::StrCat("the CUDA driver library libcuda.so.1 cannot be loaded (", e ? e : "not found", ")"));
  }
  using InitFn = int (*)(unsigned);
  using CountFn = int (*)(int*);
  using ErrFn = int (*)(int, const char**);
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "cuInit"));
  auto count = reinterpret_cast<CountFn>(dlsym(lib, "cuDeviceGetCount"));
  auto err_string = reinterpret_cast<ErrFn>(dlsym(lib, "cuGetErrorString"));
  if (!init || !count) return absl::UnavailableError("libcuda.so.1 lacks cuInit or cuDeviceGetCount");
  auto describe = [&](int rc) {
    const char* s = nullptr;
    if (err_string) err_string(rc, &s);
    return s ? std::string(s) : absl::StrCat("CUDA error ", rc);
  };
  if (int rc = init(0); rc != 0) return absl::UnavailableError(absl::StrCat("cuInit failed: ", describe(rc)));
  int n = 0;
  if (int rc = count(&n); rc != 0)
    return absl::UnavailableError(absl::StrCat("cuDeviceGetCount failed: ", describe(rc)));
  return n;
}

}  // namespace

int ShardRanks(const std::vector<Tensor>& inputs, const std::vector<CudaExecutable::TensorInfo>& infos,
               int replicas) {
  if (replicas <= 1 || inputs.empty() || inputs.size() != infos.size()) return 0;
  const std::vector<int64_t>& first = infos[0].dims;
  if (first.empty() || first[0] <= 0 || inputs[0].rank() == 0 || inputs[0].dim(0) % first[0] != 0) return 0;
  const int64_t ranks = inputs[0].dim(0) / first[0];
  if (ranks < 2) return 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<int64_t> want = infos[i].dims;
    if (want.empty()) return 0;
    want[0] *= ranks;
    if (inputs[i].dtype() != infos[i].dtype ||
        std::vector<int64_t>(inputs[i].dims().begin(), inputs[i].dims().end()) != want)
      return 0;
  }
  return static_cast<int>(ranks);
}

absl::Status ProbeCudaDevice() {
  KILN_ASSIGN_OR_RETURN(int n, CudaDeviceCount());
  if (n == 0) return absl::UnavailableError("the CUDA driver sees no device");
  return absl::OkStatus();
}

bool IsCudaPackage(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec) && std::filesystem::exists(std::filesystem::path(path) / "model.cc") &&
         std::filesystem::exists(std::filesystem::path(path) / "kiln_model.h");
}

absl::Status EnsureCudaPackageBuilt(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path lib = fs::path(dir) / "libkiln_model.so";
  bool fresh = fs::exists(lib, ec);
  if (fresh)
    for (const char* src : {"kernels.cu", "model.cc", "kiln_model.h"}) {
      fs::path p = fs::path(dir) / src;
      if (fs::exists(p, ec) && fs::last_write_time(p, ec) > fs::last_write_time(lib, ec)) fresh = false;
    }
  if (fresh) return absl::OkStatus();
  if (isatty(2)) std::cerr << "kiln: building " << lib.string() << " with nvcc...\n";
  std::string log = (fs::path(dir) / "build.log").string();
  int rc = RunLogged(absl::StrCat("sh '", (fs::path(dir) / "build.sh").string(), "'"), log);
  if (rc != 0 || !fs::exists(lib, ec))
    return absl::FailedPreconditionError(absl::StrCat("building ", lib.string(), " failed (", log, "): ", Tail(log, 3)));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CudaExecutable>> CudaExecutable::Load(const std::string& dir) {
  if (!IsCudaPackage(dir)) return absl::InvalidArgumentError(absl::StrCat("'", dir, "' is not a cuda package"));
  KILN_RETURN_IF_ERROR(ProbeCudaDevice());
  KILN_RETURN_IF_ERROR(EnsureCudaPackageBuilt(dir));
  std::unique_ptr<CudaExecutable> e(new CudaExecutable);
  e->dir_ = dir;
  e->api_ = std::make_unique<Api>();
  std::string lib = (std::filesystem::absolute(dir) / "libkiln_model.so").string();
  e->library_ = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!e->library_) return absl::FailedPreconditionError(absl::StrCat("cannot load ", lib, ": ", dlerror()));
  Api& a = *e->api_;
  auto sym = [&](const char* name, auto& fn) -> absl::Status {
    void* p = dlsym(e->library_, name);
    if (!p) return absl::FailedPreconditionError(absl::StrCat(lib, " does not export ", name));
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
    return absl::OkStatus();
  };
  KILN_RETURN_IF_ERROR(sym("kiln_model_load", a.load));
  KILN_RETURN_IF_ERROR(sym("kiln_model_run", a.run));
  KILN_RETURN_IF_ERROR(sym("kiln_model_free", a.free));
  KILN_RETURN_IF_ERROR(sym("kiln_model_num_inputs", a.num_inputs));
  KILN_RETURN_IF_ERROR(sym("kiln_model_num_outputs", a.num_outputs));
  KILN_RETURN_IF_ERROR(sym("kiln_model_input", a.input));
  KILN_RETURN_IF_ERROR(sym("kiln_model_output", a.output));
  KILN_RETURN_IF_ERROR(sym("kiln_model_device", a.device));
  a.output_data = reinterpret_cast<decltype(a.output_data)>(dlsym(e->library_, "kiln_model_output_data"));
  a.replicas = reinterpret_cast<decltype(a.replicas)>(dlsym(e->library_, "kiln_model_replicas"));
  a.load_on_device = reinterpret_cast<decltype(a.load_on_device)>(dlsym(e->library_, "kiln_model_load_on_device"));
  a.init_replicas = reinterpret_cast<decltype(a.init_replicas)>(dlsym(e->library_, "kiln_model_init_replicas"));
  a.run_replicas = reinterpret_cast<decltype(a.run_replicas)>(dlsym(e->library_, "kiln_model_run_replicas"));
  KILN_RETURN_IF_ERROR(sym("kiln_model_set_host_ops", a.set_host_ops));
  char err[2048] = "";
  e->model_ = a.load(dir.c_str(), err, sizeof err);
  if (!e->model_) return absl::FailedPreconditionError(absl::StrCat("loading ", dir, ": ", err));
  a.set_host_ops(e->model_, static_cast<const kiln_host_ops*>(runtime::ReferenceHostOps()), nullptr);
  e->device_ = a.device(e->model_);
  auto info = [](const kiln_tensor_info* t) {
    TensorInfo r;
    r.name = t->name;
    r.dtype = DTypeFromOnnx(t->dtype).value_or(DType::kUndefined);
    // An output of unknown rank (sized at run time) reads as one dim of -1.
    if (t->rank < 0) r.dims = {-1};
    else r.dims.assign(t->dims, t->dims + t->rank);
    return r;
  };
  for (int i = 0; i < a.num_inputs(e->model_); ++i) e->inputs_.push_back(info(a.input(e->model_, i)));
  for (int i = 0; i < a.num_outputs(e->model_); ++i) e->outputs_.push_back(info(a.output(e->model_, i)));
  if (a.replicas) e->replicas_ = a.replicas(e->model_);
  e->ranks_ = {e->model_};
  return e;
}

CudaExecutable::~CudaExecutable() {
  for (size_t r = 1; r < ranks_.size(); ++r)
    if (ranks_[r] && api_ && api_->free) api_->free(ranks_[r]);
  if (model_ && api_ && api_->free) api_->free(model_);
  // The library stays loaded: the CUDA runtime inside it tears down at exit.
}

absl::StatusOr<std::vector<Tensor>> CudaExecutable::Run(const std::vector<Tensor>& inputs) {
  auto signature = [](const TensorInfo& t) {
    return absl::StrCat(t.name, ": ", DTypeName(t.dtype), "[", absl::StrJoin(t.dims, ","), "]");
  };
  if (inputs.size() != inputs_.size())
    return absl::InvalidArgumentError(absl::StrCat("the model takes ", inputs_.size(), " inputs, got ", inputs.size()));
  // A data-parallel step on R ranks: every input R times its leading dim.
  if (const int ranks = ShardRanks(inputs, inputs_, replicas_); ranks > 1) return RunRanks(inputs, ranks);
  std::vector<const void*> in;
  // String inputs go as arrays of C strings (kiln_model.h).
  std::vector<std::vector<const char*>> strings;
  strings.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (t.dtype() != inputs_[i].dtype || std::vector<int64_t>(t.dims().begin(), t.dims().end()) != inputs_[i].dims)
      return absl::InvalidArgumentError(absl::StrCat(
          "input ", i, " is ", DTypeName(t.dtype()), "[", absl::StrJoin(t.dims(), ","), "]; the model expects ",
          signature(inputs_[i]), replicas_ > 1 ? " (or R times its leading dim: one shard per GPU)" : ""));
    if (t.dtype() == DType::kString) {
      std::vector<const char*>& e = strings.emplace_back();
      for (int64_t j = 0; j < t.numel(); ++j) e.push_back(t.data<std::string>()[j].c_str());
      in.push_back(e.data());
      continue;
    }
    in.push_back(t.raw());
  }
  // An output sized at run time (a dim of -1), or of strings, is read from
  // the model's host memory after the run.
  auto sized_at_run_time = [](const TensorInfo& o) {
    return o.dtype == DType::kString || std::find(o.dims.begin(), o.dims.end(), -1) != o.dims.end();
  };
  std::vector<Tensor> out;
  std::vector<void*> out_ptrs;
  for (const TensorInfo& o : outputs_) {
    if (sized_at_run_time(o)) {
      out.emplace_back();
      out_ptrs.push_back(nullptr);
      continue;
    }
    out.emplace_back(o.dtype, Dims(o.dims.begin(), o.dims.end()));
    out_ptrs.push_back(out.back().raw());
  }
  char err[2048] = "";
  if (api_->run(model_, in.data(), out_ptrs.data(), err, sizeof err) != 0)
    return absl::InternalError(absl::StrCat("running ", dir_, ": ", err));
  for (size_t i = 0; i < outputs_.size(); ++i) {
    if (!sized_at_run_time(outputs_[i])) continue;
    const kiln_tensor_info* info = api_->output(model_, static_cast<int>(i));
    const void* data = api_->output_data ? api_->output_data(model_, static_cast<int>(i)) : nullptr;
    if (!info || info->rank < 0 || (!data && info->bytes > 0))
      return absl::InternalError(absl::StrCat("running ", dir_, ": output ", outputs_[i].name, " was not returned"));
    if (outputs_[i].dtype == DType::kString) {
      absl::StatusOr<Tensor> t = runtime::DeserializeStrings(Dims(info->dims, info->dims + info->rank), data,
                                                            info->bytes);
      if (!t.ok())
        return absl::InternalError(absl::StrCat("running ", dir_, ": output ", outputs_[i].name, ": ",
                                                t.status().message()));
      out[i] = *std::move(t);
      continue;
    }
    Tensor t(outputs_[i].dtype, Dims(info->dims, info->dims + info->rank));
    if (t.nbytes() != info->bytes)
      return absl::InternalError(absl::StrCat("running ", dir_, ": output ", outputs_[i].name, " holds ", info->bytes,
                                              " bytes, not ", t.nbytes()));
    if (t.nbytes() > 0) std::memcpy(t.raw(), data, t.nbytes());
    out[i] = std::move(t);
  }
  return out;
}

absl::StatusOr<std::vector<Tensor>> CudaExecutable::RunRanks(const std::vector<Tensor>& inputs, int ranks) {
  const Api& a = *api_;
  if (!a.load_on_device || !a.init_replicas || !a.run_replicas)
    return absl::FailedPreconditionError(
        absl::StrCat(dir_, " predates data-parallel runs: compile it again to run ", ranks, " ranks"));
  KILN_ASSIGN_OR_RETURN(int devices, CudaDeviceCount());
  if (ranks > devices)
    return absl::FailedPreconditionError(absl::StrCat("inputs of ", ranks, " shards need ", ranks,
                                                      " GPUs (one rank each); this machine has ", devices));
  for (const TensorInfo& o : outputs_)
    if (std::find(o.dims.begin(), o.dims.end(), -1) != o.dims.end())
      return absl::UnimplementedError(absl::StrCat("output ", o.name, " is sized at run time: run one rank"));
  char err[2048] = "";
  while (static_cast<int>(ranks_.size()) < ranks) {
    const int r = static_cast<int>(ranks_.size());
    void* m = a.load_on_device(dir_.c_str(), r, err, sizeof err);
    if (!m) return absl::FailedPreconditionError(absl::StrCat("loading rank ", r, " of ", dir_, ": ", err));
    a.set_host_ops(m, static_cast<const kiln_host_ops*>(runtime::ReferenceHostOps()), nullptr);
    ranks_.push_back(m);
  }
  if (joined_ != ranks) {
    if (a.init_replicas(ranks_.data(), ranks, err, sizeof err) != 0)
      return absl::InternalError(absl::StrCat("joining ", ranks, " ranks: ", err));
    joined_ = ranks;
  }
  std::vector<std::vector<Tensor>> shards(ranks), outs(ranks);
  std::vector<std::vector<const void*>> in(ranks);
  std::vector<std::vector<void*>> out(ranks);
  for (int r = 0; r < ranks; ++r) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      shards[r].push_back(inputs[i].LeadingRows(r * inputs_[i].dims[0], inputs_[i].dims[0]));
      in[r].push_back(shards[r].back().raw());
    }
    for (const TensorInfo& o : outputs_) {
      outs[r].emplace_back(o.dtype, Dims(o.dims.begin(), o.dims.end()));
      out[r].push_back(outs[r].back().raw());
    }
  }
  std::vector<const void* const*> in_ptrs;
  std::vector<void* const*> out_ptrs;
  for (int r = 0; r < ranks; ++r) {
    in_ptrs.push_back(in[r].data());
    out_ptrs.push_back(out[r].data());
  }
  if (a.run_replicas(ranks_.data(), ranks, in_ptrs.data(), out_ptrs.data(), err, sizeof err) != 0)
    return absl::InternalError(absl::StrCat("running ", dir_, " on ", ranks, " GPUs: ", err));
  return outs[0];
}

}  // namespace kiln::target
