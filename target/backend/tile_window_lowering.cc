//===- tile_window_lowering.cc - Pools and depthwise convolutions ---------===//
//
// The window form: a MaxPool or AveragePool, or a depthwise convolution
// (from its GEMM problem), as im2col tiles of channels x output positions
// in vector buffers, optionally weighted, reduced over the window axis,
// then the epilogue; LowerNode hands them here.
//
//===----------------------------------------------------------------------===//
#include "target/backend/tile_lowering.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "graph/support/status.h"
#include "target/backend/tile_lowering_shared.h"
#include "target/backend/window.h"

namespace kiln::target::tile {

namespace internal {

bool Depthwise(const GemmProblem& p) {
  return p.conv && p.M == 1 && p.batch[1] > 1 && p.K == (p.im2col ? p.im2col->kernel[0] * p.im2col->kernel[1] : 1);
}

absl::StatusOr<TileKernel> LowerWindow(const WindowProblem& w, const TileCostFigures& f) {
  const std::vector<int64_t>& xs = w.args[w.x_arg].shape;
  const int64_t n = xs[0], c = xs[1], kk = w.im2col.kernel[0] * w.im2col.kernel[1];
  const int64_t p = w.im2col.out[0] * w.im2col.out[1];
  const int64_t cap = Capacity(f, Scope::kVector) > 0 ? Capacity(f, Scope::kVector) : int64_t{256} << 10;
  // Positions along the tile's rows, channels across; smaller tiles where
  // that leaves compute units idle or the window does not fit.
  int64_t bp = std::min<int64_t>(p, 128), bc = std::min<int64_t>(c, std::max<int64_t>(1, 256 / bp));
  auto blocks = [&] { return n * CeilDiv(c, bc) * CeilDiv(p, bp); };
  auto bytes = [&] { return (kk * bc * bp + (w.w_arg >= 0 ? kk * bc : 0) + 2 * bc * bp) * 4; };
  while (bc > 1 && (blocks() < f.compute_units || bytes() > cap)) bc = (bc + 1) / 2;
  while (bp > 1 && bytes() > cap) bp = (bp + 1) / 2;
  if (bytes() > cap) {
    return absl::ResourceExhaustedError(absl::StrCat("a window of ", kk, " elements does not fit the vector scope of ",
                                                     f.target.name));
  }
  TileKernel k;
  k.name = w.name;
  k.args = w.args;
  k.plan = absl::StrCat("window ", ReduceOpName(w.reduce), " over ", w.im2col.kernel[0], "x", w.im2col.kernel[1],
                        w.w_arg >= 0 ? " (depthwise weights)" : "", ", tiles ", bc, " channels x ", bp, " positions");
  std::vector<LoopVar> vars;
  if (n > 1) vars.push_back({"b0", n});
  vars.push_back({"c", CeilDiv(c, bc)});
  vars.push_back({"n", CeilDiv(p, bp)});
  auto grid = MakeLoop(Stmt::LoopKind::kGrid, std::move(vars));
  const Affine b0 = n > 1 ? Affine::Var("b0") : Affine::Const(0);
  const Affine cs = Affine::Var("c", bc), ps = Affine::Var("n", bp);
  grid->body.push_back(MakeBuffer("win", DType::kF32, {bc, kk, bp}, Scope::kVector));
  if (w.w_arg >= 0) grid->body.push_back(MakeBuffer("wt", DType::kF32, {bc, kk, 1}, Scope::kVector));
  grid->body.push_back(MakeBuffer("acc", DType::kF32, {bc, 1, bp}, Scope::kVector));
  std::vector<std::string> operand(w.epilogue.size());
  for (size_t i = 0; i < w.epilogue.size(); ++i) {
    const EpilogueStep& e = w.epilogue[i];
    if (e.arg < 0) continue;
    const std::vector<int64_t>& v = w.args[e.arg].shape;
    operand[i] = absl::StrCat("e", i);
    grid->body.push_back(MakeBuffer(operand[i], DType::kF32, {v[1] > 1 ? bc : 1, 1, v[3] > 1 ? bp : 1}, Scope::kVector));
  }
  auto copy = MakeCopy(Ref(w.args[w.x_arg].name, {b0, cs, Affine::Const(0), ps}), Whole("win", 3));
  copy->im2col = w.im2col;
  grid->body.push_back(std::move(copy));
  if (w.w_arg >= 0) {
    grid->body.push_back(MakeCopy(Ref(w.args[w.w_arg].name, {cs, Affine::Const(0), Affine::Const(0)}), Whole("wt", 3)));
    grid->body.push_back(MakeEw(EwOp::kMul, Whole("win", 3), {Of(Whole("win", 3)), Of(Whole("wt", 3))}));
  }
  grid->body.push_back(MakeReduce(w.reduce, Whole("acc", 3), Whole("win", 3), 1));
  if (w.scale != 1) grid->body.push_back(MakeEw(EwOp::kMul, Whole("acc", 3), {Of(Whole("acc", 3)), Scalar(w.scale)}));
  for (size_t i = 0; i < w.epilogue.size(); ++i) {
    const EpilogueStep& e = w.epilogue[i];
    std::vector<Operand> srcs = {Of(Whole("acc", 3))};
    if (!operand[i].empty()) {
      const std::vector<int64_t>& v = w.args[e.arg].shape;
      grid->body.push_back(MakeCopy(Ref(w.args[e.arg].name, {v[0] > 1 ? b0 : Affine::Const(0),
                                                             v[1] > 1 ? cs : Affine::Const(0), Affine::Const(0),
                                                             v[3] > 1 ? ps : Affine::Const(0)}),
                                    Whole(operand[i], 3)));
    }
    if (e.operand != EpilogueStep::Operand::kNone) {
      Operand other = operand[i].empty() ? Scalar(e.scalar) : Of(Whole(operand[i], 3));
      srcs.insert(e.operand_first ? srcs.begin() : srcs.end(), std::move(other));
    }
    grid->body.push_back(MakeEw(e.op, Whole("acc", 3), std::move(srcs)));
  }
  grid->body.push_back(MakeCopy(Whole("acc", 3), Ref(w.args[w.y_arg].name, {b0, cs, Affine::Const(0), ps})));
  k.body.push_back(std::move(grid));
  KILN_RETURN_IF_ERROR(Verify(k, f.target));
  return k;
}

WindowProblem DepthwiseWindow(const GemmProblem& g) {
  WindowProblem w;
  w.name = g.name;
  w.args = g.args;
  w.x_arg = g.b_arg;
  w.y_arg = g.y_arg;
  w.w_arg = g.a_arg;
  w.args[w.w_arg].shape = {g.batch[1], g.K, 1};
  if (g.im2col) {
    w.im2col = *g.im2col;
  } else {  // a pointwise window: X is declared [N, C, 1, H*W]
    w.im2col.out[1] = g.N;
    w.im2col.groups = g.batch[1];
  }
  w.reduce = ReduceOp::kSum;
  w.scale = g.alpha;
  w.epilogue = g.epilogue;
  w.values = g.values;
  return w;
}

absl::StatusOr<WindowProblem> PoolWindow(const Node& node) {
  if (!node.domain().empty() || (node.op() != "MaxPool" && node.op() != "AveragePool")) {
    return absl::UnimplementedError(absl::StrCat(node.QualifiedOp(), " is no pooling"));
  }
  KILN_ASSIGN_OR_RETURN(Window2d win, WindowOf(node));
  const bool max = node.op() == "MaxPool";
  if (max && node.num_outputs() > 1 && node.output(1) && node.output(1)->has_uses()) {
    return absl::UnimplementedError("MaxPool's Indices output is used");
  }
  const bool padded = win.pad_begin[0] || win.pad_begin[1] || win.pad_end[0] || win.pad_end[1];
  if (!max) {
    // The divisor is the window's size only where every window lies in
    // the input, or the padding counts.
    const bool counts = node.GetInt("count_include_pad", 0) != 0;
    if ((padded && !counts) || node.GetInt("ceil_mode", 0) != 0) {
      return absl::UnimplementedError("AveragePool whose windows count fewer elements at the edges");
    }
  }
  const DType dt = node.input(0)->type().dtype();
  if (dt != DType::kF32 && dt != DType::kF16 && dt != DType::kBF16) {
    return absl::UnimplementedError(absl::StrCat("pooling of ", DTypeName(dt)));
  }
  WindowProblem w;
  w.name = KernelName(node);
  KILN_ASSIGN_OR_RETURN(KernelArgs args, KernelArgs::Of(node));
  KILN_ASSIGN_OR_RETURN(w.x_arg, args.ArgOf(node.input(0)));
  KILN_ASSIGN_OR_RETURN(w.y_arg, args.ArgOf(node.output(0)));
  KILN_RETURN_IF_ERROR(args.View(w.x_arg, {win.n, win.c, win.h, win.w}));
  KILN_RETURN_IF_ERROR(args.View(w.y_arg, {win.n, win.c, 1, win.oh * win.ow}));
  for (int i = 0; i < 2; ++i) {
    w.im2col.kernel[i] = win.kernel[i];
    w.im2col.stride[i] = win.stride[i];
    w.im2col.pad[i] = win.pad_begin[i];
    w.im2col.dilation[i] = win.dilation[i];
  }
  w.im2col.out[0] = win.oh;
  w.im2col.out[1] = win.ow;
  w.im2col.groups = win.c;
  w.im2col.fill = max ? -INFINITY : 0;
  w.reduce = max ? ReduceOp::kMax : ReduceOp::kSum;
  if (!max) w.scale = 1.0 / static_cast<double>(win.kernel[0] * win.kernel[1]);
  w.args = std::move(args.args);
  w.values = std::move(args.values);
  return w;
}

}  // namespace internal
}  // namespace kiln::target::tile
