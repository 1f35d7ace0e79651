//===- selection.cc - TopK, NonMaxSuppression, NonZero, Unique ------------===//
//
// The operators that pick elements, or their indices, out of a tensor:
// TopK, NonMaxSuppression, NonZero and Unique.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "graph/ir/dtype_dispatch.h"
#include "graph/ops/kernel_util.h"
#include "graph/ops/op_registry.h"
#include "graph/ops/op_table.h"
#include "graph/ops/operand_checks.h"
#include "graph/support/status.h"

namespace kiln {
namespace {

//===--- TopK -------------------------------------------------------------===//

absl::Status InferTopK(InferContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (!x.is_tensor()) return absl::OkStatus();
  if (x.dtype() == DType::kString || x.dtype() == DType::kBool)
    return ctx.Error("expects a numeric input, got ", DTypeName(x.dtype()));
  if (ctx.num_inputs() < 2 || !ctx.has_input(1)) return ctx.Error("input K is missing");
  const Type& kt = ctx.input_type(1);
  if (DTypeIsNot(kt, {DType::kI64})) return ctx.Error("K must be i64, got ", DTypeName(kt.dtype()));
  if (!x.shape().ranked()) {
    ctx.set_output(0, Type::Tensor(x.dtype(), Shape()));
    ctx.set_output(1, Type::Tensor(DType::kI64, Shape()));
    return absl::OkStatus();
  }
  int rank = x.shape().rank();
  auto axis = NormalizeAxis(ctx.node().GetInt("axis", -1), rank);
  if (!axis.ok() || rank == 0) return ctx.Error("axis ", ctx.node().GetInt("axis", -1), " is out of range for rank ", rank);
  DimVector dims = x.shape().dims();
  Dim k;
  if (const Tensor* kv = ctx.const_input(1)) {
    if (kv->numel() != 1) return ctx.Error("K must have one element");
    int64_t kk = kv->GetInt(0);
    if (kk < 0) return ctx.Error("K is negative (", kk, ")");
    const Dim& n = dims[*axis];
    if (n.is_static() && kk > n.value())
      return ctx.Error("K = ", kk, " exceeds the extent ", n.value(), " of axis ", *axis);
    k = Dim(kk);
  }
  dims[*axis] = k;
  ctx.set_output(0, Type::Tensor(x.dtype(), Shape(dims)));
  ctx.set_output(1, Type::Tensor(DType::kI64, Shape(dims)));
  return absl::OkStatus();
}

absl::Status TopK(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() == DType::kString || x.dtype() == DType::kBool)
    return ctx.Error("expects a numeric input, got ", DTypeName(x.dtype()));
  if (!ctx.has_input(1)) return ctx.Error("input K is missing");
  KILN_ASSIGN_OR_RETURN(int64_t k, ScalarInt(ctx, ctx.input(1), "K"));
  int rank = x.rank();
  auto axis_or = NormalizeAxis(ctx.node().GetInt("axis", -1), rank);
  if (!axis_or.ok() || rank == 0) return ctx.Error("axis ", ctx.node().GetInt("axis", -1), " is out of range for rank ", rank);
  int axis = *axis_or;
  int64_t n = x.dim(axis);
  if (k < 0 || k > n) return ctx.Error("K = ", k, " is out of range for axis ", axis, " of extent ", n);
  bool largest = ctx.node().GetInt("largest", 1) != 0;
  Dims out_dims = x.dims();
  out_dims[axis] = k;
  Tensor& values = ctx.AllocOutput(0, x.dtype(), out_dims);
  Tensor& indices = ctx.AllocOutput(1, DType::kI64, out_dims);
  if (values.numel() == 0) return absl::OkStatus();
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= x.dim(i);
  for (int i = axis + 1; i < rank; ++i) inner *= x.dim(i);
  DispatchNumeric(x.dtype(), [&]<typename T>() {
    using C = std::conditional_t<kIsHalfLike<T>, float, T>;
    const T* src = x.data<T>();
    T* vo = values.data<T>();
    int64_t* io = indices.data<int64_t>();
    std::vector<C> vals(n);
    std::vector<int64_t> order(n);
    // Ties (and NaNs, which rank above every number) go to the lower index.
    auto before = [&](int64_t a, int64_t b) {
      C va = vals[a], vb = vals[b];
      if constexpr (std::is_floating_point_v<C>) {
        bool na = std::isnan(va), nb = std::isnan(vb);
        if (na || nb) {
          if (na && nb) return a < b;
          return largest ? na : nb;
        }
      }
      if (va != vb) return largest ? va > vb : va < vb;
      return a < b;
    };
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const T* s = src + o * n * inner + i;
        for (int64_t j = 0; j < n; ++j) vals[j] = static_cast<C>(s[j * inner]);
        std::iota(order.begin(), order.end(), 0);
        std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
        T* vd = vo + o * k * inner + i;
        int64_t* id = io + o * k * inner + i;
        for (int64_t j = 0; j < k; ++j) {
          vd[j * inner] = s[order[j] * inner];
          id[j * inner] = order[j];
        }
      }
    }
  });
  return absl::OkStatus();
}

// TopK-1 had k as an attribute.
absl::Status UpgradeTopK(Graph& g, Node* node, int64_t opset) {
  if (opset >= 10) return absl::OkStatus();
  if (!node->has_attr("k")) return InvalidArgument(Label(*node), ": attribute 'k' is missing");
  int64_t k = node->GetInt("k", 0);
  node->SetInput(1, g.AddConstant(g.UniqueName("k"), Tensor::FromVector<int64_t>({k}, {1})));
  node->RemoveAttr("k");
  return absl::OkStatus();
}

OpCost TopKCost(const Node& n) {
  OpCost c;
  Value* x = n.input(0);
  int64_t in = x && x->type().is_tensor() ? x->type().shape().NumElements() : -1;
  if (in > 0) {
    c.bytes_read = static_cast<double>(in) * DTypeSize(x->type().dtype());
    int64_t axis_len = 1;
    const Shape& s = x->type().shape();
    auto axis = NormalizeAxis(n.GetInt("axis", -1), s.rank());
    if (axis.ok() && s.rank() > 0) axis_len = std::max<int64_t>(s[*axis].value(), 1);
    c.flops = static_cast<double>(in) * std::max(1.0, std::log2(static_cast<double>(axis_len)));
  }
  for (int i = 0; i < n.num_outputs(); ++i) {
    int64_t m = n.output(i)->type().is_tensor() ? n.output(i)->type().shape().NumElements() : -1;
    if (m > 0) c.bytes_written += static_cast<double>(m) * DTypeSize(n.output(i)->type().dtype());
  }
  return c;
}

//===--- NonMaxSuppression ------------------------------------------------===//

absl::Status InferNonMaxSuppression(InferContext& ctx) {
  const Type& boxes = ctx.input_type(0);
  const Type& scores = ctx.input_type(1);
  if (boxes.is_tensor() && boxes.shape().ranked()) {
    const Shape& s = boxes.shape();
    if (s.rank() != 3) return ctx.Error("boxes has rank ", s.rank(), ", expected 3 [batch, boxes, 4]");
    if (s[2].is_static() && s[2].value() != 4) return ctx.Error("boxes must have 4 coordinates in its last dim");
  }
  if (scores.is_tensor() && scores.shape().ranked() && scores.shape().rank() != 3)
    return ctx.Error("scores has rank ", scores.shape().rank(), ", expected 3 [batch, classes, boxes]");
  if (DTypeIsNot(boxes, {DType::kF32, DType::kF16, DType::kF64, DType::kBF16}))
    return ctx.Error("boxes must be float, got ", DTypeName(boxes.dtype()));
  ctx.set_output(0, Type::Tensor(DType::kI64, Shape({Dim(), Dim(3)})));
  return absl::OkStatus();
}

// The boxes one class has kept so far, bucketed by the square grid cells
// they cover, so that a candidate is tested only against kept boxes it may
// intersect. Suppression needs an IoU above a threshold of at least zero,
// hence an intersection of positive area, hence a point inside both boxes,
// hence a cell both cover: the result is the same as testing every kept box.
// A box the grid cannot place (a corner not finite, or more than kMaxCells
// cells) is tested against every candidate, and a candidate it cannot place
// against every kept box. Detectors that offset each class's boxes apart
// (torchvision's batched NMS) keep thousands of boxes none of which meet.
class KeptBoxes {
 public:
  using Box = std::array<double, 4>;  // (ymin, xmin, ymax, xmax)

  explicit KeptBoxes(double cell) : cell_(cell) {}

  // Whether `suppresses(kept index)` holds for a kept box that may meet `b`.
  template <typename F>
  bool AnySuppresses(const Box& b, const F& suppresses) const {
    for (int64_t k : unplaced_)
      if (suppresses(k)) return true;
    int64_t y0, x0, y1, x1;
    if (!Cells(b, &y0, &x0, &y1, &x1)) {
      for (int64_t k : all_)
        if (suppresses(k)) return true;
      return false;
    }
    for (int64_t y = y0; y <= y1; ++y)
      for (int64_t x = x0; x <= x1; ++x) {
        auto it = cells_.find(Key(y, x));
        if (it == cells_.end()) continue;
        for (int64_t k : it->second)
          if (suppresses(k)) return true;
      }
    return false;
  }

  void Add(int64_t index, const Box& b) {
    all_.push_back(index);
    int64_t y0, x0, y1, x1;
    if (!Cells(b, &y0, &x0, &y1, &x1)) {
      unplaced_.push_back(index);
      return;
    }
    for (int64_t y = y0; y <= y1; ++y)
      for (int64_t x = x0; x <= x1; ++x) cells_[Key(y, x)].push_back(index);
  }

 private:
  static constexpr int64_t kMaxCells = 64;
  static constexpr double kMaxCell = double(1 << 30);

  bool Cells(const Box& b, int64_t* y0, int64_t* x0, int64_t* y1, int64_t* x1) const {
    double c[4];
    for (int i = 0; i < 4; ++i) {
      c[i] = std::floor(b[i] / cell_);
      if (!std::isfinite(c[i]) || std::abs(c[i]) >= kMaxCell) return false;
    }
    *y0 = static_cast<int64_t>(c[0]), *x0 = static_cast<int64_t>(c[1]);
    *y1 = static_cast<int64_t>(c[2]), *x1 = static_cast<int64_t>(c[3]);
    return *y1 >= *y0 && *x1 >= *x0 && (*y1 - *y0 + 1) * (*x1 - *x0 + 1) <= kMaxCells;
  }
  static int64_t Key(int64_t y, int64_t x) { return static_cast<int64_t>(static_cast<uint64_t>(y) << 32) ^ (x & 0xffffffff); }

  double cell_;
  std::vector<int64_t> all_, unplaced_;
  std::unordered_map<int64_t, std::vector<int64_t>> cells_;
};

// A cell as large as the candidates' mean extent: a typical box covers a
// few cells and a cell holds a few boxes. 1 when no candidate has a finite
// positive extent (the grid then places nothing that matters).
double KeptBoxCell(const std::vector<std::array<double, 4>>& corners, int64_t first,
                   const std::vector<int64_t>& cand) {
  double sum = 0;
  int64_t n = 0;
  for (int64_t i : cand) {
    const auto& c = corners[first + i];
    const double extent = std::max(c[2] - c[0], c[3] - c[1]);
    if (std::isfinite(extent) && extent > 0) sum += extent, ++n;
  }
  const double cell = n > 0 ? sum / static_cast<double>(n) : 1.0;
  return std::isfinite(cell) && cell > 0 ? cell : 1.0;
}

absl::Status NonMaxSuppression(KernelContext& ctx) {
  const Tensor& boxes_t = ctx.input(0);
  const Tensor& scores_t = ctx.input(1);
  if (!IsFloat(boxes_t.dtype()) || !IsFloat(scores_t.dtype())) return ctx.Error("boxes and scores must be float");
  if (boxes_t.rank() != 3 || boxes_t.dim(2) != 4)
    return ctx.Error("boxes must be [batch, boxes, 4], got ", DimsText(boxes_t.dims()));
  if (scores_t.rank() != 3) return ctx.Error("scores must be [batch, classes, boxes], got ", DimsText(scores_t.dims()));
  int64_t batches = boxes_t.dim(0), nboxes = boxes_t.dim(1), classes = scores_t.dim(1);
  if (scores_t.dim(0) != batches || scores_t.dim(2) != nboxes)
    return ctx.Error("scores ", DimsText(scores_t.dims()), " do not match boxes ", DimsText(boxes_t.dims()));
  int64_t max_out = 0;
  if (ctx.has_input(2) && ctx.input(2).numel() > 0) {
    KILN_ASSIGN_OR_RETURN(max_out, ScalarInt(ctx, ctx.input(2), "max_output_boxes_per_class"));
  }
  double iou_threshold = 0;
  if (ctx.has_input(3) && ctx.input(3).numel() > 0) {
    KILN_ASSIGN_OR_RETURN(iou_threshold, ScalarFloat(ctx, ctx.input(3), "iou_threshold"));
  }
  bool has_score_threshold = ctx.has_input(4) && ctx.input(4).numel() > 0;
  double score_threshold = 0;
  if (has_score_threshold) {
    KILN_ASSIGN_OR_RETURN(score_threshold, ScalarFloat(ctx, ctx.input(4), "score_threshold"));
  }
  if (iou_threshold < 0 || iou_threshold > 1) return ctx.Error("iou_threshold must be in [0, 1], got ", iou_threshold);
  bool center = ctx.node().GetInt("center_point_box", 0) != 0;

  std::vector<double> bx = ToDoubleVector(boxes_t);
  std::vector<double> sc = ToDoubleVector(scores_t);
  // Corners as (ymin, xmin, ymax, xmax).
  std::vector<std::array<double, 4>> corners(batches * nboxes);
  for (int64_t i = 0; i < batches * nboxes; ++i) {
    const double* b = &bx[i * 4];
    if (center) {
      corners[i] = {b[1] - b[3] / 2, b[0] - b[2] / 2, b[1] + b[3] / 2, b[0] + b[2] / 2};
    } else {
      corners[i] = {std::min(b[0], b[2]), std::min(b[1], b[3]), std::max(b[0], b[2]), std::max(b[1], b[3])};
    }
  }
  auto suppresses = [&](const std::array<double, 4>& a, const std::array<double, 4>& b) {
    double ymin = std::max(a[0], b[0]), xmin = std::max(a[1], b[1]);
    double ymax = std::min(a[2], b[2]), xmax = std::min(a[3], b[3]);
    double inter = std::max(0.0, ymax - ymin) * std::max(0.0, xmax - xmin);
    if (inter <= 0) return false;
    double area_a = (a[2] - a[0]) * (a[3] - a[1]);
    double area_b = (b[2] - b[0]) * (b[3] - b[1]);
    double uni = area_a + area_b - inter;
    if (area_a <= 0 || area_b <= 0 || uni <= 0) return false;
    return inter / uni > iou_threshold;
  };
  std::vector<int64_t> selected;  // triples
  std::vector<int64_t> cand;
  for (int64_t b = 0; b < batches && max_out > 0; ++b) {
    for (int64_t c = 0; c < classes; ++c) {
      const double* s = &sc[(b * classes + c) * nboxes];
      cand.clear();
      for (int64_t i = 0; i < nboxes; ++i)
        if (!has_score_threshold || s[i] > score_threshold) cand.push_back(i);
      std::stable_sort(cand.begin(), cand.end(), [&](int64_t i, int64_t j) { return s[i] > s[j]; });
      KeptBoxes kept(KeptBoxCell(corners, b * nboxes, cand));
      int64_t picked = 0;
      for (int64_t i : cand) {
        if (picked >= max_out) break;
        const std::array<double, 4>& box = corners[b * nboxes + i];
        if (kept.AnySuppresses(box, [&](int64_t p) { return suppresses(corners[b * nboxes + p], box); })) continue;
        kept.Add(i, box);
        ++picked;
        selected.insert(selected.end(), {b, c, i});
      }
    }
  }
  Tensor& out = ctx.AllocOutput(0, DType::kI64, {static_cast<int64_t>(selected.size() / 3), 3});
  std::copy(selected.begin(), selected.end(), out.data<int64_t>());
  return absl::OkStatus();
}

OpCost NmsCost(const Node& n) {
  OpCost c;
  Value* s = n.input(1);
  int64_t m = s && s->type().is_tensor() ? s->type().shape().NumElements() : -1;
  int64_t boxes = -1;
  if (s && s->type().is_tensor() && s->type().shape().ranked() && s->type().shape().rank() == 3 &&
      s->type().shape()[2].is_static())
    boxes = s->type().shape()[2].value();
  if (m > 0) {
    c.bytes_read = static_cast<double>(m) * 4 * 5;
    c.flops = static_cast<double>(m) * std::max<int64_t>(boxes, 1) * 10;
  }
  return c;
}

//===--- NonZero ----------------------------------------------------------===//

absl::Status InferNonZero(InferContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (!x.is_tensor()) return absl::OkStatus();
  if (x.dtype() == DType::kString) return ctx.Error("expects a numeric input, got str");
  Dim rank = x.shape().ranked() ? Dim(std::max(x.shape().rank(), 1)) : Dim();
  ctx.set_output(0, Type::Tensor(DType::kI64, Shape({rank, Dim()})));
  return absl::OkStatus();
}

absl::Status NonZero(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() == DType::kString) return ctx.Error("expects a numeric input, got str");
  // A scalar counts as a one-element vector.
  Dims dims = x.rank() == 0 ? Dims{1} : x.dims();
  int rank = static_cast<int>(dims.size());
  std::vector<int64_t> hits;
  DispatchNumeric(x.dtype(), [&]<typename T>() {
    const T* p = x.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i)
      if (static_cast<float>(p[i]) != 0 || (!kIsHalfLike<T> && p[i] != T(0))) hits.push_back(i);
  });
  int64_t nnz = static_cast<int64_t>(hits.size());
  Tensor& y = ctx.AllocOutput(0, DType::kI64, {rank, nnz});
  int64_t* out = y.data<int64_t>();
  Dims strides = StridesOf(dims);
  for (int64_t j = 0; j < nnz; ++j) {
    int64_t rem = hits[j];
    for (int d = 0; d < rank; ++d) {
      out[d * nnz + j] = rem / strides[d];
      rem %= strides[d];
    }
  }
  return absl::OkStatus();
}

//===--- Unique -----------------------------------------------------------===//

absl::Status InferUnique(InferContext& ctx) {
  const Type& x = ctx.input_type(0);
  if (!x.is_tensor()) return absl::OkStatus();
  const Node& n = ctx.node();
  if (n.has_attr("axis")) {
    if (!x.shape().ranked()) {
      ctx.set_output(0, Type::Tensor(x.dtype(), Shape()));
      for (int i = 1; i < ctx.num_outputs(); ++i) ctx.set_output(i, Type::Tensor(DType::kI64, Shape({Dim()})));
      return absl::OkStatus();
    }
    auto axis = NormalizeAxis(n.GetInt("axis", 0), x.shape().rank());
    if (!axis.ok() || x.shape().rank() == 0)
      return ctx.Error("axis ", n.GetInt("axis", 0), " is out of range for rank ", x.shape().rank());
    DimVector dims = x.shape().dims();
    Dim along = dims[*axis];
    dims[*axis] = Dim();
    ctx.set_output(0, Type::Tensor(x.dtype(), Shape(dims)));
    if (ctx.num_outputs() > 1) ctx.set_output(1, Type::Tensor(DType::kI64, Shape({Dim()})));
    if (ctx.num_outputs() > 2) ctx.set_output(2, Type::Tensor(DType::kI64, Shape({along})));
    if (ctx.num_outputs() > 3) ctx.set_output(3, Type::Tensor(DType::kI64, Shape({Dim()})));
    return absl::OkStatus();
  }
  ctx.set_output(0, Type::Tensor(x.dtype(), Shape({Dim()})));
  Dim total = x.shape().NumElements() >= 0 ? Dim(x.shape().NumElements()) : Dim();
  if (ctx.num_outputs() > 1) ctx.set_output(1, Type::Tensor(DType::kI64, Shape({Dim()})));
  if (ctx.num_outputs() > 2) ctx.set_output(2, Type::Tensor(DType::kI64, Shape({total})));
  if (ctx.num_outputs() > 3) ctx.set_output(3, Type::Tensor(DType::kI64, Shape({Dim()})));
  return absl::OkStatus();
}

// Three-way comparison of two elements; NaNs are equal to each other and
// greater than every number (numpy's order).
template <typename T>
inline int CompareElems(const T& a, const T& b) {
  if constexpr (kIsHalfLike<T>) {
    return CompareElems<float>(static_cast<float>(a), static_cast<float>(b));
  } else {
    if constexpr (std::is_floating_point_v<T>) {
      bool na = std::isnan(a), nb = std::isnan(b);
      if (na || nb) return na == nb ? 0 : (na ? 1 : -1);
    }
    if (a < b) return -1;
    if (b < a) return 1;
    return 0;
  }
}

absl::Status Unique(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Node& n = ctx.node();
  int64_t sorted = n.GetInt("sorted", 1);
  int64_t outer = 1, len = x.numel(), inner = 1;
  int axis = -1;
  if (n.has_attr("axis")) {
    auto a = NormalizeAxis(n.GetInt("axis", 0), x.rank());
    if (!a.ok() || x.rank() == 0) return ctx.Error("axis ", n.GetInt("axis", 0), " is out of range for rank ", x.rank());
    axis = *a;
    outer = 1;
    inner = 1;
    for (int i = 0; i < axis; ++i) outer *= x.dim(i);
    len = x.dim(axis);
    for (int i = axis + 1; i < x.rank(); ++i) inner *= x.dim(i);
  }
  std::vector<int64_t> order(len);
  std::iota(order.begin(), order.end(), 0);
  // Groups of equal slices: for each slice its group, in group order.
  std::vector<int64_t> group_first;  // first occurrence of each group
  std::vector<int64_t> group_count;
  std::vector<int64_t> inverse(len);
  auto run = [&]<typename T>() {
    const T* p = x.data<T>();
    auto cmp = [&](int64_t a, int64_t b) -> int {
      for (int64_t o = 0; o < outer; ++o) {
        const T* sa = p + (o * len + a) * inner;
        const T* sb = p + (o * len + b) * inner;
        for (int64_t i = 0; i < inner; ++i) {
          int c = CompareElems<T>(sa[i], sb[i]);
          if (c) return c;
        }
      }
      return 0;
    };
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return cmp(a, b) < 0; });
    for (size_t i = 0; i < order.size(); ++i) {
      if (i == 0 || cmp(order[i - 1], order[i]) != 0) {
        group_first.push_back(order[i]);  // stable sort: the lowest index leads
        group_count.push_back(0);
      }
      inverse[order[i]] = static_cast<int64_t>(group_first.size()) - 1;
      ++group_count.back();
    }
  };
  if (x.dtype() == DType::kString) run.template operator()<std::string>();
  else DispatchNumeric(x.dtype(), run);

  int64_t u = static_cast<int64_t>(group_first.size());
  // Group order: sorted (as found) or by first occurrence.
  std::vector<int64_t> rank_of(u);
  std::iota(rank_of.begin(), rank_of.end(), 0);
  if (!sorted) {
    std::vector<int64_t> by_first(u);
    std::iota(by_first.begin(), by_first.end(), 0);
    std::sort(by_first.begin(), by_first.end(), [&](int64_t a, int64_t b) { return group_first[a] < group_first[b]; });
    for (int64_t i = 0; i < u; ++i) rank_of[by_first[i]] = i;
  }
  std::vector<int64_t> first(u), count(u);
  for (int64_t gi = 0; gi < u; ++gi) {
    first[rank_of[gi]] = group_first[gi];
    count[rank_of[gi]] = group_count[gi];
  }
  Dims ydims = axis < 0 ? Dims{u} : x.dims();
  if (axis >= 0) ydims[axis] = u;
  Tensor& y = ctx.AllocOutput(0, x.dtype(), ydims);
  DispatchBySize(x.dtype(), [&]<typename T>() {
    const T* p = x.data<T>();
    T* q = y.data<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < u; ++j)
        for (int64_t i = 0; i < inner; ++i) q[(o * u + j) * inner + i] = p[(o * len + first[j]) * inner + i];
  });
  if (ctx.num_outputs() > 1)
    std::copy(first.begin(), first.end(), ctx.AllocOutput(1, DType::kI64, {u}).data<int64_t>());
  if (ctx.num_outputs() > 2) {
    int64_t* inv = ctx.AllocOutput(2, DType::kI64, {len}).data<int64_t>();
    for (int64_t i = 0; i < len; ++i) inv[i] = rank_of[inverse[i]];
  }
  if (ctx.num_outputs() > 3)
    std::copy(count.begin(), count.end(), ctx.AllocOutput(3, DType::kI64, {u}).data<int64_t>());
  return absl::OkStatus();
}

}  // namespace

void RegisterSelectionOps(OpRegistry& r) {
  r.Register("TopK").Inputs(1, 2).Outputs(2).Class(OpClass::kOther)
      .Attr("axis", AttrKind::kInt, "-1")
      .Attr("largest", AttrKind::kInt, "1")
      .Attr("sorted", AttrKind::kInt, "1")
      .Attr("k", AttrKind::kInt, "(opset 1-9 only; upgraded)")
      .Infer(InferTopK).Kernel(TopK).Cost(TopKCost).Upgrade(UpgradeTopK);
  r.Register("NonMaxSuppression").Inputs(2, 5).Outputs(1).Class(OpClass::kOther).Since(10)
      .Attr("center_point_box", AttrKind::kInt, "0")
      .Infer(InferNonMaxSuppression).Kernel(NonMaxSuppression).Cost(NmsCost);
  r.Register("NonZero").Inputs(1).Outputs(1).Class(OpClass::kOther).Since(9)
      .Infer(InferNonZero).Kernel(NonZero);
  r.Register("Unique").Inputs(1).Outputs(1, 4).Class(OpClass::kOther).Since(11)
      .Attr("axis", AttrKind::kInt, "(none: flatten)")
      .Attr("sorted", AttrKind::kInt, "1")
      .Infer(InferUnique).Kernel(Unique);
}

}  // namespace kiln
