//===- cuda_decode_attention.cc - One query row against a KV cache on cuda -===//
#include "target/cuda/cuda_decode_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "graph/ir/dtype_dispatch.h"
#include "graph/support/status.h"
#include "target/backend/attention_dims.h"
#include "target/cuda/cuda_copy_kernel.h"

namespace kiln::target::cuda {
namespace {

constexpr int64_t kChunk = 64;  // keys per block of the first kernel
constexpr int kWarps = 4;

absl::Status No(const std::string& why) { return absl::UnimplementedError(absl::StrCat("decode attention: ", why)); }

const char* CFloat(DType t) {
  return t == DType::kF32 ? "float" : t == DType::kF16 ? "__half" : t == DType::kBF16 ? "__nv_bfloat16" : nullptr;
}

constexpr char kKernels[] = R"(// decode attention: one query row against @L@ keys, head @D@, @ITEMS@ heads x batches, @CHUNKS@ chunks of 64 keys
extern "C" __global__ void __launch_bounds__(128) @PARTIAL@(float* __restrict__ ws, const @T@* __restrict__ q,
    const @T@* __restrict__ k, const @T@* __restrict__ v@MASK_PARAM@) {
  constexpr int D = @D@, L = @L@, E = D / 32, CHUNKS = @CHUNKS@, WARPS = 4;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  float* sm = reinterpret_cast<float*>(smem_raw);  // per warp: m, l, then O
  float* so = sm + 2 * WARPS;
  const long long item = blockIdx.y;
  const int chunk = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float qv[E], o[E];
  for (int e = 0; e < E; ++e) {
    qv[e] = kiln::to_f32(q[item * D + lane + 32 * e]) * @SCALE@;
    o[e] = 0.f;
  }
  float m = -INFINITY, l = 0.f;
  const int end = min(L, (chunk + 1) * 64);
  for (int j = chunk * 64 + warp; j < end; j += WARPS) {
    float bias = 0.f;
@MASK_READ@
    const @T@* kr = k + (item * L + j) * D;
    float s = 0.f;
    for (int e = 0; e < E; ++e) s += qv[e] * kiln::to_f32(kr[lane + 32 * e]);
    for (int x = 16; x > 0; x >>= 1) s += __shfl_xor_sync(0xffffffffu, s, x);
    s += bias;
    const float mn = fmaxf(m, s), a = expf(m - mn), p = expf(s - mn);
    l = l * a + p;
    const @T@* vr = v + (item * L + j) * D;
    for (int e = 0; e < E; ++e) o[e] = o[e] * a + p * kiln::to_f32(vr[lane + 32 * e]);
    m = mn;
  }
  if (lane == 0) sm[warp] = m, sm[WARPS + warp] = l;
  for (int e = 0; e < E; ++e) so[warp * D + lane + 32 * e] = o[e];
  __syncthreads();
  if (warp == 0) {
    float mx = -INFINITY;
    for (int w = 0; w < WARPS; ++w) mx = fmaxf(mx, sm[w]);
    float* out = ws + (item * CHUNKS + chunk) * (D + 2);
    float lt = 0.f;
    for (int e = 0; e < E; ++e) o[e] = 0.f;
    if (mx != -INFINITY)
      for (int w = 0; w < WARPS; ++w) {
        const float f = expf(sm[w] - mx);
        lt += sm[WARPS + w] * f;
        for (int e = 0; e < E; ++e) o[e] += so[w * D + lane + 32 * e] * f;
      }
    if (lane == 0) out[0] = mx, out[1] = lt;
    for (int e = 0; e < E; ++e) out[2 + lane + 32 * e] = o[e];
  }
}

extern "C" __global__ void __launch_bounds__(32) @COMBINE@(@T@* __restrict__ y, const float* __restrict__ ws) {
  constexpr int D = @D@, E = D / 32, CHUNKS = @CHUNKS@;
  const long long item = blockIdx.x;
  const int lane = threadIdx.x % 32;
  const float* in = ws + item * CHUNKS * (D + 2);
  float mx = -INFINITY;
  for (int c = 0; c < CHUNKS; ++c) mx = fmaxf(mx, in[c * (D + 2)]);
  float lt = 0.f, o[E];
  for (int e = 0; e < E; ++e) o[e] = 0.f;
  if (mx != -INFINITY)
    for (int c = 0; c < CHUNKS; ++c) {
      const float f = expf(in[c * (D + 2)] - mx);
      lt += in[c * (D + 2) + 1] * f;
      for (int e = 0; e < E; ++e) o[e] += in[c * (D + 2) + 2 + lane + 32 * e] * f;
    }
  for (int e = 0; e < E; ++e) y[item * D + lane + 32 * e] = kiln::from_f32<@T@>(o[e] / lt);
}
)";

// Element i of a float tensor of dtype t at p, as a float; and stored back, rounded.
float Load(DType t, const void* p, int64_t i) {
  return DispatchFloat(t, [&]<typename T>() { return static_cast<float>(ToDouble(static_cast<const T*>(p)[i])); });
}
void Store(DType t, void* p, int64_t i, float v) {
  DispatchFloat(t, [&]<typename T>() { static_cast<T*>(p)[i] = FromDouble<T>(v); });
}

// What the kernels compute for `n`, or why they do not take it.
absl::StatusOr<DecodeAttention> DecodeAttentionOf(const Node& n) {
  absl::StatusOr<AttentionDims> dims = AttentionDimsOf(n);
  if (!dims.ok()) return No(std::string(dims.status().message()));
  if (dims->k_transposed || n.GetInt("causal", 0)) return No("K given transposed, or causal");
  DecodeAttention a;
  a.dtype = n.input(0)->type().dtype();
  if (!CFloat(a.dtype)) return No("f32, f16 or bf16 Q");
  for (int i = 1; i < 3; ++i)
    if (n.input(i)->type().dtype() != a.dtype) return No("Q, K and V of one dtype");
  const Dims& q = dims->q;
  const size_t r = q.size();
  if (dims->s != 1) return No("one query row");
  if (dims->d % 32 || dims->d > 256 || dims->l < 1) return No("a head size that is a multiple of 32 up to 256");
  for (size_t i = 0; i + 2 < r; ++i) a.items *= q[i];
  a.d = dims->d;
  a.l = dims->l;
  a.chunks = (a.l + kChunk - 1) / kChunk;
  a.scale = n.GetFloat("scale", static_cast<float>(1.0 / std::sqrt(static_cast<double>(a.d))));
  if (const Value* mask = n.num_inputs() > 3 ? n.input(3) : nullptr) {
    a.mask = mask->type().dtype();
    if (!CFloat(a.mask)) return No("an additive mask");
    Dims md = mask->type().shape().StaticDims();
    if (md.size() > r || md.empty() || md.back() != a.l || (md.size() > 1 && md[md.size() - 2] != 1))
      return No("a mask of one row per key");
    md.insert(md.begin(), r - md.size(), 1);
    // The mask's batch dims are 1 but for one run equal to Q's: item i's
    // index in it is i / (the items after the run) % (the run's items).
    int first = -1, last = -1;
    for (int i = 0; i + 2 < static_cast<int>(r); ++i)
      if (md[i] != 1) {
        if (first < 0) first = i;
        last = i;
      }
    for (int i = first; first >= 0 && i <= last; ++i)
      if (md[i] != q[i]) return No("a mask whose batch dims broadcast partly, or not over one run");
    for (int i = last + 1; first >= 0 && i + 2 < static_cast<int>(r); ++i) a.mask_div *= q[i];
    for (int i = first; first >= 0 && i <= last; ++i) a.mask_mod *= md[i];
    a.mask_item = a.mask_mod > 1 ? a.l : 0;
  }
  return a;
}

}  // namespace

absl::Status DecodeAttentionTakes(const Node& n) { return DecodeAttentionOf(n).status(); }

absl::StatusOr<DecodeAttentionLaunch> MakeDecodeAttentionLaunch(const Node& n) {
  DecodeAttentionLaunch la;
  KILN_ASSIGN_OR_RETURN(la.what, DecodeAttentionOf(n));
  const DecodeAttention& a = la.what;
  std::string mask_param, mask_read;
  if (a.mask != DType::kUndefined) {
    mask_param = absl::StrCat(", const ", CFloat(a.mask), "* __restrict__ mask");
    mask_read = absl::StrFormat(
        "    bias = kiln::to_f32(mask[item / %d %% %d * %d + j]);\n    if (bias == -INFINITY) continue;  // a masked "
        "key: its K and V are not read",
        a.mask_div, a.mask_mod, a.mask_item);
  }
  const std::string body = absl::StrReplaceAll(
      kKernels, {{"@T@", CFloat(a.dtype)},
                 {"@D@", absl::StrCat(a.d)},
                 {"@L@", absl::StrCat(a.l)},
                 {"@ITEMS@", absl::StrCat(a.items)},
                 {"@CHUNKS@", absl::StrCat(a.chunks)},
                 {"@SCALE@", absl::StrFormat("%.9gf", a.scale)},
                 {"@MASK_PARAM@", mask_param},
                 {"@MASK_READ@", mask_read}});
  const uint64_t h = StableHash(body);
  la.partial = absl::StrFormat("kiln_decode_attention_%016x", h);
  la.combine = absl::StrFormat("kiln_decode_attention_combine_%016x", h);
  la.source = absl::StrReplaceAll(body, {{"@PARTIAL@", la.partial}, {"@COMBINE@", la.combine}});
  la.threads = 32 * kWarps;
  return la;
}

void DecodeAttentionPartialOnHost(const DecodeAttention& a, const void* q, const void* k, const void* v,
                                  const void* mask, float* ws) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const float scale = static_cast<float>(a.scale);
  for (int64_t item = 0; item < a.items; ++item)
    for (int64_t c = 0; c < a.chunks; ++c) {
      float m[kWarps], l[kWarps];
      std::vector<float> o(kWarps * a.d, 0.f);
      for (int w = 0; w < kWarps; ++w) {
        m[w] = ninf;
        l[w] = 0;
        for (int64_t j = c * kChunk + w; j < std::min(a.l, (c + 1) * kChunk); j += kWarps) {
          float bias = 0;
          if (a.mask != DType::kUndefined) {
            bias = Load(a.mask, mask, item / a.mask_div % a.mask_mod * a.mask_item + j);
            if (bias == ninf) continue;
          }
          float s = 0;
          for (int64_t e = 0; e < a.d; ++e)
            s += Load(a.dtype, q, item * a.d + e) * scale * Load(a.dtype, k, (item * a.l + j) * a.d + e);
          s += bias;
          const float mn = std::max(m[w], s), f = std::exp(m[w] - mn), p = std::exp(s - mn);
          l[w] = l[w] * f + p;
          for (int64_t e = 0; e < a.d; ++e)
            o[w * a.d + e] = o[w * a.d + e] * f + p * Load(a.dtype, v, (item * a.l + j) * a.d + e);
          m[w] = mn;
        }
      }
      float mx = ninf, lt = 0;
      for (int w = 0; w < kWarps; ++w) mx = std::max(mx, m[w]);
      float* out = ws + (item * a.chunks + c) * (a.d + 2);
      for (int64_t e = 0; e < a.d; ++e) out[2 + e] = 0;
      if (mx != ninf)
        for (int w = 0; w < kWarps; ++w) {
          const float f = std::exp(m[w] - mx);
          lt += l[w] * f;
          for (int64_t e = 0; e < a.d; ++e) out[2 + e] += o[w * a.d + e] * f;
        }
      out[0] = mx;
      out[1] = lt;
    }
}

void DecodeAttentionCombineOnHost(const DecodeAttention& a, const float* ws, void* y) {
  const float ninf = -std::numeric_limits<float>::infinity();
  for (int64_t item = 0; item < a.items; ++item) {
    const float* in = ws + item * a.chunks * (a.d + 2);
    float mx = ninf, lt = 0;
    for (int64_t c = 0; c < a.chunks; ++c) mx = std::max(mx, in[c * (a.d + 2)]);
    std::vector<float> o(a.d, 0.f);
    if (mx != ninf)
      for (int64_t c = 0; c < a.chunks; ++c) {
        const float f = std::exp(in[c * (a.d + 2)] - mx);
        lt += in[c * (a.d + 2) + 1] * f;
        for (int64_t e = 0; e < a.d; ++e) o[e] += in[c * (a.d + 2) + 2 + e] * f;
      }
    for (int64_t e = 0; e < a.d; ++e) Store(a.dtype, y, item * a.d + e, o[e] / lt);
  }
}

}  // namespace kiln::target::cuda
