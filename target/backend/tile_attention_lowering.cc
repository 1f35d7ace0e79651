//===- tile_attention_lowering.cc - kiln.Attention in the tile IR ----------===//
//
// FlashAttention's schedule stated once, in the tile IR's text form, for
// every target to print: per (batch dims, 64-row tile of Q) the Q tile
// stays in operand_a; per 64-key tile, S = Q K^T on the MMA, the online
// softmax in the vector scope (m' = max(m, rowmax S); alpha = exp(m - m');
// P = exp(S - m'); l = alpha l + rowsum P), P into the stage scope and
// operand_a, O = alpha O + P V with O kept in the accumulator (rescaled
// there, P V added by the MMA); at the end Y = O / l. A causal attention
// masks each score tile with `causal` (a tile wholly past the diagonal then
// adds nothing: a target may skip it). The running maximum m starts at
// f32's lowest finite value rather than -inf, so that a row whose first key
// tiles are all masked keeps alpha = 1 and P = 0 (exp(-inf - -inf) would be
// NaN) and still comes out as the reference does. The interpreter runs it as the
// reference meaning of the schedule; a target's code generator prints it as
// a kernel, or a target's own attention kernel records it.
//
//===----------------------------------------------------------------------===//
#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "graph/support/status.h"
#include "target/backend/attention_dims.h"
#include "target/backend/tile_lowering.h"

namespace kiln::target::tile {
namespace {

absl::Status No(absl::string_view why) {
  return absl::UnimplementedError(absl::StrCat("attention in the tile IR: ", why));
}

std::string Type(DType dt, const Dims& d) { return absl::StrCat(DTypeName(dt), "[", absl::StrJoin(d, ","), "]"); }

}  // namespace

absl::Status AttentionShapesLower(const Node& n) {
  absl::StatusOr<AttentionDims> dims = AttentionDimsOf(n);
  if (!dims.ok()) return No(dims.status().message());
  const Dims& q = dims->q;
  const size_t r = q.size();
  const int64_t s = dims->s, d = dims->d, l = dims->l;
  if (s % 16 || l % 16 || d % 16 || d > 128) return No("lengths multiples of 16, head size up to 128");
  if (const Value* mask = n.num_inputs() > 3 ? n.input(3) : nullptr) {
    const bool bool_mask = mask->type().dtype() == DType::kBool &&
                           n.GetFloat("mask_value", -std::numeric_limits<float>::infinity()) ==
                               -std::numeric_limits<float>::infinity();
    if (!IsFloat(mask->type().dtype()) && !bool_mask) return No("an additive mask, or a bool one that masks with -inf");
    const Dims md = mask->type().shape().StaticDims();
    if (md.size() > r || md.size() < 2 || md.back() != l || (md[md.size() - 2] != s && md[md.size() - 2] != 1))
      return No("a mask of the scores' shape or broadcast to it");
    for (size_t i = 0; i + 2 < md.size(); ++i)
      if (md[i] != 1 && md[i] != q[i + (r - md.size())]) return No("a mask whose batch dims broadcast partly");
  }
  return absl::OkStatus();
}

absl::StatusOr<TileKernel> LowerAttention(const Node& n, const TileCostFigures& f, DType narrow) {
  KILN_RETURN_IF_ERROR(AttentionShapesLower(n));
  const bool k_transposed = n.GetInt("k_transposed", 0) != 0, causal = n.GetInt("causal", 0) != 0;
  const DType in = n.input(0)->type().dtype();
  // An f32 attention as a target narrows it (its tensors declared narrow).
  const bool narrows = in == DType::kF32 && (narrow == DType::kF16 || narrow == DType::kBF16);
  const DType dt = narrows ? narrow : in;
  if (dt != DType::kF16 && dt != DType::kBF16 && dt != DType::kF32) return No("f16, bf16 or f32 Q, K and V");
  if (n.input(1)->type().dtype() != in || n.input(2)->type().dtype() != in) return No("Q, K and V of one dtype");
  const Dims q = n.input(0)->type().shape().StaticDims(), k = n.input(1)->type().shape().StaticDims(),
             v = n.input(2)->type().shape().StaticDims();
  const size_t r = q.size();
  const int64_t s = q[r - 2], d = q[r - 1], l = k_transposed ? k[r - 1] : k[r - 2];
  const double scale = n.GetFloat("scale", static_cast<float>(1.0 / std::sqrt(static_cast<double>(d))));
  const Value* mask = n.num_inputs() > 3 ? n.input(3) : nullptr;
  if (mask && mask->type().dtype() != in) return No("an additive mask of Q's dtype");

  // The largest tiles (rows of Q, keys) whose buffers fit the target.
  absl::Status last = No("no tiles fit");
  for (const auto& [br, bc] : {std::pair<int64_t, int64_t>{64, 64}, {32, 64}, {32, 32}, {16, 64}, {16, 32}, {16, 16}}) {
    if (s % br || l % bc) continue;
    // Grid variables: one per batch dim, then the row tile.
    std::vector<std::string> grid, lead;
    for (size_t i = 0; i + 2 < r; ++i) {
      grid.push_back(absl::StrCat("%g", i, " = ", q[i]));
      lead.push_back(absl::StrCat("%g", i));
    }
    grid.push_back(absl::StrCat("%i = ", s / br));
    auto at = [&](const std::string& row, const std::string& col = "0") {
      std::vector<std::string> st = lead;
      st.push_back(row);
      st.push_back(col);
      return absl::StrCat("[", absl::StrJoin(st, ", "), "]");
    };
    const std::string t = std::string(DTypeName(dt));
    std::string text = absl::StrCat("kernel @attention {\n  arg %q : ", Type(dt, q), " in\n  arg %k : ", Type(dt, k),
                                    " in\n  arg %v : ", Type(dt, v), " in\n");
    std::string mask_copy;
    if (mask) {
      const Dims md = mask->type().shape().StaticDims();
      std::vector<std::string> st;
      for (size_t i = 0; i + 2 < md.size(); ++i) {
        const size_t qi = i + (r - md.size());
        st.push_back(md[i] == 1 ? "0" : absl::StrCat("%g", qi));
      }
      st.push_back(md[md.size() - 2] == 1 ? "0" : absl::StrCat("%i*", br));
      st.push_back(absl::StrCat("%j*", bc));
      absl::StrAppend(&text, "  arg %mask : ", Type(dt, md), " in\n");
      mask_copy = absl::StrCat("      buffer %mk : f32[", br, ",", bc, "] vector\n      copy %mask[", absl::StrJoin(st, ", "),
                               "] -> %mk\n      ew add %sv <- %sv, %mk\n");
    }
    absl::StrAppend(&text, "  arg %y : ", Type(dt, q), " out\n  grid ", absl::StrJoin(grid, ", "), " {\n");
    absl::StrAppendFormat(&text,
                          "    buffer %%qs : %s[%d,%d] stage\n    buffer %%qa : %s[%d,%d] operand_a\n"
                          "    buffer %%m : f32[%d,1] vector\n    buffer %%l : f32[%d,1] vector\n"
                          "    buffer %%o : f32[%d,%d] accumulator\n    fill %%m, -3.4028234663852886e+38\n    fill %%l, 0\n"
                          "    fill %%o, 0\n",
                          t, br, d, t, br, d, br, br, br, d);
    const std::string row = absl::StrCat("%i*", br), key = absl::StrCat("%j*", bc);
    absl::StrAppend(&text, "    copy %q", at(row), " -> %qs\n    sync global -> stage\n    copy %qs -> %qa\n",
                    "    sync stage -> operand_a\n");
    absl::StrAppend(&text, "    serial %j = ", l / bc, " {\n");
    absl::StrAppendFormat(&text,
                          "      buffer %%ks : %s[%d,%d] stage\n      buffer %%kb : %s[%d,%d] operand_b\n"
                          "      buffer %%vs : %s[%d,%d] stage\n      buffer %%vb : %s[%d,%d] operand_b\n"
                          "      buffer %%s : f32[%d,%d] accumulator\n      buffer %%sv : f32[%d,%d] vector\n"
                          "      buffer %%rm : f32[%d,1] vector\n      buffer %%mn : f32[%d,1] vector\n"
                          "      buffer %%al : f32[%d,1] vector\n      buffer %%rs : f32[%d,1] vector\n"
                          "      buffer %%p : %s[%d,%d] vector\n      buffer %%ps : %s[%d,%d] stage\n"
                          "      buffer %%pa : %s[%d,%d] operand_a\n",
                          t, k_transposed ? d : bc, k_transposed ? bc : d, t, d, bc, t, bc, d, t, bc, d, br, bc, br,
                          bc, br, br, br, br, t, br, bc, t, br, bc, t, br, bc);
    // K^T's tile: K's rows transposed on their way to the operand, or K^T's columns as they lie.
    absl::StrAppend(&text, "      copy %k", k_transposed ? at("0", key) : at(key), " -> %ks\n      copy %v", at(key),
                    " -> %vs\n      sync global -> stage\n      copy %ks -> %kb", k_transposed ? "" : " transpose",
                    "\n      copy %vs -> %vb\n      sync stage -> operand_b\n      mma %s = %qa * %kb\n",
                    "      copy %s -> %sv\n");
    absl::StrAppendFormat(&text, "      ew mul %%sv <- %%sv, %.9g\n", scale);
    absl::StrAppend(&text, mask_copy, causal ? absl::StrCat("      causal %sv, ", row, ", ", key, "\n") : "",
                    "      reduce max %rm <- %sv axis 1\n      ew max %mn <- %m, %rm\n      ew sub %al <- %m, %mn\n"
                    "      ew exp %al <- %al\n      ew sub %sv <- %sv, %mn\n      ew exp %sv <- %sv\n"
                    "      reduce sum %rs <- %sv axis 1\n      ew mul %l <- %l, %al\n      ew add %l <- %l, %rs\n"
                    "      ew copy %m <- %mn\n      ew cast %p <- %sv\n      copy %p -> %ps\n"
                    "      sync vector -> stage\n      copy %ps -> %pa\n      sync stage -> operand_a\n"
                    "      ew mul %o <- %o, %al\n      mma %o += %pa * %vb\n    }\n",
                    "    ew div %o <- %o, %l\n    copy %o -> %y", at(row), "\n  }\n}\n");
    absl::StatusOr<TileKernel> kernel = Parse(text);
    if (!kernel.ok()) return kernel.status();
    kernel->plan = absl::StrFormat("attention %dx%d over %d keys, head %d%s: %dx%d tiles, online softmax", s, s, l,
                                   d, causal ? ", causal" : "", br, bc);
    last = Verify(*kernel, f.target);
    if (last.ok()) return *std::move(kernel);
  }
  return last;
}

}  // namespace kiln::target::tile
