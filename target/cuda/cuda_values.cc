//===- cuda_values.cc - What a value needs to live on the GPU -------------===//
#include "target/cuda/cuda_values.h"

#include "graph/passes/rewrite_helpers.h"

namespace kiln::target::cuda {

bool FixedWidth(DType t) {
  return t != DType::kString && t != DType::kUndefined && DTypeSize(t) > 0 && DTypeSize(t) <= 8;
}

bool HostStorable(const Value* v) {
  return v->type().is_tensor() && (FixedWidth(v->type().dtype()) || v->type().dtype() == DType::kString);
}

bool HostStringInput(const Value* v) {
  return v->type().is_tensor() && v->type().dtype() == DType::kString && v->type().shape().ranked() &&
         v->type().shape().is_static();
}

bool DeviceStorable(const Value* v) {
  return v->type().is_tensor() && FixedWidth(v->type().dtype()) && v->type().shape().ranked() &&
         v->type().shape().is_static();
}

int64_t StaticBytes(const Value* v) {
  int64_t n = static_cast<int64_t>(DTypeSize(v->type().dtype()));
  for (const Dim& d : v->type().shape().dims()) n *= d.value();
  return n;
}

std::vector<int64_t> DimsOf(const Value* v) {
  std::vector<int64_t> d;
  if (!v->type().is_tensor() || !v->type().shape().ranked()) return d;
  for (const Dim& x : v->type().shape().dims()) d.push_back(x.value());
  return d;
}

bool IsView(const Node& n) {
  if (!n.domain().empty()) return false;
  if (!IsOneOf(n, kViewOps)) return false;
  const Value* in = n.input(0);
  const Value* out = n.output(0);
  return in && DeviceStorable(in) && DeviceStorable(out) && in->type().dtype() == out->type().dtype() &&
         StaticBytes(in) == StaticBytes(out);
}

}  // namespace kiln::target::cuda
