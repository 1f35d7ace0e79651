//===- copy_pieces.cc - Data movement as boxes of strided copies ----------===//
#include "target/backend/copy_pieces.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "graph/passes/rewrite_helpers.h"
#include "graph/support/status.h"

namespace kiln::target {
namespace {

// Constant gather indices beyond which Gather has no copy form (targets put
// the table in their code).
constexpr int64_t kMaxTable = 1 << 16;

std::vector<int64_t> DimsOf(const Value* v) {
  std::vector<int64_t> d;
  for (const Dim& x : v->type().shape().dims()) d.push_back(x.value());
  return d;
}

std::vector<int64_t> DenseStrides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

int64_t Numel(const std::vector<int64_t>& dims) {
  return std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<>());
}

absl::StatusOr<std::vector<int64_t>> ConstInts(const Node& n, int input) {
  const Value* v = n.input(input);
  const Tensor* t = ConstantData(v);
  if (!t) return absl::FailedPreconditionError(absl::StrCat("input ", input, " of ", n.op(), " is not a constant"));
  std::vector<int64_t> r;
  for (int64_t i = 0; i < t->numel(); ++i) r.push_back(t->GetInt(i));
  return r;
}

int64_t NormAxis(int64_t a, int64_t rank) { return a < 0 ? a + rank : a; }

bool StaticTensor(const Value* v) {
  return v && v->type().is_tensor() && v->type().shape().ranked() && v->type().shape().is_static();
}

}  // namespace

int64_t CopyPiece::elements() const { return Numel(dims); }

bool HasCopyPieces(const Node& n) {
  static const char* const kOps[] = {"Identity", "Dropout", "Reshape", "Flatten", "Squeeze", "Unsqueeze",
                                     "Transpose", "Expand", "Tile", "Concat", "Split", "Slice", "Gather"};
  if (!n.domain().empty()) return false;
  return std::any_of(std::begin(kOps), std::end(kOps), [&](const char* s) { return n.op() == s; });
}

std::optional<CopyPiece> ComposePieces(const CopyPiece& reader, const CopyPiece& writer) {
  auto plain = [](const CopyPiece& p) { return p.table_dim < 0 && p.index_input < 0; };
  if (!plain(reader) || !plain(writer) || writer.dst_base != 0) return std::nullopt;
  const std::vector<int64_t>& box = writer.dims;
  const std::vector<int64_t> row = DenseStrides(box);
  if (writer.dst_strides != row) return std::nullopt;
  // The reader's first element, as coordinates of the writer's box.
  if (reader.src_base < 0 || reader.src_base >= std::max<int64_t>(Numel(box), 1)) return std::nullopt;
  std::vector<int64_t> lo(box.size()), hi(box.size());
  int64_t rest = reader.src_base;
  for (size_t k = 0; k < box.size(); ++k) {
    lo[k] = hi[k] = rest / row[k];
    rest %= row[k];
  }
  CopyPiece out = reader;
  out.src = writer.src;
  out.src_base = writer.src_base;
  for (size_t k = 0; k < box.size(); ++k) out.src_base += lo[k] * writer.src_strides[k];
  // Each reader stride steps f along the outermost writer dimension k whose
  // row stride divides it; the coordinates it reaches must stay in box[k].
  for (size_t e = 0; e < reader.dims.size(); ++e) {
    const int64_t t = reader.src_strides[e];
    if (t == 0 || reader.dims[e] == 1) {
      out.src_strides[e] = 0;
      continue;
    }
    size_t k = 0;
    while (k < box.size() && !(row[k] <= std::abs(t) && std::abs(t) % row[k] == 0)) ++k;
    if (k == box.size()) return std::nullopt;
    const int64_t f = t / row[k];
    const int64_t reach = (reader.dims[e] - 1) * f;
    (reach < 0 ? lo[k] : hi[k]) += reach;
    out.src_strides[e] = f * writer.src_strides[k];
  }
  for (size_t k = 0; k < box.size(); ++k)
    if (lo[k] < 0 || hi[k] >= box[k]) return std::nullopt;
  return out;
}

bool IsScatterCopy(const Node& n) { return n.domain().empty() && n.op() == "ScatterElements"; }

absl::StatusOr<std::vector<CopyPiece>> ScatterPiecesOf(const Node& n) {
  if (!IsScatterCopy(n) || n.num_inputs() != 3 || n.num_outputs() != 1 || !n.input(0) || !n.input(1) || !n.input(2))
    return absl::UnimplementedError(absl::StrCat("no scatter copy for ", n.QualifiedOp()));
  for (const Value* v : {n.input(0), n.input(1), n.input(2), n.output(0)})
    if (!StaticTensor(v)) return absl::FailedPreconditionError("a shape is not static");
  if (n.GetString("reduction", "none") != "none")
    return absl::FailedPreconditionError("ScatterElements with a reduction");
  const Value* idx = n.input(1);
  if (idx->type().dtype() != DType::kI64 && idx->type().dtype() != DType::kI32)
    return absl::FailedPreconditionError("ScatterElements indices must be i32 or i64");
  const std::vector<int64_t> dims = DimsOf(n.input(0)), upd = DimsOf(n.input(2));
  const int64_t rank = static_cast<int64_t>(dims.size());
  if (DimsOf(idx) != upd || static_cast<int64_t>(upd.size()) != rank)
    return absl::FailedPreconditionError("ScatterElements indices and updates of one shape and the data's rank");
  const int64_t axis = NormAxis(n.GetInt("axis", 0), rank);
  if (axis < 0 || axis >= rank) return absl::FailedPreconditionError("ScatterElements axis out of range");
  for (int64_t i = 0; i < rank; ++i)
    if (i != axis && upd[i] > dims[i]) return absl::FailedPreconditionError("updates larger than the data");
  CopyPiece all;
  all.src = 0;
  all.dims = dims;
  all.src_strides = all.dst_strides = DenseStrides(dims);
  CopyPiece at;
  at.src = 2;
  at.dims = upd;
  at.src_strides = DenseStrides(upd);
  at.dst_strides = DenseStrides(dims);
  at.index_scale = at.dst_strides[axis];
  at.dst_strides[axis] = 0;
  at.index_input = 1;
  at.index_bytes = static_cast<int64_t>(DTypeSize(idx->type().dtype()));
  at.index_extent = dims[axis];
  at.scatter = true;
  return std::vector<CopyPiece>{all, at};
}

void SimplifyPiece(CopyPiece& p) {
  CopyPiece q = p;
  q.dims.clear();
  q.src_strides.clear();
  q.dst_strides.clear();
  q.table_dim = -1;
  for (size_t i = 0; i < p.dims.size(); ++i) {
    const bool table = static_cast<int>(i) == p.table_dim;
    if (p.dims[i] == 1 && !(table && p.index_input >= 0)) {
      if (table) q.src_base += p.table[0];
      continue;
    }
    if (table) q.table_dim = static_cast<int>(q.dims.size());
    q.dims.push_back(p.dims[i]);
    q.src_strides.push_back(p.src_strides[i]);
    q.dst_strides.push_back(p.dst_strides[i]);
  }
  if (q.table_dim < 0) q.table.clear();
  // Merge dimension i+1 into i where both sides are contiguous across them
  // (never a table dimension).
  for (int i = static_cast<int>(q.dims.size()) - 2; i >= 0; --i) {
    if (i == q.table_dim || i + 1 == q.table_dim) continue;
    if (q.src_strides[i] == q.src_strides[i + 1] * q.dims[i + 1] &&
        q.dst_strides[i] == q.dst_strides[i + 1] * q.dims[i + 1]) {
      q.src_strides[i] = q.src_strides[i + 1];
      q.dst_strides[i] = q.dst_strides[i + 1];
      q.dims[i] *= q.dims[i + 1];
      q.dims.erase(q.dims.begin() + i + 1);
      q.src_strides.erase(q.src_strides.begin() + i + 1);
      q.dst_strides.erase(q.dst_strides.begin() + i + 1);
      if (q.table_dim > i) --q.table_dim;
    }
  }
  p = std::move(q);
}

absl::StatusOr<std::vector<CopyPiece>> CopyPiecesOf(const Node& n) {
  if (!HasCopyPieces(n)) return absl::UnimplementedError(absl::StrCat("no copy kernel for ", n.QualifiedOp()));
  for (const Value* v : n.inputs())
    if (v && !StaticTensor(v)) return absl::FailedPreconditionError("an input's shape is not static");
  for (const Value* v : n.outputs())
    if (!StaticTensor(v)) return absl::FailedPreconditionError("an output's shape is not static");
  const std::string& op = n.op();
  std::vector<CopyPiece> pieces;
  const Value* x = n.input(0);
  if (!x) return absl::FailedPreconditionError("the data input is missing");
  const std::vector<int64_t> in_dims = DimsOf(x);
  const std::vector<int64_t> in_strides = DenseStrides(in_dims);
  const int64_t rank = static_cast<int64_t>(in_dims.size());
  auto whole = [&](int out) {
    CopyPiece p;
    p.src = 0;
    p.dst = out;
    p.dims = DimsOf(n.output(out));
    p.dst_strides = DenseStrides(p.dims);
    return p;
  };
  if (op == "Identity" || op == "Dropout" || op == "Reshape" || op == "Flatten" || op == "Squeeze" ||
      op == "Unsqueeze") {
    if (op == "Dropout" && IsNondeterministicOp(n))
      return absl::FailedPreconditionError("Dropout in training mode draws random numbers");
    if (op == "Dropout" && n.num_outputs() > 1 && n.output(1)->has_uses())
      return absl::FailedPreconditionError("Dropout's mask output is used");
    if (x->type().dtype() != n.output(0)->type().dtype())
      return absl::FailedPreconditionError("input and output dtypes differ");
    CopyPiece p = whole(0);
    p.dims = {Numel(in_dims)};
    p.src_strides = p.dst_strides = {1};
    pieces.push_back(p);
  } else if (op == "Transpose") {
    std::vector<int64_t> perm = n.GetInts("perm");
    if (perm.empty())
      for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
    CopyPiece p = whole(0);
    for (int64_t a : perm) p.src_strides.push_back(in_strides[NormAxis(a, rank)]);
    pieces.push_back(p);
  } else if (op == "Expand") {
    CopyPiece p = whole(0);
    const int64_t out_rank = static_cast<int64_t>(p.dims.size());
    for (int64_t i = 0; i < out_rank; ++i) {
      int64_t j = i - (out_rank - rank);
      p.src_strides.push_back(j < 0 || in_dims[j] == 1 ? 0 : in_strides[j]);
    }
    pieces.push_back(p);
  } else if (op == "Tile") {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> reps, ConstInts(n, 1));
    if (static_cast<int64_t>(reps.size()) != rank) return absl::FailedPreconditionError("Tile repeats do not match");
    CopyPiece p;
    p.dst = 0;
    std::vector<int64_t> out_strides = DenseStrides(DimsOf(n.output(0)));
    for (int64_t i = 0; i < rank; ++i) {
      p.dims.push_back(reps[i]);
      p.src_strides.push_back(0);
      p.dst_strides.push_back(in_dims[i] * out_strides[i]);
      p.dims.push_back(in_dims[i]);
      p.src_strides.push_back(in_strides[i]);
      p.dst_strides.push_back(out_strides[i]);
    }
    pieces.push_back(p);
  } else if (op == "Concat") {
    const std::vector<int64_t> out_dims = DimsOf(n.output(0));
    const std::vector<int64_t> out_strides = DenseStrides(out_dims);
    const int64_t axis = NormAxis(n.GetInt("axis", 0), static_cast<int64_t>(out_dims.size()));
    int64_t offset = 0;
    for (int i = 0; i < n.num_inputs(); ++i) {
      const Value* v = n.input(i);
      if (!v) continue;
      CopyPiece p;
      p.src = i;
      p.dst = 0;
      p.dims = DimsOf(v);
      p.src_strides = DenseStrides(p.dims);
      p.dst_strides = out_strides;
      p.dst_base = offset * out_strides[axis];
      offset += p.dims[axis];
      pieces.push_back(p);
    }
  } else if (op == "Split") {
    const int64_t axis = NormAxis(n.GetInt("axis", 0), rank);
    int64_t offset = 0;
    for (int o = 0; o < n.num_outputs(); ++o) {
      CopyPiece p = whole(o);
      p.src_strides = in_strides;
      p.src_base = offset * in_strides[axis];
      offset += p.dims[axis];
      pieces.push_back(p);
    }
  } else if (op == "Slice") {
    KILN_ASSIGN_OR_RETURN(std::vector<int64_t> starts, ConstInts(n, 1));
    std::vector<int64_t> axes, steps;
    if (n.input(3)) {
      KILN_ASSIGN_OR_RETURN(axes, ConstInts(n, 3));
    } else {
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    }
    if (n.input(4)) {
      KILN_ASSIGN_OR_RETURN(steps, ConstInts(n, 4));
    } else {
      steps.assign(starts.size(), 1);
    }
    if (axes.size() != starts.size() || steps.size() != starts.size())
      return absl::FailedPreconditionError("Slice starts, axes and steps differ in length");
    CopyPiece p = whole(0);
    p.src_strides = in_strides;
    for (size_t i = 0; i < axes.size(); ++i) {
      int64_t a = NormAxis(axes[i], rank);
      if (a < 0 || a >= rank) return absl::FailedPreconditionError("Slice axis out of range");
      int64_t d = in_dims[a], s = steps[i];
      if (s == 0) return absl::FailedPreconditionError("Slice with a zero step");
      int64_t b = starts[i] < 0 ? starts[i] + d : starts[i];
      // ONNX clamps starts to [0, d] for positive steps, [0, d-1] for negative ones.
      b = s > 0 ? std::clamp<int64_t>(b, 0, d) : std::clamp<int64_t>(b, 0, d - 1);
      p.src_base += b * in_strides[a];
      p.src_strides[a] = s * in_strides[a];
    }
    pieces.push_back(p);
  } else if (op == "Gather") {
    // [outer, k, inner]: k rows of the axis, picked by a table of source
    // offsets (constant indices) or by the indices read at run time.
    const Value* idx = n.input(1);
    const bool constant = idx && idx->is_constant();
    std::vector<int64_t> indices;
    if (constant) {
      KILN_ASSIGN_OR_RETURN(indices, ConstInts(n, 1));
    } else if (!idx || (idx->type().dtype() != DType::kI64 && idx->type().dtype() != DType::kI32)) {
      return absl::FailedPreconditionError("Gather indices must be i32 or i64");
    }
    const int64_t axis = NormAxis(n.GetInt("axis", 0), rank);
    if (axis < 0 || axis >= rank) return absl::FailedPreconditionError("Gather axis out of range");
    if (constant && static_cast<int64_t>(indices.size()) > kMaxTable)
      return absl::FailedPreconditionError(absl::StrCat("Gather of more than ", kMaxTable, " constant indices"));
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < axis; ++i) outer *= in_dims[i];
    for (int64_t i = axis + 1; i < rank; ++i) inner *= in_dims[i];
    const int64_t k = constant ? static_cast<int64_t>(indices.size()) : Numel(DimsOf(idx));
    CopyPiece p;
    p.dst = 0;
    p.dims = {outer, k, inner};
    p.src_strides = {in_dims[axis] * inner, 0, 1};
    p.dst_strides = {k * inner, inner, 1};
    p.table_dim = 1;
    if (constant) {
      for (int64_t j = 0; j < k; ++j) {
        int64_t v = indices[j] < 0 ? indices[j] + in_dims[axis] : indices[j];
        if (v < 0 || v >= in_dims[axis]) return absl::FailedPreconditionError("Gather index out of range");
        p.table.push_back(v * inner);
      }
    } else {
      p.index_input = 1;
      p.index_bytes = static_cast<int64_t>(DTypeSize(idx->type().dtype()));
      p.index_extent = in_dims[axis];
      p.index_scale = inner;
    }
    pieces.push_back(p);
  } else {
    return absl::UnimplementedError(absl::StrCat("no copy kernel for ", n.QualifiedOp()));
  }
  return pieces;
}

}  // namespace kiln::target
