//===- cuda_test_util.h - Shared pieces of the cuda target's tests -*- C++ -*-===//
//
// Models compiled for the cuda target in-process, and a host emulation of
// a package: its memory plan, views, constants, strided-copy kernels
// (interpreted from their pieces) and host tasks (through the reference
// host-op provider the runtime gives the launcher) and every other kernel
// through the tile IR interpreter, so packages can be checked against the
// reference executor without a GPU.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <random>
#include <thread>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "graph/support/float16.h"
#include "frontend/onnx/importer.h"
#include "graph/exec/executor.h"
#include "graph/ir/parser.h"
#include "graph/ops/shape_inference.h"
#include "graph/passes/pass_manager.h"
#include "target/cuda/cuda_executable.h"
#include "target/builtin_targets.h"
#include "target/backend/tile_interpreter.h"
#include "target/cuda/cuda_package.h"

namespace kiln::cuda_test {

inline std::unique_ptr<target::Target> CudaTarget() {
  auto t = target::CreateBuiltinTarget("cuda");
  EXPECT_TRUE(t.ok()) << t.status();
  return *std::move(t);
}

inline absl::StatusOr<Model> ParseKir(const std::string& text) {
  auto m = ParseModel(text, "test.kir");
  if (!m.ok()) return m.status();
  absl::Status s = InferShapes(*m->graph);
  if (!s.ok()) return s;
  return m;
}

// Runs the cuda target's pipeline ("default,form-fusion-groups").
inline absl::Status Optimize(Model& m, const target::Target& t) {
  PassManager pm;
  absl::Status s = pm.AddPipeline(t.description().pipeline);
  if (!s.ok()) return s;
  return pm.Run(m).status();
}

inline absl::StatusOr<target::cuda::CudaPackage> Package(const Model& m, target::CompileOptions options = {}) {
  auto t = CudaTarget();
  return target::cuda::BuildCudaPackage(m, *t, options);
}

// An ONNX file imported, optimized by the cuda target's pipeline and packaged.
inline absl::StatusOr<target::cuda::CudaPackage> CompileOnnx(const std::string& path,
                                                           target::CompileOptions options = {}) {
  auto m = onnx_import::ImportFile(path);
  if (!m.ok()) return m.status();
  auto t = CudaTarget();
  absl::Status s = Optimize(*m, *t);
  if (!s.ok()) return s;
  return target::cuda::BuildCudaPackage(*m, *t, options);
}

inline std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline std::string TempDir(const std::string& name) {
  std::string dir = (std::filesystem::temp_directory_path() / absl::StrCat("kiln_cuda_test_", getpid(), "_", name))
                        .string();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// The kiln_host_ops struct of kiln_model.h.
struct HostTensor {
  int dtype;
  int rank;
  const int64_t* dims;
  void* data;
  size_t bytes;
};
struct HostOps {
  void* (*load)(void*, const char*, size_t, const void*, size_t, char*, size_t);
  int (*run)(void*, void*, int, const HostTensor*, int, HostTensor*, int, char*, size_t);
  void (*release)(void*, void*);
};

// A buffer a task wrote: its bytes in the emulation's arena and their
// element type (undefined for a strided copy's destination, which holds
// moved bytes).
struct WrittenBuffer {
  int buffer;
  DType dtype;
  const unsigned char* data;
  int64_t bytes;
};

// Hooks into Emulate, task by task: `before` may replace the arena (with a
// GPU's arena after the previous task, say), `after` sees what the task
// wrote.
// `collective` computes a collective task's outputs (the means over the
// ranks, EmulateReplicas) from `ptr(buffer)`; without it a collective task
// is the mean over one rank, its inputs copied.
struct EmulationHooks {
  std::function<absl::Status(size_t task, std::vector<unsigned char>& arena)> before;
  std::function<void(size_t task, const std::vector<WrittenBuffer>& written)> after;
  std::function<absl::Status(size_t task, const std::function<unsigned char*(int)>& ptr)> collective;
};

// Runs `p` on the host: strided copies as the launcher's copy kernels do,
// kernels of the shared backend through the tile IR interpreter (their
// arguments bound to the launch's buffers), host tasks through the
// reference host ops; values the package keeps on the host (those sized at
// run time among them) are kept as the launcher keeps them.
inline absl::StatusOr<std::vector<Tensor>> Emulate(const target::cuda::CudaPackage& p,
                                                   const std::vector<Tensor>& inputs,
                                                   const EmulationHooks* hooks = nullptr) {
  using target::cuda::PackageBuffer;
  using target::cuda::PackageTask;
  std::vector<unsigned char> arena(static_cast<size_t>(p.arena_bytes) + 1, 0xcd);
  std::vector<unsigned char> constants(p.constants.begin(), p.constants.end());
  auto ptr = [&](int b) -> unsigned char* {
    const PackageBuffer& x = p.buffers[b];
    return (x.kind == PackageBuffer::Kind::kConstant ? constants.data() : arena.data()) + x.offset;
  };
  for (size_t i = 0; i < inputs.size(); ++i)
    std::memcpy(ptr(p.values[p.inputs[i]].buffer), inputs[i].raw(), inputs[i].nbytes());
  const auto* ops = static_cast<const HostOps*>(runtime::ReferenceHostOps());
  void* graph = nullptr;
  std::vector<std::vector<unsigned char>> host(p.values.size());  // values kept on the host
  std::vector<std::vector<int64_t>> host_dims(p.values.size());   // and their dims
  std::vector<WrittenBuffer> written;
  for (size_t ti = 0; ti < p.tasks.size(); ++ti) {
    const PackageTask& t = p.tasks[ti];
    if (hooks && hooks->before) {
      if (absl::Status s = hooks->before(ti, arena); !s.ok()) return s;
    }
    written.clear();
    auto done = [&] {
      if (hooks && hooks->after) hooks->after(ti, written);
    };
    if (t.kind == PackageTask::Kind::kView) {
      done();
      continue;
    }
    if (t.kind == PackageTask::Kind::kCollective) {
      if (hooks && hooks->collective) {
        if (absl::Status s = hooks->collective(ti, ptr); !s.ok()) return s;
      } else {
        for (const target::cuda::CollectiveItem& c : t.collective)
          std::memcpy(ptr(c.output), ptr(c.input), static_cast<size_t>(p.buffers[c.input].bytes));
      }
      for (const target::cuda::CollectiveItem& c : t.collective)
        written.push_back({c.output, c.dtype, ptr(c.output), p.buffers[c.output].bytes});
      done();
      continue;
    }
    if (t.kind == PackageTask::Kind::kKernel) {
      for (const PackageTask::Launch& l : t.launches) {
        const target::cuda::PackageKernel& k = p.kernels[l.kernel];
        if (k.decode_attention) {
          const target::cuda::DecodeAttention& a = *k.decode_attention;
          if (k.decode_attention_stage == 1) {
            target::cuda::DecodeAttentionPartialOnHost(a, ptr(l.args[1]), ptr(l.args[2]), ptr(l.args[3]),
                                                       l.args.size() > 4 ? ptr(l.args[4]) : nullptr,
                                                       reinterpret_cast<float*>(ptr(l.args[0])));
            written.push_back({l.args[0], DType::kF32, ptr(l.args[0]), p.buffers[l.args[0]].bytes});
          } else {
            target::cuda::DecodeAttentionCombineOnHost(a, reinterpret_cast<const float*>(ptr(l.args[1])),
                                                       ptr(l.args[0]));
            written.push_back({l.args[0], a.dtype, ptr(l.args[0]), p.buffers[l.args[0]].bytes});
          }
          continue;
        }
        if (k.int_elementwise) {
          std::vector<const void*> ins;
          for (size_t i = 1; i < l.args.size(); ++i) ins.push_back(ptr(l.args[i]));
          if (auto st = target::cuda::IntElementwiseOnHost(*k.int_elementwise, ins, ptr(l.args[0])); !st.ok())
            return st;
          written.push_back({l.args[0], k.int_elementwise->output, ptr(l.args[0]), p.buffers[l.args[0]].bytes});
          continue;
        }
        if (k.arg_reduce) {
          target::cuda::ArgReduceOnHost(*k.arg_reduce, ptr(l.args[1]), reinterpret_cast<int64_t*>(ptr(l.args[0])));
          written.push_back({l.args[0], DType::kI64, ptr(l.args[0]), p.buffers[l.args[0]].bytes});
          continue;
        }
        if (!k.copy) {
          auto tk = target::tile::Parse(k.tile_ir);
          if (!tk.ok()) return tk.status();
          std::vector<Tensor> args;
          std::vector<Tensor*> ptrs;
          args.reserve(tk->args.size());
          for (size_t i = 0; i < tk->args.size(); ++i) {
            args.emplace_back(tk->args[i].dtype, tk->args[i].shape);
            std::memcpy(args.back().raw(), ptr(l.args[i]), args.back().nbytes());
            ptrs.push_back(&args.back());
          }
          if (auto st = target::tile::RunTileKernel(*tk, ptrs); !st.ok()) return st;
          for (size_t i = 0; i < tk->args.size(); ++i) {
            const auto role = tk->args[i].role;
            if (role == target::tile::TileArg::Role::kOut || role == target::tile::TileArg::Role::kWorkspace)
              std::memcpy(ptr(l.args[i]), args[i].raw(), args[i].nbytes());
            if (role == target::tile::TileArg::Role::kOut)
              written.push_back({l.args[i], args[i].dtype(), ptr(l.args[i]), static_cast<int64_t>(args[i].nbytes())});
          }
          continue;
        }
        const target::CopyPiece& c = k.copy_piece;
        const int64_t es = k.copy_element_bytes;
        unsigned char* dst = ptr(l.args[0]);
        const unsigned char* src = ptr(l.args[1]);
        int64_t n = 1;
        for (int64_t d : c.dims) n *= d;
        for (int64_t i = 0; i < n; ++i) {
          int64_t r = i, s = c.src_base, d = c.dst_base;
          for (int j = static_cast<int>(c.dims.size()) - 1; j >= 0; --j) {
            int64_t q = r % c.dims[j];
            r /= c.dims[j];
            if (j == c.table_dim && c.index_input >= 0) {
              const unsigned char* ix = ptr(l.args[2]);
              int64_t v = c.index_bytes == 4 ? reinterpret_cast<const int32_t*>(ix)[q]
                                             : reinterpret_cast<const int64_t*>(ix)[q];
              v = v < 0 ? v + c.index_extent : v;
              s += v * c.index_scale;
            } else {
              s += j == c.table_dim ? c.table[q] : q * c.src_strides[j];
            }
            d += q * c.dst_strides[j];
          }
          if (c.scatter) {  // ScatterElements: the element's own index moves its destination
            const unsigned char* ix = ptr(l.args[2]);
            int64_t v = c.index_bytes == 4 ? reinterpret_cast<const int32_t*>(ix)[i]
                                           : reinterpret_cast<const int64_t*>(ix)[i];
            v = v < 0 ? v + c.index_extent : v;
            d += v * c.index_scale;
          }
          std::memcpy(dst + d * es, src + s * es, static_cast<size_t>(es));
        }
        written.push_back({l.args[0], DType::kUndefined, dst, p.buffers[l.args[0]].bytes});
      }
      done();
      continue;
    }
    char err[1024] = "";
    if (!graph) {
      graph = ops->load(nullptr, p.host_graph_kir.data(), p.host_graph_kir.size(), p.host_graph_blobs.data(),
                        p.host_graph_blobs.size(), err, sizeof err);
      if (!graph) return absl::InternalError(err);
    }
    std::vector<std::vector<unsigned char>> data;
    std::vector<HostTensor> ins, outs;
    std::vector<int> all = t.host_inputs;
    all.insert(all.end(), t.host_outputs.begin(), t.host_outputs.end());
    data.reserve(all.size());
    for (size_t i = 0; i < all.size(); ++i) {
      const target::cuda::PackageValue& v = p.values[all[i]];
      const bool input = i < t.host_inputs.size();
      const std::vector<int64_t>& dims = v.dynamic && input ? host_dims[all[i]] : v.dims;
      int64_t bytes = static_cast<int64_t>(DTypeSize(v.dtype));
      for (int64_t d : dims) bytes *= d;
      if (v.dynamic && !input) bytes = 0;
      data.emplace_back(static_cast<size_t>(bytes));
      if (input) {
        if (v.on_host && host[all[i]].size() != data.back().size())
          return absl::InternalError(absl::StrCat(t.node, ": ", v.name, " was not computed on the host"));
        if (bytes > 0)
          std::memcpy(data.back().data(), v.on_host ? host[all[i]].data() : ptr(v.buffer), static_cast<size_t>(bytes));
      }
      HostTensor h{DTypeToOnnx(v.dtype), static_cast<int>(dims.size()), dims.data(),
                   v.buffer >= 0 || v.on_host ? data.back().data() : nullptr, static_cast<size_t>(bytes)};
      if (v.dynamic && !input) h = {DTypeToOnnx(v.dtype), v.on_host ? -1 : 0, nullptr, nullptr, 0};
      (input ? ins : outs).push_back(h);
    }
    if (ops->run(nullptr, graph, t.host_node, ins.data(), static_cast<int>(ins.size()), outs.data(),
                 static_cast<int>(outs.size()), err, sizeof err) != 0)
      return absl::InternalError(absl::StrCat(t.node, ": ", err));
    for (size_t i = 0; i < t.host_outputs.size(); ++i) {
      const int x = t.host_outputs[i];
      const target::cuda::PackageValue& v = p.values[x];
      if (v.dynamic && v.on_host) {
        const HostTensor& h = outs[i];
        if (h.rank < 0) return absl::InternalError(absl::StrCat(t.node, ": ", v.name, " was not sized"));
        host_dims[x].assign(h.dims, h.dims + h.rank);
        host[x].assign(static_cast<const unsigned char*>(h.data), static_cast<const unsigned char*>(h.data) + h.bytes);
        continue;
      }
      const std::vector<unsigned char>& d = data[t.host_inputs.size() + i];
      if (v.on_host) host[x] = d;
      if (v.buffer < 0) continue;
      std::memcpy(ptr(v.buffer), d.data(), d.size());
      written.push_back({v.buffer, v.dtype, ptr(v.buffer), static_cast<int64_t>(d.size())});
    }
    done();
  }
  std::vector<Tensor> out;
  for (int o : p.outputs) {
    const target::cuda::PackageValue& v = p.values[o];
    Tensor t(v.dtype, v.dynamic ? host_dims[o] : v.dims);
    if (v.on_host && host[o].size() != t.nbytes())
      return absl::InternalError(absl::StrCat("output ", v.name, " was not computed on the host"));
    if (t.nbytes() > 0) std::memcpy(t.raw(), v.on_host ? host[o].data() : ptr(v.buffer), t.nbytes());
    out.push_back(std::move(t));
  }
  if (graph) ops->release(nullptr, graph);
  return out;
}

// Runs `p` as `inputs.size()` ranks of a data-parallel step, each on its
// inputs, a host thread per rank: every collective task waits for all
// ranks and writes each its outputs as the mean of the ranks' inputs (in
// f32, rounded to the tensor's type), as ncclAllReduce with ncclAvg does.
inline absl::StatusOr<std::vector<std::vector<Tensor>>> EmulateReplicas(const target::cuda::CudaPackage& p,
                                                                        const std::vector<std::vector<Tensor>>& inputs) {
  const size_t n = inputs.size();
  std::mutex mu;
  std::condition_variable cv;
  size_t arrived = 0, generation = 0;
  std::vector<const std::function<unsigned char*(int)>*> ptrs(n, nullptr);
  absl::Status failed;
  auto mean = [&](size_t task) {  // all ranks have arrived: every rank's outputs
    for (const target::cuda::CollectiveItem& c : p.tasks[task].collective) {
      std::vector<Tensor> in;
      for (size_t r = 0; r < n; ++r) {
        Tensor x(c.dtype, {c.elements});
        std::memcpy(x.raw(), (*ptrs[r])(c.input), x.nbytes());
        in.push_back(std::move(x));
      }
      Tensor y(c.dtype, {c.elements});
      for (int64_t i = 0; i < c.elements; ++i) {
        double sum = 0;
        for (const Tensor& x : in) sum += x.GetDouble(i);
        const float v = static_cast<float>(sum / static_cast<double>(n));
        if (c.dtype == DType::kF16) y.data<uint16_t>()[i] = FloatToHalfBits(v);
        else if (c.dtype == DType::kBF16) y.data<uint16_t>()[i] = FloatToBFloat16Bits(v);
        else y.data<float>()[i] = v;
      }
      for (size_t r = 0; r < n; ++r) std::memcpy((*ptrs[r])(c.output), y.raw(), y.nbytes());
    }
  };
  std::vector<absl::StatusOr<std::vector<Tensor>>> results(n, absl::UnknownError("not run"));
  std::vector<std::thread> ranks;
  for (size_t r = 0; r < n; ++r)
    ranks.emplace_back([&, r] {
      EmulationHooks hooks;
      hooks.collective = [&, r](size_t task, const std::function<unsigned char*(int)>& ptr) -> absl::Status {
        std::unique_lock<std::mutex> lock(mu);
        ptrs[r] = &ptr;
        const size_t gen = generation;
        if (++arrived == n) {
          mean(task);
          arrived = 0;
          ++generation;
          cv.notify_all();
        } else {
          cv.wait(lock, [&] { return generation != gen || !failed.ok(); });
        }
        return failed;
      };
      results[r] = Emulate(p, inputs[r], &hooks);
      if (!results[r].ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (failed.ok()) failed = results[r].status();
        cv.notify_all();
      }
    });
  for (std::thread& t : ranks) t.join();
  std::vector<std::vector<Tensor>> out;
  for (auto& r : results) {
    if (!r.ok()) return r.status();
    out.push_back(*std::move(r));
  }
  return out;
}

// Whether `got` is within `rtol` of `want`, relative to want's largest magnitude.
inline ::testing::AssertionResult Near(const Tensor& got, const Tensor& want, double rtol) {
  if (got.dims() != want.dims()) return ::testing::AssertionFailure() << "shapes differ";
  double scale = 1, worst = 0;
  int64_t at = 0;
  for (int64_t i = 0; i < want.numel(); ++i) scale = std::max(scale, std::abs(want.GetDouble(i)));
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double e = std::abs(got.GetDouble(i) - want.GetDouble(i));
    if (!(e <= worst)) worst = e, at = i;
  }
  if (worst <= rtol * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "element " << at << ": " << got.GetDouble(at) << " vs " << want.GetDouble(at)
                                       << " (error " << worst / scale << " of the largest magnitude, allowed " << rtol
                                       << ")";
}

// A tensor of `dt` with values from `seed`: uniform in [-1, 1) for f32,
// 0..99 for i32 and i64, the seed's byte otherwise.
inline Tensor Random(DType dt, std::vector<int64_t> dims, uint32_t seed) {
  Tensor t(dt, dims);
  std::mt19937 rng(seed);
  for (int64_t i = 0; i < t.numel(); ++i) {
    switch (dt) {
      case DType::kF32: t.data<float>()[i] = std::uniform_real_distribution<float>(-1, 1)(rng); break;
      case DType::kI64: t.data<int64_t>()[i] = static_cast<int64_t>(rng() % 100); break;
      case DType::kI32: t.data<int32_t>()[i] = static_cast<int32_t>(rng() % 100); break;
      default: std::memset(t.raw(), static_cast<int>(seed), t.nbytes());
    }
  }
  return t;
}

// Compiles `kir` for cuda, emulates the package on the host (the tile
// kernels through the interpreter), and compares its outputs with the
// reference executor: bit for bit, or within `rtol` when given.
inline target::cuda::CudaPackage ExpectEmulationMatches(const std::string& kir, const std::vector<Tensor>& inputs,
                                                        double rtol = 0, target::CompileOptions options = {}) {
  auto m = ParseKir(kir);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return {};
  auto p = Package(*m, options);
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return {};
  auto got = Emulate(*p, inputs);
  EXPECT_TRUE(got.ok()) << got.status();
  Executor exec;
  auto want = exec.Run(*m->graph, inputs);
  EXPECT_TRUE(want.ok()) << want.status();
  if (!got.ok() || !want.ok()) return *p;
  EXPECT_EQ(got->size(), want->size());
  for (size_t i = 0; i < got->size() && i < want->size(); ++i) {
    EXPECT_EQ((*got)[i].dims(), (*want)[i].dims()) << "output " << i;
    if (rtol > 0) {
      EXPECT_TRUE(Near((*got)[i], (*want)[i], rtol)) << "output " << i << "\n" << p->Explain();
    } else {
      EXPECT_TRUE((*got)[i].Equals((*want)[i])) << "output " << i << "\n" << p->Explain();
    }
  }
  return *p;
}

// The package's tasks on `engine`.
inline int CountEngine(const target::cuda::CudaPackage& p, const std::string& engine) {
  int n = 0;
  for (const target::cuda::PackageTask& t : p.tasks) n += t.engine == engine;
  return n;
}

}  // namespace kiln::cuda_test
