//===- cube_attention_geometry.cc - What a kiln.Attention asks of its kernel ===//
#include "target/npusim/kernels/cube_attention_geometry.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace kiln::target::npusim {

absl::Status Refuse(absl::string_view why) { return absl::UnimplementedError(absl::StrCat("fused attention: ", why)); }

absl::StatusOr<Geometry> GeometryOf(const Node& n, bool narrow_later, bool decode) {
  if (n.num_inputs() < 3) return Refuse("Q, K and V are needed");
  for (int i = 0; i < n.num_inputs(); ++i) {
    const Value* v = n.input(i);
    if (i < 3 && !v) return Refuse("Q, K and V are needed");
    if (v && (!v->type().is_tensor() || !v->type().shape().is_static())) return Refuse("shapes known at compile time");
  }
  const Value* q = n.input(0);
  const Value* k = n.input(1);
  const Value* v = n.input(2);
  const DType dt = q->type().dtype();
  for (const Value* x : {q, k, v, static_cast<const Value*>(n.output(0))})
    if (x->type().dtype() != dt || (dt != DType::kF16 && dt != DType::kF32))
      return Refuse("f16 or f32 Q, K and V of one dtype");
  if (n.GetInt("k_transposed", 0)) return Refuse("K given transposed");
  const Dims qd = q->type().shape().StaticDims(), kd = k->type().shape().StaticDims(),
             vd = v->type().shape().StaticDims();
  if (qd.size() < 2 || kd.size() != qd.size() || vd.size() != qd.size()) return Refuse("Q, K and V of one rank");
  Geometry g;
  g.es = static_cast<int64_t>(DTypeSize(dt));
  const size_t r = qd.size();
  for (size_t i = 0; i + 2 < r; ++i) {
    if (kd[i] != qd[i] || vd[i] != qd[i]) return Refuse("batch dims broadcast between Q, K and V");
    g.bh *= qd[i];
  }
  g.heads = r > 2 ? qd[r - 3] : 1;
  g.s = qd[r - 2];
  g.d = qd[r - 1];
  g.l = kd[r - 2];
  if (kd[r - 1] != g.d || vd[r - 2] != g.l || vd[r - 1] != g.d) return Refuse("V's head size differs from Q's");
  if (decode) {
    if (g.s != 1) return Refuse("one query row (a decode step)");
    if (g.d % 64 || g.d > 128) return Refuse("a head size of 64 or 128");
    if (g.l % kAttTile || g.l == 0) return Refuse("a key length that is a multiple of 64");
  } else {
    if (g.d % 16 || g.d > 128) return Refuse("a head size that is a multiple of 16 up to 128");
    if (g.s % kAttTile || g.l % kAttTile || g.s == 0 || g.l == 0)
      return Refuse("sequence lengths that are multiples of 64");
  }
  g.nq = (g.s + kAttTile - 1) / kAttTile;
  g.nk = g.l / kAttTile;
  g.causal = n.GetInt("causal", 0) != 0;
  g.scale = n.GetFloat("scale", static_cast<float>(1.0 / std::sqrt(static_cast<double>(g.d))));
  if (n.num_inputs() > 3 && n.input(3)) {
    const Type& mt = n.input(3)->type();
    const bool bool_later = narrow_later && mt.dtype() == DType::kBool &&
                            n.GetFloat("mask_value", -std::numeric_limits<float>::infinity()) ==
                                -std::numeric_limits<float>::infinity();
    if (mt.dtype() != DType::kF16 && mt.dtype() != DType::kF32 && !bool_later)
      return Refuse("an additive f16 or f32 mask");
    Dims md = mt.shape().StaticDims();
    if (md.size() > r) return Refuse("a mask of higher rank than the scores");
    md.insert(md.begin(), r - md.size(), 1);
    if (md[r - 1] != g.l) return Refuse("a mask with a column per key");
    if (md[r - 2] != g.s && md[r - 2] != 1) return Refuse("a mask with a row per query or one for all");
    // Batch dims: all 1, or the scores' on the last (heads) and the ones before it (batch).
    int64_t outer = 1, outer_scores = 1;
    for (size_t i = 0; i + 3 < r; ++i) {
      if (md[i] != 1 && md[i] != qd[i]) return Refuse("a mask whose batch dims broadcast partly");
      outer *= md[i];
      outer_scores *= qd[i];
    }
    if (outer != 1 && outer != outer_scores) return Refuse("a mask whose batch dims broadcast partly");
    if (r > 2 && md[r - 3] != 1 && md[r - 3] != g.heads) return Refuse("a mask whose head dim broadcasts partly");
    g.mask_es = static_cast<int64_t>(DTypeSize(mt.dtype()));
    g.mask_row = md[r - 2] == 1 ? 0 : g.l;
    const int64_t plane = (md[r - 2] == 1 ? 1 : g.s) * g.l;
    g.mask_h = r > 2 && md[r - 3] != 1 ? plane : 0;
    g.mask_b = outer != 1 ? plane * (r > 2 ? md[r - 3] : 1) : 0;
  }
  return g;
}


}  // namespace kiln::target::npusim
