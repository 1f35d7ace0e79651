//===- attention_dims.cc - A kiln.Attention's operand shapes, checked -----===//
#include "target/backend/attention_dims.h"

namespace kiln::target {

absl::StatusOr<AttentionDims> AttentionDimsOf(const Node& n) {
  auto no = [](const char* why) { return absl::UnimplementedError(why); };
  if (n.domain() != "kiln" || n.op() != "Attention" || n.num_inputs() < 3 || !n.input(0) || !n.input(1) ||
      !n.input(2) || n.num_outputs() != 1)
    return no("not a kiln.Attention");
  for (const Value* v : n.inputs())
    if (v && !v->type().shape().is_static()) return no("shapes not static");
  AttentionDims a;
  a.k_transposed = n.GetInt("k_transposed", 0) != 0;
  a.q = n.input(0)->type().shape().StaticDims();
  const Dims k = n.input(1)->type().shape().StaticDims(), v = n.input(2)->type().shape().StaticDims();
  const size_t r = a.q.size();
  if (r < 2 || k.size() != r || v.size() != r) return no("Q, K and V of one rank");
  for (size_t i = 0; i + 2 < r; ++i)
    if (k[i] != a.q[i] || v[i] != a.q[i]) return no("batch dims that broadcast");
  a.s = a.q[r - 2];
  a.d = a.q[r - 1];
  a.l = a.k_transposed ? k[r - 1] : k[r - 2];
  if ((a.k_transposed ? k[r - 2] : k[r - 1]) != a.d || v[r - 2] != a.l || v[r - 1] != a.d) return no("K's or V's shape");
  return a;
}

}  // namespace kiln::target
