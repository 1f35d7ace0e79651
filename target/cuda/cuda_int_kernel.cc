//===- cuda_int_kernel.cc - Integer and bool elementwise ops as CUDA kernels ===//
#include "target/cuda/cuda_int_kernel.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "target/cuda/cuda_copy_kernel.h"

namespace kiln::target::cuda {
namespace {

constexpr int64_t kThreads = 256;
constexpr int64_t kMaxBlocks = 132 * 16;

bool IsIntType(DType t) {
  return t == DType::kI64 || t == DType::kI32 || t == DType::kI16 || t == DType::kI8 || t == DType::kU8;
}

// The C type of a dtype, and the unsigned type its arithmetic wraps in.
const char* CIntType(DType t) {
  switch (t) {
    case DType::kI64: return "long long";
    case DType::kI32: return "int";
    case DType::kI16: return "short";
    case DType::kI8: return "signed char";
    case DType::kU8: return "unsigned char";
    default: return "bool";
  }
}
const char* CUnsigned(DType t) {
  switch (t) {
    case DType::kI64: return "unsigned long long";
    case DType::kI32: return "unsigned int";
    case DType::kI16: return "unsigned short";
    default: return "unsigned char";
  }
}

enum class Kind { kArith, kCompare, kLogic };

struct OpInfo {
  const char* op;
  int arity;
  Kind kind;
};
constexpr OpInfo kOps[] = {
    {"Add", 2, Kind::kArith},      {"Sub", 2, Kind::kArith},          {"Mul", 2, Kind::kArith},
    {"Max", 2, Kind::kArith},      {"Min", 2, Kind::kArith},          {"Neg", 1, Kind::kArith},
    {"Abs", 1, Kind::kArith},      {"Equal", 2, Kind::kCompare},      {"Greater", 2, Kind::kCompare},
    {"Less", 2, Kind::kCompare},   {"GreaterOrEqual", 2, Kind::kCompare}, {"LessOrEqual", 2, Kind::kCompare},
    {"Not", 1, Kind::kLogic},      {"And", 2, Kind::kLogic},          {"Or", 2, Kind::kLogic},
    {"Xor", 2, Kind::kLogic},
};

const OpInfo* InfoOf(const std::string& op) {
  for (const OpInfo& i : kOps)
    if (op == i.op) return &i;
  return nullptr;
}

// The C expression of `op` over a (and b) of type T, wrapping in U.
std::string Expr(const std::string& op, const std::string& t, const std::string& u) {
  if (op == "Add") return absl::StrCat("(", t, ")((", u, ")a + (", u, ")b)");
  if (op == "Sub") return absl::StrCat("(", t, ")((", u, ")a - (", u, ")b)");
  if (op == "Mul") return absl::StrCat("(", t, ")((", u, ")a * (", u, ")b)");
  if (op == "Max") return "a > b ? a : b";
  if (op == "Min") return "a < b ? a : b";
  if (op == "Neg") return absl::StrCat("(", t, ")(0 - (", u, ")a)");
  if (op == "Abs") return t == "unsigned char" ? "a" : absl::StrCat("a < 0 ? (", t, ")(0 - (", u, ")a) : a");
  if (op == "Equal") return "a == b";
  if (op == "Greater") return "a > b";
  if (op == "Less") return "a < b";
  if (op == "GreaterOrEqual") return "a >= b";
  if (op == "LessOrEqual") return "a <= b";
  if (op == "Not") return "!a";
  if (op == "And") return "a && b";
  if (op == "Or") return "a || b";
  return "a != b";  // Xor
}

// An element of dtype t at p[i], sign- or zero-extended.
int64_t Load(DType t, const void* p, int64_t i) {
  switch (t) {
    case DType::kI64: return static_cast<const int64_t*>(p)[i];
    case DType::kI32: return static_cast<const int32_t*>(p)[i];
    case DType::kI16: return static_cast<const int16_t*>(p)[i];
    case DType::kI8: return static_cast<const int8_t*>(p)[i];
    case DType::kU8: return static_cast<const uint8_t*>(p)[i];
    default: return static_cast<const bool*>(p)[i] ? 1 : 0;
  }
}
// Stores v at p[i], truncated to dtype t (wrapping).
void Store(DType t, void* p, int64_t i, int64_t v) {
  switch (t) {
    case DType::kI64: static_cast<int64_t*>(p)[i] = v; break;
    case DType::kI32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(static_cast<uint32_t>(v)); break;
    case DType::kI16: static_cast<int16_t*>(p)[i] = static_cast<int16_t>(static_cast<uint16_t>(v)); break;
    case DType::kI8: static_cast<int8_t*>(p)[i] = static_cast<int8_t>(static_cast<uint8_t>(v)); break;
    case DType::kU8: static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v); break;
    default: static_cast<bool*>(p)[i] = v != 0;
  }
}

}  // namespace

bool IsIntElementwise(const Node& n) {
  if (!n.domain().empty() || n.num_outputs() != 1) return false;
  const OpInfo* info = InfoOf(n.op());
  if (!info || n.num_inputs() != info->arity) return false;
  const DType t = n.input(0) ? n.input(0)->type().dtype() : DType::kUndefined;
  for (const Value* v : n.inputs())
    if (!v || v->type().dtype() != t) return false;
  if (info->kind == Kind::kLogic) return t == DType::kBool;
  if (info->kind == Kind::kCompare) return IsIntType(t) || (t == DType::kBool && n.op() == "Equal");
  return IsIntType(t);
}

absl::StatusOr<IntElementwiseLaunch> MakeIntElementwiseLaunch(const Node& n) {
  if (!IsIntElementwise(n)) return absl::UnimplementedError(absl::StrCat("no integer kernel for ", n.QualifiedOp()));
  for (const Value* v : n.inputs())
    if (!v->type().shape().is_static()) return absl::FailedPreconditionError("shapes not static");
  if (!n.output(0)->type().shape().is_static()) return absl::FailedPreconditionError("shapes not static");
  IntElementwiseLaunch l;
  IntElementwise& w = l.what;
  w.op = n.op();
  w.output = n.output(0)->type().dtype();
  w.dims = n.output(0)->type().shape().StaticDims();
  const size_t rank = w.dims.size();
  for (const Value* v : n.inputs()) {
    w.inputs.push_back(v->type().dtype());
    const Dims d = v->type().shape().StaticDims();
    if (d.size() > rank) return absl::FailedPreconditionError("an input of higher rank than the output");
    std::vector<int64_t> st(rank, 0);
    int64_t s = 1;
    for (size_t k = 0; k < d.size(); ++k) {
      const size_t od = rank - 1 - k, id = d.size() - 1 - k;
      if (d[id] != 1 && d[id] != w.dims[od]) return absl::FailedPreconditionError("inputs that do not broadcast");
      st[od] = d[id] == 1 ? 0 : s;
      s *= d[id];
    }
    w.strides.push_back(std::move(st));
  }
  int64_t count = 1;
  for (int64_t d : w.dims) count *= d;
  const std::string t = CIntType(w.inputs[0]), u = CUnsigned(w.inputs[0]);
  std::string params = absl::StrCat(CIntType(w.output), "* __restrict__ y");
  for (size_t i = 0; i < w.inputs.size(); ++i) absl::StrAppend(&params, ", const ", t, "* __restrict__ x", i);
  std::string body = absl::StrCat("  // ", w.op, " over [", absl::StrJoin(w.dims, ", "), "] in ", t, "\n",
                                  "  const long long n = ", count, ";\n",
                                  "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; "
                                  "i += (long long)gridDim.x * blockDim.x) {\n");
  // The coordinates of element i along the dimensions some input steps
  // along (innermost first; the outermost of them takes what is left).
  std::vector<int> moving;
  for (int k = 0; k < static_cast<int>(rank); ++k)
    for (size_t i = 0; i < w.inputs.size(); ++i)
      if (w.strides[i][k] != 0 && (moving.empty() || moving.back() != k)) moving.push_back(k);
  absl::StrAppend(&body, "    long long ", moving.empty() ? "" : "r = i, ");
  for (size_t i = 0; i < w.inputs.size(); ++i) absl::StrAppend(&body, i ? ", " : "", "o", i, " = 0");
  absl::StrAppend(&body, ";\n");
  int64_t inner = 1;  // the elements of the dimensions inside the one being split off
  for (int k = static_cast<int>(rank) - 1, m = static_cast<int>(moving.size()) - 1; k >= 0 && m >= 0; --k) {
    if (k != moving[m]) {
      inner *= w.dims[k];
      continue;
    }
    const std::string q = m == 0 ? absl::StrCat("r / ", inner) : absl::StrCat("r / ", inner, " % ", w.dims[k]);
    absl::StrAppend(&body, "    { const long long q = ", q, ";");
    for (size_t i = 0; i < w.inputs.size(); ++i)
      if (w.strides[i][k] != 0) absl::StrAppend(&body, " o", i, " += q * ", w.strides[i][k], ";");
    absl::StrAppend(&body, " }\n");
    inner *= w.dims[k];
    --m;
  }
  absl::StrAppend(&body, "    const ", t, " a = x0[o0];\n");
  if (w.inputs.size() > 1) absl::StrAppend(&body, "    const ", t, " b = x1[o1];\n");
  absl::StrAppend(&body, "    y[i] = ", Expr(w.op, t, u), ";\n  }\n");
  const uint64_t h = StableHash(absl::StrCat(params, "\n", body));
  l.function = absl::StrFormat("kiln_int_%s_%016x", absl::AsciiStrToLower(w.op), h);
  l.source = absl::StrCat("// ", w.op, " on integers\nextern \"C\" __global__ void __launch_bounds__(", kThreads, ") ",
                          l.function, "(", params, ") {\n", body, "}\n");
  l.threads = kThreads;
  l.blocks = std::clamp<int64_t>((count + kThreads - 1) / kThreads, 1, kMaxBlocks);
  return l;
}

absl::Status IntElementwiseOnHost(const IntElementwise& w, const std::vector<const void*>& inputs, void* output) {
  if (inputs.size() != w.inputs.size()) return absl::InternalError("integer kernel: wrong number of inputs");
  int64_t count = 1;
  for (int64_t d : w.dims) count *= d;
  const int rank = static_cast<int>(w.dims.size());
  for (int64_t i = 0; i < count; ++i) {
    int64_t r = i;
    std::vector<int64_t> off(inputs.size(), 0);
    for (int k = rank - 1; k >= 0; --k) {
      const int64_t q = r % w.dims[k];
      r /= w.dims[k];
      for (size_t j = 0; j < inputs.size(); ++j) off[j] += q * w.strides[j][k];
    }
    const int64_t a = Load(w.inputs[0], inputs[0], off[0]);
    const int64_t b = inputs.size() > 1 ? Load(w.inputs[1], inputs[1], off[1]) : 0;
    const uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
    int64_t v = 0;
    const std::string& op = w.op;
    if (op == "Add") v = static_cast<int64_t>(ua + ub);
    else if (op == "Sub") v = static_cast<int64_t>(ua - ub);
    else if (op == "Mul") v = static_cast<int64_t>(ua * ub);
    else if (op == "Max") v = std::max(a, b);
    else if (op == "Min") v = std::min(a, b);
    else if (op == "Neg") v = static_cast<int64_t>(0 - ua);
    else if (op == "Abs") v = a < 0 ? static_cast<int64_t>(0 - ua) : a;
    else if (op == "Equal") v = a == b;
    else if (op == "Greater") v = a > b;
    else if (op == "Less") v = a < b;
    else if (op == "GreaterOrEqual") v = a >= b;
    else if (op == "LessOrEqual") v = a <= b;
    else if (op == "Not") v = !a;
    else if (op == "And") v = a && b;
    else if (op == "Or") v = a || b;
    else if (op == "Xor") v = (a != 0) != (b != 0);
    else return absl::InternalError(absl::StrCat("integer kernel: no op ", op));
    Store(w.output, output, i, v);
  }
  return absl::OkStatus();
}

}  // namespace kiln::target::cuda
