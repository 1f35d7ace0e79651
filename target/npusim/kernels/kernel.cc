//===- kernel.cc - Shared helpers of the npusim kernel generators ---------===//
#include "target/npusim/kernels/kernel.h"

#include <algorithm>
#include <cstring>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/isa/asm.h"
#include "sim/machine/machine.h"

namespace kiln::target::npusim {

sim::DType IsaDTypeOf(DType t) {
  switch (t) {
    case DType::kF32: return sim::DType::kF32;
    case DType::kF16: return sim::DType::kF16;
    case DType::kBF16: return sim::DType::kBF16;
    case DType::kI32: return sim::DType::kS32;
    case DType::kI8: return sim::DType::kS8;
    default: return sim::DType::kNone;
  }
}

absl::StatusOr<std::string> KasmArgLine(absl::string_view name, const Value& v) {
  if (!v.type().is_tensor() || !v.type().shape().is_static())
    return absl::FailedPreconditionError(absl::StrCat("'", v.name(), "' has no static shape"));
  sim::DType dt = IsaDTypeOf(v.type().dtype());
  if (dt == sim::DType::kNone)
    return absl::FailedPreconditionError(
        absl::StrCat("'", v.name(), "' is ", DTypeName(v.type().dtype()), ", which AI cores do not hold"));
  std::vector<int64_t> dims = v.type().shape().StaticDims();
  if (dims.empty()) dims = {1};
  return absl::StrCat(".arg ", name, " ", sim::DTypeName(dt), "[", absl::StrJoin(dims, ","), "]");
}

int64_t StaticBytes(const Type& t) {
  return t.shape().NumElements() * static_cast<int64_t>(DTypeSize(t.dtype()));
}

std::string KasmByteArgLine(absl::string_view name, const Value& v) {
  return absl::StrCat(".arg ", name, " s8[", std::max<int64_t>(StaticBytes(v.type()), 1), "]");
}

std::optional<double> ConstScalar(const Value* v) {
  const Tensor* t = ConstantData(v);
  if (!t || t->numel() != 1) return std::nullopt;
  return t->GetDouble(0);
}

std::vector<const Value*> LaunchValues(const Node& node, const GeneratedKernel& k, size_t* first_output) {
  std::vector<const Value*> values;
  for (const Value* v : node.inputs())
    if (v) values.push_back(v);
  *first_output = values.size();
  for (const Value* v : node.outputs()) values.push_back(v);
  values.insert(values.end(), k.constant_args.begin(), k.constant_args.end());
  return values;
}

std::vector<int64_t> FractalDims(int64_t rows, int64_t cols, int element_bytes) {
  const int64_t k0 = 32 / element_bytes;
  return {(rows + 15) / 16, (cols + k0 - 1) / k0, 16, k0};
}

namespace {

// Whether `f`'s image is L0B's own form (an f32 Conv weight), not the
// row-major fractals of FractalDims.
bool InL0bForm(const FractalConstant& f, int element_bytes) { return f.conv_weight && element_bytes == 4; }

}  // namespace

std::vector<int64_t> FractalConstantDims(const FractalConstant& f, int element_bytes) {
  if (InL0bForm(f, element_bytes)) return {(f.rows + 7) / 8, (f.cols + 15) / 16, 16, 8};
  return FractalDims(f.rows, f.cols, element_bytes);
}

namespace {

// FractalImage's copy for elements of type E: a Conv weight in its own
// order; a matrix row by row, row i being src[row_base + j * col_stride]
// over its columns j.
template <typename E>
void FillFractalImage(const E* src, E* dst, const FractalConstant& f, const std::vector<int64_t>& wd, int64_t c1n,
                      int64_t k0, bool l0b) {
  if (f.conv_weight) {
    const int64_t cin = wd[1], taps = wd[2] * wd[3];
    // The weight read in its own order, [Cout][Cin][taps], so that each
    // output channel's run of channels and taps is one sequential read;
    // B row i = (c1 * taps + tap) * k0 + c0 holds channel c1 * k0 + c0 at
    // `tap`, column j output channel j.
    for (int64_t j = 0; j < f.cols; ++j)
      for (int64_t c = 0; c < cin; ++c) {
        const E* s = src + (j * cin + c) * taps;
        const int64_t c1 = c / k0, c0 = c % k0;
        for (int64_t tap = 0; tap < taps; ++tap) {
          const int64_t i = (c1 * taps + tap) * k0 + c0;
          // As below: (i/k0 * c1n * 16 + j) * k0 + i%k0, or
          // ((i/16 * c1n + j/k0) * 16 + i%16) * k0 + j%k0.
          const int64_t to = l0b ? ((c1 * taps + tap) * c1n * 16 + j) * k0 + c0
                                 : (((i / 16) * c1n + j / k0) * 16 + i % 16) * k0 + j % k0;
          dst[to] = s[tap];
        }
      }
    return;
  }
  for (int64_t i = 0; i < f.rows; ++i) {
    int64_t row_base = i * f.cols, col_stride = 1;
    if (f.transpose) {
      row_base = i;
      col_stride = f.rows;
    }
    const E* s = src + row_base;
    if (l0b) {
      // Element (i, j) at ((i/k0 * c1n + j/16) * 16 + j%16) * k0 + i%k0.
      E* d = dst + (i / k0) * c1n * 16 * k0 + i % k0;
      for (int64_t j = 0; j < f.cols; ++j) d[j * k0] = s[j * col_stride];
    } else {
      // Element (i, j) at ((i/16 * c1n + j/k0) * 16 + i%16) * k0 + j%k0.
      E* d = dst + ((i / 16) * c1n * 16 + i % 16) * k0;
      for (int64_t j0 = 0; j0 < f.cols; j0 += k0) {
        E* db = d + (j0 / k0) * 16 * k0;
        const int64_t n = std::min(k0, f.cols - j0);
        for (int64_t j = 0; j < n; ++j) db[j] = s[(j0 + j) * col_stride];
      }
    }
  }
}

}  // namespace

Tensor FractalImage(const Tensor& t, const FractalConstant& f) {
  const int es = static_cast<int>(DTypeSize(t.dtype()));
  const std::vector<int64_t> d = FractalConstantDims(f, es);
  const int64_t c1n = d[1], k0 = d[3];
  const bool l0b = InL0bForm(f, es);
  Tensor out(t.dtype(), d);  // zero-initialized: the padding
  const std::vector<int64_t>& wd = t.dims();
  if (es == 4)
    FillFractalImage(static_cast<const uint32_t*>(t.raw()), static_cast<uint32_t*>(out.raw()), f, wd, c1n, k0, l0b);
  else if (es == 2)
    FillFractalImage(static_cast<const uint16_t*>(t.raw()), static_cast<uint16_t*>(out.raw()), f, wd, c1n, k0, l0b);
  else
    FillFractalImage(static_cast<const uint8_t*>(t.raw()), static_cast<uint8_t*>(out.raw()), f, wd, c1n, k0, l0b);
  return out;
}

bool WritesInPlace(const Node& n, int input) {
  if (n.domain() == "kiln") return n.op() == "Fused" && n.GetString("kind", "") == "elementwise";
  if (!n.domain().empty()) return false;
  if (n.op() == "ScatterElements") return input == 0 && n.GetString("reduction", "none") == "none";
  static const auto* elementwise = new absl::flat_hash_set<std::string>{
      "Abs", "Add", "Sub", "Mul", "Div", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Pow", "Relu", "LeakyRelu",
      "Sigmoid", "HardSigmoid", "Tanh", "Erf", "Softplus", "Clip", "Max", "Min", "Sum", "Mean", "Floor", "Ceil",
      "Sign", "Where"};
  return elementwise->contains(n.op());
}

absl::StatusOr<GeneratedKernel> AssembledKernel(const std::string& text, const std::string& file,
                                                absl::string_view what, int64_t block_dim, std::string engine) {
  auto assembled = sim::Assemble(text, file);
  if (!assembled.ok()) return absl::InternalError(absl::StrCat(what, " kernel: ", assembled.status().message()));
  GeneratedKernel k;
  k.program = std::move(assembled->program);
  k.block_dim = block_dim;
  k.engine = std::move(engine);
  return k;
}

double UbLoadBytesPerCycle(const sim::Machine& m, int64_t blocks) {
  return std::min(sim::GmUbBytesPerCycle(m), sim::HbmBytesPerCycle(m) / static_cast<double>(std::max<int64_t>(blocks, 1)));
}

}  // namespace kiln::target::npusim
