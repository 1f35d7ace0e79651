//===- cuda_copy_kernel_test.cc - Data movement as strided-copy kernels ----===//
//
// target/cuda/cuda_copy_kernel.cc and the copy chains of cuda_package.cc:
// pieces simplified and named by content, every data-movement op emulated
// from its pieces against the reference executor, gathers and scatters
// through indices read on the device, and copies in a row composed into one.
//
//===----------------------------------------------------------------------===//
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "target/cuda/cuda_copy_kernel.h"
#include "tests/cuda/cuda_test_util.h"

namespace kiln {
namespace {

using cuda_test::CountEngine;
using cuda_test::ExpectEmulationMatches;
using cuda_test::Random;
using target::cuda::CudaPackage;
using target::cuda::PackageTask;

TEST(CudaCopyKernel, PiecesSimplifyAndNameByContent) {
  target::CopyPiece p;
  p.dims = {2, 1, 3, 4};
  p.src_strides = {12, 12, 4, 1};
  p.dst_strides = {12, 12, 4, 1};
  target::SimplifyPiece(p);
  EXPECT_EQ(p.dims, (std::vector<int64_t>{24}));  // contiguous on both sides: one dimension
  target::CopyPiece t;
  t.dims = {3, 2};
  t.src_strides = {1, 3};
  t.dst_strides = {2, 1};
  auto a = target::cuda::MakeCopyLaunch(t, 4, "Transpose");
  auto b = target::cuda::MakeCopyLaunch(t, 4, "another op");
  auto c = target::cuda::MakeCopyLaunch(t, 2, "Transpose");
  EXPECT_EQ(a.function, b.function);  // the same piece: the same kernel
  EXPECT_NE(a.function, c.function);  // another element width: another kernel
  EXPECT_TRUE(absl::StartsWith(a.function, "kiln_copy_"));
  EXPECT_TRUE(absl::StrContains(a.source, "extern \"C\" __global__ void __launch_bounds__(256) " + a.function));
  EXPECT_TRUE(absl::StrContains(a.source, "unsigned int* __restrict__ dst")) << a.source;
  EXPECT_EQ(a.elements, 6);
  EXPECT_EQ(a.blocks, 1);
  EXPECT_EQ(a.threads, 256);
  // Large copies: a grid-stride loop over at most 132 x 16 blocks, 64-bit indices past 2^31.
  target::CopyPiece big;
  big.dims = {int64_t{3} << 30};
  big.src_strides = big.dst_strides = {1};
  auto l = target::cuda::MakeCopyLaunch(big, 1, "");
  EXPECT_EQ(l.blocks, 132 * 16);
  EXPECT_TRUE(absl::StrContains(l.source, "long long i")) << l.source;
}

TEST(CudaCopyKernel, DataMovementMatchesTheReference) {
  const Tensor x = Random(DType::kF32, {2, 3, 4}, 1);
  struct Case {
    const char* name;
    const char* body;
  };
  const Case cases[] = {
      {"transpose", "%y = Transpose(%x) {perm = [2, 0, 1]}"},
      {"transpose_default", "%y = Transpose(%x)"},
      {"slice", R"(%s = const i64[2] dense [1, 1]
  %e = const i64[2] dense [3, 4]
  %a = const i64[2] dense [1, 2]
  %y = Slice(%x, %s, %e, %a))"},
      {"slice_negative_step", R"(%s = const i64[1] dense [-1]
  %e = const i64[1] dense [-100]
  %a = const i64[1] dense [2]
  %st = const i64[1] dense [-2]
  %y = Slice(%x, %s, %e, %a, %st))"},
      {"concat", "%y = Concat(%x, %x, %x) {axis = 1}"},
      {"split", R"(%sp = const i64[2] dense [1, 3]
  %y, %z = Split(%x, %sp) {axis = 2})"},
      {"expand", R"(%sh = const i64[4] dense [2, 2, 3, 4]
  %y = Expand(%x, %sh))"},
      {"tile", R"(%r = const i64[3] dense [2, 1, 3]
  %y = Tile(%x, %r))"},
      {"gather", R"(%i = const i64[2,2] dense [2, -1, 0, 1]
  %y = Gather(%x, %i) {axis = 2})"},
      {"identity", "%y = Identity(%x)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::string outs = absl::StrContains(c.body, "%y, %z") ? "%y, %z" : "%y";
    CudaPackage p = ExpectEmulationMatches(
        absl::StrCat("graph @main(%x: f32[2,3,4]) {\n  ", c.body, "\n  return ", outs, "\n}"), {x});
    EXPECT_EQ(CountEngine(p, "host"), 0) << p.Explain();
    // Identity is a view on every target (kViewOps): nothing moves.
    if (c.name == std::string("identity")) EXPECT_EQ(CountEngine(p, "view"), 1) << p.Explain();
    else EXPECT_GE(CountEngine(p, "simt"), 1) << p.Explain();
  }
}

// A nearest-neighbour Resize with constant scales or sizes is one copy
// piece through a table of source pixels the reference kernel itself finds
// (every coordinate mode and rounding rule its own); a linear one computes,
// and stays on the host.
TEST(CudaCopyKernel, NearestResizeIsOneTableCopy) {
  const Tensor x = Random(DType::kF32, {2, 3, 5, 4}, 2);
  struct Case {
    const char* name;
    const char* body;
    bool device;
  };
  const Case cases[] = {
      {"upsample_scales", R"(%sc = const f32[4] dense [1, 1, 2, 1.5]
  %y = Resize(%x, %roi, %sc) {mode = "nearest"})", true},
      {"downsample_scales", R"(%sc = const f32[4] dense [1, 1, 0.6, 0.5]
  %y = Resize(%x, %roi, %sc) {mode = "nearest"})", true},
      {"sizes_asymmetric_ceil", R"(%no = const f32[0] dense []
  %sz = const i64[4] dense [2, 3, 7, 9]
  %y = Resize(%x, %roi, %no, %sz) {mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "round_prefer_ceil"})", true},
      {"align_corners_floor", R"(%sc = const f32[4] dense [1, 1, 1.7, 2.2]
  %y = Resize(%x, %roi, %sc) {mode = "nearest", coordinate_transformation_mode = "align_corners", nearest_mode = "floor"})", true},
      {"linear", R"(%sc = const f32[4] dense [1, 1, 2, 2]
  %y = Resize(%x, %roi, %sc) {mode = "linear"})", false},
      {"channels_resized", R"(%sc = const f32[4] dense [1, 2, 1, 1]
  %y = Resize(%x, %roi, %sc) {mode = "nearest"})", false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    CudaPackage p = ExpectEmulationMatches(
        absl::StrCat("graph @main(%x: f32[2,3,5,4]) {\n  %roi = const f32[0] dense []\n  ", c.body,
                     "\n  return %y\n}"),
        {x});
    EXPECT_EQ(CountEngine(p, "simt"), c.device ? 1 : 0) << p.Explain();
    EXPECT_EQ(CountEngine(p, "host"), c.device ? 0 : 1) << p.Explain();
    if (c.device) {
      ASSERT_EQ(p.kernels.size(), 1u);
      EXPECT_TRUE(absl::StrContains(p.kernels[0].source, "table")) << p.kernels[0].source;
    }
  }
}

TEST(CudaCopyKernel, GatherWithIndicesOnTheDevice) {
  for (const char* idt : {"i64", "i32"}) {
    SCOPED_TRACE(idt);
    Tensor idx(std::string(idt) == "i64" ? DType::kI64 : DType::kI32, {2, 3});
    const int64_t values[] = {0, 4, -1, 2, -5, 3};
    for (int i = 0; i < 6; ++i) {
      if (idx.dtype() == DType::kI64) idx.data<int64_t>()[i] = values[i];
      else idx.data<int32_t>()[i] = static_cast<int32_t>(values[i]);
    }
    for (int axis : {0, 1}) {
      CudaPackage p = ExpectEmulationMatches(
          absl::StrCat("graph @main(%table: f32[5,5], %ids: ", idt, "[2,3]) {\n  %y = Gather(%table, %ids) {axis = ",
                       axis, "}\n  return %y\n}"),
          {Random(DType::kF32, {5, 5}, 4), idx});
      EXPECT_EQ(CountEngine(p, "host"), 0) << p.Explain();
      ASSERT_EQ(p.kernels.size(), 1u);
      EXPECT_TRUE(absl::StrContains(p.kernels[0].source, "* __restrict__ index")) << p.kernels[0].source;
    }
  }
}

// ScatterElements on the device: the data copied whole, then the updates
// written at their indices (negative ones counted from the end), along
// either axis, i32 and i64 indices; a KV cache's update at a position (the
// indices an Expand of it) too.
TEST(CudaCopyKernel, ScatterElementsOnTheDevice) {
  for (const char* idt : {"i64", "i32"}) {
    for (int axis : {0, 1}) {
      SCOPED_TRACE(::testing::Message() << idt << " axis " << axis);
      Tensor idx(std::string(idt) == "i64" ? DType::kI64 : DType::kI32, {2, 3});
      const int64_t values[] = {0, 4, -1, 2, -5, 3};
      for (int i = 0; i < 6; ++i) {
        const int64_t v = axis == 0 ? values[i] % 3 : values[i];
        if (idx.dtype() == DType::kI64) idx.data<int64_t>()[i] = v;
        else idx.data<int32_t>()[i] = static_cast<int32_t>(v);
      }
      CudaPackage p = ExpectEmulationMatches(
          absl::StrCat("graph @main(%x: f32[3,5], %ids: ", idt,
                       "[2,3], %u: f32[2,3]) {\n  %y = ScatterElements(%x, %ids, %u) {axis = ", axis,
                       "}\n  return %y\n}"),
          {Random(DType::kF32, {3, 5}, 4), idx, Random(DType::kF32, {2, 3}, 5)});
      EXPECT_EQ(CountEngine(p, "host"), 0) << p.Explain();
      EXPECT_EQ(p.kernels.size(), 2u) << p.Explain();
    }
  }
  Tensor pos(DType::kI64, {});
  pos.data<int64_t>()[0] = 5;
  CudaPackage cache = ExpectEmulationMatches(R"(graph @main(%cache: f32[1,2,8,4], %pos: i64[], %kv: f32[1,2,1,4]) {
  %shape = const i64[4] dense [1, 2, 1, 4]
  %at = Expand(%pos, %shape)
  %next = ScatterElements(%cache, %at, %kv) {axis = 2}
  return %next
})",
                                             {Random(DType::kF32, {1, 2, 8, 4}, 6), pos,
                                              Random(DType::kF32, {1, 2, 1, 4}, 7)});
  EXPECT_EQ(CountEngine(cache, "host"), 0) << cache.Explain();
}

// A piece that reads what another wrote whole composes into one: the
// head split [2,3,8] -> [2,3,2,4] -> [2,2,3,4] of the middle third of a
// [2,3,24] projection reads the projection directly.
TEST(CudaCopyKernel, PiecesInARowCompose) {
  target::CopyPiece split;  // the second of three [2,3,8] parts of x [2,3,24]
  split.src = 0;
  split.dst = 1;
  split.src_base = 8;
  split.dims = {2, 3, 8};
  split.src_strides = {72, 24, 1};
  split.dst_strides = {24, 8, 1};
  target::CopyPiece heads;  // Transpose [2,3,2,4] perm [0,2,1,3]
  heads.dims = {2, 2, 3, 4};
  heads.src_strides = {24, 4, 8, 1};
  heads.dst_strides = {24, 12, 4, 1};
  std::optional<target::CopyPiece> c = target::ComposePieces(heads, split);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->src, 0);
  EXPECT_EQ(c->src_base, 8);
  EXPECT_EQ(c->src_strides, (std::vector<int64_t>{72, 4, 24, 1}));
  EXPECT_EQ(c->dst_strides, heads.dst_strides);
  // A reader that starts inside the box: a Slice of rows 1..2 of the part.
  target::CopyPiece rows;
  rows.dims = {2, 2, 8};
  rows.src_base = 8;
  rows.src_strides = {24, 8, 1};
  rows.dst_strides = {16, 8, 1};
  c = target::ComposePieces(rows, split);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->src_base, 8 + 24);
  EXPECT_EQ(c->src_strides, (std::vector<int64_t>{72, 24, 1}));
  // A reader that walks backwards (Slice with step -1 along the last axis).
  target::CopyPiece reversed;
  reversed.dims = {2, 3, 8};
  reversed.src_base = 7;
  reversed.src_strides = {24, 8, -1};
  reversed.dst_strides = {24, 8, 1};
  c = target::ComposePieces(reversed, split);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->src_base, 8 + 7);
  EXPECT_EQ(c->src_strides, (std::vector<int64_t>{72, 24, -1}));
  reversed.src_base = 6;  // would step before the start of its row
  EXPECT_FALSE(target::ComposePieces(reversed, split).has_value());
  // Steps that carry from one dimension of the box into the next do not.
  target::CopyPiece carry;
  carry.dims = {4};
  carry.src_base = 4;
  carry.src_strides = {4};
  carry.dst_strides = {1};
  EXPECT_FALSE(target::ComposePieces(carry, split).has_value());  // 4, 8, 12, 16 cross rows of 8
  // Nor do tables, or a writer that leaves gaps.
  target::CopyPiece table = heads;
  table.table_dim = 0;
  table.table = {0, 24};
  EXPECT_FALSE(target::ComposePieces(table, split).has_value());
  target::CopyPiece gaps = split;
  gaps.dst_strides = {48, 8, 1};
  EXPECT_FALSE(target::ComposePieces(heads, gaps).has_value());
}

// An attention's qkv Split and the head Transposes after it: each head
// tensor is one copy from the projection, the Split writes nothing. A part
// something else also reads is still written.
TEST(CudaPackage, CopiesInARowComposeIntoOne) {
  CudaPackage p = ExpectEmulationMatches(R"(graph @main(%x: f32[2,3,24]) {
  %q, %k, %v = Split(%x) {axis = 2, num_outputs = 3}
  %s = const i64[4] dense [2, 3, 2, 4]
  %q4 = Reshape(%q, %s)
  %k4 = Reshape(%k, %s)
  %v4 = Reshape(%v, %s)
  %qh = Transpose(%q4) {perm = [0, 2, 1, 3]}
  %kt = Transpose(%k4) {perm = [0, 2, 3, 1]}
  %vh = Transpose(%v4) {perm = [0, 2, 1, 3]}
  %lo = const i64[1] dense [1]
  %hi = const i64[1] dense [3]
  %ax = const i64[1] dense [2]
  %vs = Slice(%vh, %lo, %hi, %ax)
  %y = Relu(%qh)
  %z = Relu(%kt)
  %w = Relu(%vs)
  return %y, %z, %w
})",
                                         {Random(DType::kF32, {2, 3, 24}, 4)});
  int copies = 0;
  for (const PackageTask& t : p.tasks)
    if (t.engine == "simt" && t.op != "Relu") copies += static_cast<int>(t.launches.size());
  EXPECT_EQ(copies, 3) << p.Explain();  // Q, K^T and V's rows 1..2, each from %x
  for (const PackageTask& t : p.tasks) {
    if (t.op == "Split") {
      EXPECT_EQ(t.engine, "view") << p.Explain();
    }
  }

  CudaPackage q = ExpectEmulationMatches(R"(graph @main(%x: f32[2,3,24]) {
  %q, %k, %v = Split(%x) {axis = 2, num_outputs = 3}
  %qt = Transpose(%q) {perm = [0, 2, 1]}
  %y = Relu(%qt)
  %z = Relu(%k)
  %w = Relu(%v)
  %u = Neg(%q)
  return %y, %z, %w, %u
})",
                                         {Random(DType::kF32, {2, 3, 24}, 5)});
  for (const PackageTask& t : q.tasks) {
    if (t.op == "Split") {
      EXPECT_EQ(t.launches.size(), 3u) << q.Explain();
    }
  }

  // A chain of three (Transpose, Slice, Transpose) is one copy.
  CudaPackage chain = ExpectEmulationMatches(R"(graph @main(%x: f32[4,6,5]) {
  %a = Transpose(%x) {perm = [2, 0, 1]}
  %lo = const i64[2] dense [1, 4]
  %hi = const i64[2] dense [3, 0]
  %ax = const i64[2] dense [1, 2]
  %st = const i64[2] dense [1, -2]
  %b = Slice(%a, %lo, %hi, %ax, %st)
  %c = Transpose(%b) {perm = [1, 2, 0]}
  %y = Relu(%c)
  return %y
})",
                                             {Random(DType::kF32, {4, 6, 5}, 7)});
  int chain_copies = 0;
  for (const PackageTask& t : chain.tasks)
    if (t.op != "Relu") chain_copies += static_cast<int>(t.launches.size());
  EXPECT_EQ(chain_copies, 1) << chain.Explain();

  // Indices a Gather reads at run time are not a copy's source: the
  // Transpose that makes them still writes them.
  Tensor ids(DType::kI64, {3, 2});
  const int64_t values[] = {0, 4, 2, 1, 3, 3};
  for (int i = 0; i < 6; ++i) ids.data<int64_t>()[i] = values[i];
  CudaPackage r = ExpectEmulationMatches(R"(graph @main(%table: f32[5,4], %ids: i64[3,2]) {
  %it = Transpose(%ids) {perm = [1, 0]}
  %y = Gather(%table, %it) {axis = 0}
  return %y
})",
                                         {Random(DType::kF32, {5, 4}, 6), ids});
  for (const PackageTask& t : r.tasks) {
    if (t.op == "Transpose") {
      EXPECT_EQ(t.launches.size(), 1u) << r.Explain();
    }
  }
}

}  // namespace
}  // namespace kiln
