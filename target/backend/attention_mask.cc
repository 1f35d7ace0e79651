//===- attention_mask.cc - kiln.Attention's bool mask made additive -------===//
#include "target/backend/attention_mask.h"

#include <limits>

#include "absl/strings/str_cat.h"

namespace kiln::target {

bool MakeAttentionMaskAdditive(Graph& g, Node* n) {
  if (n->domain() != "kiln" || n->op() != "Attention") return false;
  if (n->num_inputs() < 4 || !n->input(3) || n->input(3)->type().dtype() != DType::kBool) return false;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  if (n->GetFloat("mask_value", kNegInf) != kNegInf) return false;
  const DType dt = n->input(0)->type().dtype();
  Value* mask = n->input(3);
  const std::string name = absl::StrCat(mask->name(), ".additive");
  for (const Use& u : mask->uses())
    if (u.user && u.user->op() == "Where" && u.index == 0 && u.user->output(0)->type().dtype() == dt &&
        u.user->output(0)->name() == name) {
      n->SetInput(3, u.user->output(0));
      return true;
    }
  Value* zero = g.AddConstant(absl::StrCat(mask->name(), ".keep"), CastTensor(Tensor::Scalar<float>(0), dt));
  Value* drop = g.AddConstant(absl::StrCat(mask->name(), ".drop"), CastTensor(Tensor::Scalar<float>(kNegInf), dt));
  Node* w = g.AddNode("Where", {mask, zero, drop}, {name}, "", n);
  w->output(0)->set_type(Type::Tensor(dt, mask->type().shape()));
  n->SetInput(3, w->output(0));
  return true;
}

}  // namespace kiln::target
