//===- cuda_attention.cc - The attention tile kernel as a TensorCore kernel -===//
//
// LowerAttention's form (tile_lowering.h, docs/tile-ir.md "Attention")
// becomes one __global__ function, `<name>_sm80`, for sm_80 and newer:
//
//  - one thread block per (batch item, row tile of Q): the grid's batch
//    dims flattened on blockIdx.x, the row tiles on blockIdx.y, the last
//    row tile first (under `causal` it has the most key tiles);
//  - one warp per 16 rows of the tile (BR / 16 warps); each keeps its Q
//    fragments in registers (ldmatrix from shared memory, once);
//  - the key tiles stream through shared memory in two slots filled by
//    cp.async: tile j+1 loads while tile j computes;
//  - S = Q K^T by mma.sync m16n8k16 into f32 registers; the online softmax
//    runs on those registers: scale, the additive mask's elements read from
//    global memory, the causal mask, the row maximum and sum across the four
//    lanes that share a row (warp shuffles), alpha = exp(m - m');
//  - P is converted to Q's dtype in registers and used as the A operand of
//    O += P V as it lies (an m16n8k16 accumulator pair is an A fragment),
//    V's fragments by ldmatrix.trans; O stays in registers, rescaled by
//    alpha per tile, divided by l at the end and stored.
//
// f32 runs on tf32 (mma.sync m16n8k8, as the f32 GEMMs): fragments read
// from shared memory with scalar loads, and P passed from the
// accumulator's layout to the A operand's through each warp's own rows of
// shared memory. Under `causal` the key tiles wholly past the row tile's
// diagonal are not visited (they add nothing: docs/tile-ir.md). The recognizer checks the
// kernel statement by statement against the form; any other kernel with
// both mma and reduce steps is refused.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "graph/support/status.h"
#include "target/cuda/codegen/codegen_util.h"

namespace kiln::target::cuda::internal {
namespace {

using tile::Scope;
using tile::Stmt;
using tile::TileArg;

absl::Status Err(const std::string& what) { return absl::UnimplementedError(absl::StrCat("attention: ", what)); }

// What the emitted kernel needs of a kernel in LowerAttention's form.
struct Attention {
  int q = -1, k = -1, v = -1, mask = -1, y = -1;  // argument indices
  int64_t br = 0, bc = 0, d = 0, s = 0, l = 0;
  std::vector<std::string> batch_vars;  // the grid's batch variables, outermost first
  std::vector<int64_t> batch;           // their extents
  bool k_transposed = false, causal = false;
  double scale = 1, m_init = 0;
  DType dt = DType::kF16;
  // Per dimension of the mask: -1 broadcast, i < batch.size() batch dim i,
  // batch.size() the row, batch.size() + 1 the key.
  std::vector<int> mask_dims;
};

const Stmt* BufferOf(const Names& n, const std::string& name) {
  auto it = n.buffers.find(name);
  return it == n.buffers.end() ? nullptr : it->second;
}

// One statement as a word of the form's signature: its kind and op, copies
// by the scopes they join.
std::string Word(const Stmt& s, const Names& n) {
  auto scope = [&](const std::string& name) -> std::string {
    if (n.args.count(name)) return "global";
    const Stmt* b = BufferOf(n, name);
    return b ? std::string(tile::ScopeName(b->scope)) : "?";
  };
  switch (s.kind) {
    case Stmt::Kind::kCopy:
      if (s.srcs.size() != 1 || !s.srcs[0].ref) return "copy?";
      return absl::StrCat("copy:", scope(s.srcs[0].ref->name), ">", scope(s.dst.name), s.transpose ? ":t" : "",
                          s.accumulate || s.im2col ? ":?" : "");
    case Stmt::Kind::kFill: return "fill";
    case Stmt::Kind::kMma: return s.accumulate ? "mma+=" : "mma=";
    case Stmt::Kind::kEw: {
      const bool scalar = s.srcs.size() == 2 && !s.srcs[1].ref;
      return absl::StrCat("ew:", tile::EwOpName(s.ew), scalar ? ":scalar" : "");
    }
    case Stmt::Kind::kReduce: return absl::StrCat("reduce:", tile::ReduceOpName(s.reduce), ":", s.axis);
    case Stmt::Kind::kSync: return "sync";
    case Stmt::Kind::kCausal: return "causal";
    case Stmt::Kind::kLoop: return "loop";
    case Stmt::Kind::kBuffer: return "buffer";
  }
  return "?";
}

// The signature of a block's statements other than buffer declarations.
std::vector<const Stmt*> Steps(const tile::Block& b) {
  std::vector<const Stmt*> out;
  for (const auto& s : b)
    if (s->kind != Stmt::Kind::kBuffer) out.push_back(s.get());
  return out;
}

std::string Signature(const std::vector<const Stmt*>& steps, const Names& n) {
  std::vector<std::string> words;
  for (const Stmt* s : steps) words.push_back(Word(*s, n));
  return absl::StrJoin(words, " ");
}

absl::StatusOr<Attention> Match(const tile::TileKernel& k, const Names& names) {
  Attention a;
  if (k.body.size() != 1 || k.body[0]->kind != Stmt::Kind::kLoop || k.body[0]->loop != Stmt::LoopKind::kGrid)
    return Err("the kernel is not one grid loop");
  const Stmt& grid = *k.body[0];
  if (grid.vars.empty()) return Err("a grid without variables");
  for (size_t i = 0; i + 1 < grid.vars.size(); ++i) {
    a.batch_vars.push_back(grid.vars[i].name);
    a.batch.push_back(grid.vars[i].extent);
  }
  const std::string row_var = grid.vars.back().name;

  // The grid body: the running statistics and O, Q into operand_a, the
  // loop over key tiles, O / l out.
  const std::vector<const Stmt*> outer = Steps(grid.body);
  const std::string kOuter =
      "fill fill fill copy:global>stage sync copy:stage>operand_a sync loop ew:div copy:accumulator>global";
  if (Signature(outer, names) != kOuter)
    return Err(absl::StrCat("the block is not the attention form: ", Signature(outer, names)));
  const Stmt& loop = *outer[7];
  if (loop.loop != Stmt::LoopKind::kSerial || loop.vars.size() != 1) return Err("the key tiles are no serial loop");
  const std::string key_var = loop.vars[0].name;
  a.m_init = outer[0]->value;
  if (outer[1]->value != 0 || outer[2]->value != 0) return Err("l and O start at zero");
  a.q = names.arg_index.at(outer[3]->srcs[0].ref->name);
  a.y = names.arg_index.at(outer[9]->dst.name);
  const Stmt* qs = BufferOf(names, outer[3]->dst.name);
  const Stmt* o = BufferOf(names, outer[2]->dst.name);
  if (!qs || qs->shape.size() != 2 || !o || o->shape.size() != 2) return Err("Q's tile and O are matrices");
  a.br = qs->shape[0];
  a.d = qs->shape[1];

  // The key-tile loop.
  const std::vector<const Stmt*> inner = Steps(loop.body);
  std::string sig = Signature(inner, names);
  const std::string kHead = "copy:global>stage copy:global>stage sync ";
  const std::string kSoftmax =
      "reduce:max:1 ew:max ew:sub ew:exp ew:sub ew:exp reduce:sum:1 ew:mul ew:add ew:copy ew:cast copy:vector>stage "
      "sync copy:stage>operand_a sync ew:mul mma+=";
  size_t at = 0;
  auto take = [&](const std::string& words) {
    if (sig.compare(at, words.size(), words) != 0) return false;
    at += words.size();
    return true;
  };
  if (!take(kHead)) return Err(absl::StrCat("the key tile's loads: ", sig));
  const int ki = 0, vi = 1;
  a.k_transposed = !take("copy:stage>operand_b:t ");
  if (a.k_transposed && !take("copy:stage>operand_b ")) return Err(absl::StrCat("K's operand copy: ", sig));
  if (!take("copy:stage>operand_b sync mma= copy:accumulator>vector ew:mul:scalar "))
    return Err(absl::StrCat("S = Q K^T: ", sig));
  int step = 9;  // the index in `inner` of the step after the scale
  const Stmt* mask_copy = nullptr;
  if (take("copy:global>vector ew:add ")) {
    mask_copy = inner[step];
    step += 2;
  }
  if (take("causal ")) {
    a.causal = true;
    const Stmt& c = *inner[step];
    if (c.origin.size() != 2 || c.origin[0].terms.size() != 1 || c.origin[0].terms[0].first != row_var ||
        c.origin[0].terms[0].second != a.br || c.origin[0].constant != 0 || c.origin[1].terms.size() != 1 ||
        c.origin[1].terms[0].first != key_var || c.origin[1].constant != 0)
      return Err("the causal mask is not at the tile's row and key");
    ++step;
  }
  if (!take(kSoftmax) || at != sig.size()) return Err(absl::StrCat("the online softmax: ", sig));
  a.k = names.arg_index.at(inner[ki]->srcs[0].ref->name);
  a.v = names.arg_index.at(inner[vi]->srcs[0].ref->name);
  a.scale = inner[8]->srcs[1].scalar;
  const Stmt* s_acc = BufferOf(names, inner[6]->dst.name);
  if (!s_acc || s_acc->shape.size() != 2 || s_acc->shape[0] != a.br) return Err("S's tile");
  a.bc = s_acc->shape[1];
  if (a.causal && inner[step - 1]->origin[1].terms[0].second != a.bc) return Err("the causal mask's key step");

  const TileArg& q = k.args[a.q];
  const TileArg& kk = k.args[a.k];
  a.dt = q.dtype;
  if (a.dt != DType::kF16 && a.dt != DType::kBF16 && a.dt != DType::kF32) return Err("Q, K and V are f16, bf16 or f32");
  const size_t r = q.shape.size();
  if (r != a.batch.size() + 2) return Err("Q's rank is the grid's batch dims and a matrix");
  for (size_t i = 0; i < a.batch.size(); ++i)
    if (q.shape[i] != a.batch[i]) return Err("the grid runs over Q's batch dims");
  a.s = q.shape[r - 2];
  a.l = a.k_transposed ? kk.shape[r - 1] : kk.shape[r - 2];
  if (q.shape[r - 1] != a.d || a.s % a.br || a.l % a.bc || a.br % 16 || a.bc % 16 || a.d % 16 ||
      grid.vars.back().extent * a.br != a.s || loop.vars[0].extent * a.bc != a.l)
    return Err("tiles that divide the lengths, in units of 16");
  for (int i : {a.k, a.v, a.y})
    if (k.args[i].dtype != a.dt || k.args[i].shape.size() != r) return Err("Q, K, V and Y of one dtype and rank");

  if (mask_copy) {
    a.mask = names.arg_index.at(mask_copy->srcs[0].ref->name);
    const TileArg& m = k.args[a.mask];
    if (m.dtype != a.dt) return Err("a mask of Q's dtype");
    const std::vector<tile::Affine> starts = StartsOf(*mask_copy->srcs[0].ref, static_cast<int>(m.shape.size()));
    for (size_t i = 0; i < m.shape.size(); ++i) {
      const tile::Affine& st = starts[i];
      if (st.constant != 0 || st.terms.size() > 1) return Err("the mask's tile starts");
      if (st.terms.empty()) {
        if (m.shape[i] != 1) return Err("the mask is read whole along a dimension it does not broadcast");
        a.mask_dims.push_back(-1);
        continue;
      }
      const auto& [var, coeff] = st.terms[0];
      int dim = -2;
      for (size_t b = 0; b < a.batch_vars.size(); ++b)
        if (var == a.batch_vars[b] && coeff == 1) dim = static_cast<int>(b);
      if (var == row_var && coeff == a.br) dim = static_cast<int>(a.batch.size());
      if (var == key_var && coeff == a.bc) dim = static_cast<int>(a.batch.size()) + 1;
      if (dim == -2) return Err("the mask's tile starts");
      a.mask_dims.push_back(dim);
    }
    if (a.mask_dims.empty() || a.mask_dims.back() != static_cast<int>(a.batch.size()) + 1)
      return Err("the mask's last dimension runs over the keys");
  }
  return a;
}

// The kernel: one skeleton for every dtype. @NAME@ and the @...@ constants
// are replaced; `T` is the element type, VEC its elements in 16 bytes; the
// @..._16@ / @..._32@ pieces below are the f16/bf16 and the f32 (tf32)
// forms of the steps that differ.
constexpr char kKernel[] = R"(// @PLAN@
extern "C" __global__ void __launch_bounds__(@THREADS@) @NAME@(@PARAMS@) {
  using T = @T@;
  constexpr int BR = @BR@, BC = @BC@, D = @D@, S = @S@, L = @L@;
  constexpr int VEC = 16 / sizeof(T);  // elements of a 16-byte chunk
  constexpr int LD = D + VEC;          // Q, K and V rows in shared memory, padded: no bank conflicts
@KT_LD@  constexpr int KV_TILE = @KV_TILE@;  // elements of one K or V slot
  constexpr int NT = BC / 8, DT = D / 8;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sq = reinterpret_cast<T*>(smem_raw);
  T* sk = sq + BR * LD;
  T* sv = sk + 2 * KV_TILE;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const long long item = blockIdx.x;
  const int rt = gridDim.y - 1 - blockIdx.y;  // the last row tile first
@BATCH@
  const T* __restrict__ qb = @Q@ + item * (long long)(S * D) + (long long)rt * BR * D;
  const T* __restrict__ kb = @K@ + item * (long long)(L * D);
  const T* __restrict__ vb = @V@ + item * (long long)(L * D);
  T* __restrict__ yb = @Y@ + item * (long long)(S * D) + (long long)rt * BR * D;
  constexpr int CHUNKS = D / VEC;  // 16-byte chunks of a row
  for (int c = threadIdx.x; c < BR * CHUNKS; c += blockDim.x)
    kiln::cp_async<16>(kiln::smem_u32(sq + (c / CHUNKS) * LD + (c % CHUNKS) * VEC), qb + (long long)c * VEC, 16);
  auto load_kv = [&](int j, int slot) {
    T* ks = sk + slot * KV_TILE;
    T* vs = sv + slot * KV_TILE;
    for (int c = threadIdx.x; c < BC * CHUNKS; c += blockDim.x) {
@LOAD_K@
      kiln::cp_async<16>(kiln::smem_u32(vs + (c / CHUNKS) * LD + (c % CHUNKS) * VEC),
                         vb + ((long long)j * BC + c / CHUNKS) * D + (c % CHUNKS) * VEC, 16);
    }
  };
  const int tiles = @TILES@;
  load_kv(0, 0);
  kiln::cp_async_commit();

  float o[DT][4];
  for (int i = 0; i < DT; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float m[2] = {@M_INIT@, @M_INIT@}, l[2] = {0.f, 0.f};
  const int row0 = rt * BR + warp * 16 + g;  // this lane's rows: row0 and row0 + 8
@SETUP@
  for (int j = 0; j < tiles; ++j) {
    if (j + 1 < tiles) load_kv(j + 1, (j + 1) & 1);
    kiln::cp_async_commit();
    kiln::cp_async_wait<1>();
    __syncthreads();
    const T* ks = sk + (j & 1) * KV_TILE;
    const T* vs = sv + (j & 1) * KV_TILE;
    // S = Q K^T
    float s[NT][4];
    for (int n = 0; n < NT; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
@SCORES@
    // The online softmax on this lane's elements: rows row0 + 8 * h (h = e / 2), keys col(n, e).
    float mx[2] = {-INFINITY, -INFINITY};
    for (int n = 0; n < NT; ++n)
      for (int e = 0; e < 4; ++e) {
        const int row = row0 + 8 * (e / 2), col = j * BC + n * 8 + 2 * t + e % 2;
        (void)row;
        (void)col;
        float x = s[n][e] * @SCALE@;
@MASK@
        s[n][e] = x;
        mx[e / 2] = kiln::max_nan(mx[e / 2], x);
      }
    float alpha[2], sum[2] = {0.f, 0.f};
    for (int h = 0; h < 2; ++h) {
      mx[h] = kiln::max_nan(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
      mx[h] = kiln::max_nan(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
      const float mn = kiln::max_nan(m[h], mx[h]);
      alpha[h] = expf(m[h] - mn);
      m[h] = mn;
    }
@PROBS@
    for (int h = 0; h < 2; ++h) {
      sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 1);
      sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 2);
      l[h] = l[h] * alpha[h] + sum[h];
    }
    for (int i = 0; i < DT; ++i) {
      o[i][0] *= alpha[0];
      o[i][1] *= alpha[0];
      o[i][2] *= alpha[1];
      o[i][3] *= alpha[1];
    }
@PV@
    __syncthreads();  // the slot is refilled two tiles on
  }
  for (int i = 0; i < DT; ++i)
    for (int h = 0; h < 2; ++h) {
      T* out = yb + (long long)(warp * 16 + g + 8 * h) * D + i * 8 + 2 * t;
      out[0] = kiln::from_f32<T>(o[i][2 * h] / l[h]);
      out[1] = kiln::from_f32<T>(o[i][2 * h + 1] / l[h]);
    }
}

)";

// f16 and bf16: mma.sync m16n8k16, fragments by ldmatrix, P packed in
// registers as the A fragments of P V (an m16n8k16 accumulator pair is one).
constexpr char kSetup16[] = R"(  uint32_t qf[D / 16][4];
  // Two values in T in one register, the lower at the lower column.
  auto pack2 = [](float lo, float hi) {
    const T a = kiln::from_f32<T>(lo), b = kiln::from_f32<T>(hi);
    unsigned short ua, ub;
    memcpy(&ua, &a, 2);
    memcpy(&ub, &b, 2);
    return uint32_t(ua) | (uint32_t(ub) << 16);
  };)";
constexpr char kScores16[] = R"(    if (j == 0)
      for (int kk = 0; kk < D / 16; ++kk)
        kiln::ldmatrix_x4(qf[kk], kiln::smem_u32(sq + (warp * 16 + (lane % 8) + ((lane / 8) % 2) * 8) * LD +
                                                  kk * 16 + (lane / 16) * 8));
    for (int kk = 0; kk < D / 16; ++kk)
      for (int n2 = 0; n2 < BC / 16; ++n2) {
        uint32_t b[4];
@LOAD_KF@
        const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
        kiln::@MMA@(s[2 * n2], qf[kk], b0);
        kiln::@MMA@(s[2 * n2 + 1], qf[kk], b1);
      })";
constexpr char kProbs16[] = R"(    uint32_t p[BC / 16][4];  // P as A fragments of P V
    for (int n = 0; n < NT; ++n) {
      float e4[4];
      for (int e = 0; e < 4; ++e) {
        e4[e] = expf(s[n][e] - m[e / 2]);
        sum[e / 2] += e4[e];
      }
      p[n / 2][(n % 2) * 2 + 0] = pack2(e4[0], e4[1]);
      p[n / 2][(n % 2) * 2 + 1] = pack2(e4[2], e4[3]);
    })";
constexpr char kPv16[] = R"(    // O += P V: V's fragments by ldmatrix.trans (keys are the k dimension).
    for (int kk = 0; kk < BC / 16; ++kk)
      for (int n2 = 0; n2 < D / 16; ++n2) {
        uint32_t b[4];
        kiln::ldmatrix_x4_trans(b, kiln::smem_u32(vs + (kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8) * LD +
                                                   n2 * 16 + (lane / 16) * 8));
        const uint32_t b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
        kiln::@MMA@(o[2 * n2], p[kk], b0);
        kiln::@MMA@(o[2 * n2 + 1], p[kk], b1);
      })";

// f32: mma.sync m16n8k8 on tf32 (as the f32 GEMMs), fragments read from
// shared memory with scalar loads, and P passed from the accumulator's
// layout to the A operand's through the warp's own rows of shared memory
// (the tf32 fragments of the two do not coincide).
constexpr char kSetup32[] = R"(  uint32_t qf[D / 8][4];
  auto tf32 = [](float x) { return kiln::to_tf32(__float_as_uint(x)); };
  constexpr int PLD = BC + 4;                               // a warp's rows of P
  float* pw = sv + 2 * KV_TILE + warp * 16 * PLD;           // this warp's rows of P
  const int r0 = warp * 16 + g;                             // this lane's rows in the tile: r0 and r0 + 8)";
constexpr char kScores32[] = R"(    if (j == 0)
      for (int kk = 0; kk < D / 8; ++kk) {
        qf[kk][0] = tf32(sq[r0 * LD + kk * 8 + t]);
        qf[kk][1] = tf32(sq[(r0 + 8) * LD + kk * 8 + t]);
        qf[kk][2] = tf32(sq[r0 * LD + kk * 8 + t + 4]);
        qf[kk][3] = tf32(sq[(r0 + 8) * LD + kk * 8 + t + 4]);
      }
    for (int kk = 0; kk < D / 8; ++kk)
      for (int n = 0; n < NT; ++n) {
        uint32_t b[2];
@LOAD_KF@
        kiln::mma_tf32(s[n], qf[kk], b);
      })";
constexpr char kProbs32[] = R"(    for (int n = 0; n < NT; ++n)
      for (int e = 0; e < 4; ++e) {
        const float p = expf(s[n][e] - m[e / 2]);
        sum[e / 2] += p;
        pw[(g + 8 * (e / 2)) * PLD + n * 8 + 2 * t + e % 2] = p;
      }
    __syncwarp();)";
constexpr char kPv32[] = R"(    // O += P V: P's A fragments from the warp's rows, V's B fragments (keys the k dimension).
    for (int kk = 0; kk < BC / 8; ++kk) {
      const uint32_t pa[4] = {tf32(pw[g * PLD + kk * 8 + t]), tf32(pw[(g + 8) * PLD + kk * 8 + t]),
                              tf32(pw[g * PLD + kk * 8 + t + 4]), tf32(pw[(g + 8) * PLD + kk * 8 + t + 4])};
      for (int n = 0; n < DT; ++n) {
        const uint32_t b[2] = {tf32(vs[(kk * 8 + t) * LD + n * 8 + g]), tf32(vs[(kk * 8 + t + 4) * LD + n * 8 + g])};
        kiln::mma_tf32(o[n], pa, b);
      }
    })";

}  // namespace

absl::StatusOr<CudaKernel> EmitAttention(const tile::TileKernel& k, const CudaArch& arch) {
  const Names names(k);
  KILN_ASSIGN_OR_RETURN(Attention a, Match(k, names));
  // Its f32 products are tf32's alone: under 3xTF32 the attention is split
  // back into GEMMs that split theirs.
  if (a.dt == DType::kF32 && arch.split_tf32)
    return absl::UnimplementedError("the attention kernel's f32 products are tf32 (--fp32-products=3xtf32 splits it back)");
  std::vector<bool> used(k.args.size(), false);
  MarkUsed(k.body, names, &used);
  KILN_ASSIGN_OR_RETURN(std::string params, ParamList(k, used));
  KILN_ASSIGN_OR_RETURN(std::string ct, CType(a.dt));
  auto arg = [&](int i) { return Ident(k.args[i].name); };

  // K's rows (or K^T's columns: BC keys of each of D rows, as many 16-byte
  // chunks as K's tile) into the slot, and its fragments as B of S = Q K^T.
  const bool f32 = a.dt == DType::kF32;
  const std::string load_k =
      a.k_transposed
          ? R"(      kiln::cp_async<16>(kiln::smem_u32(ks + (c / (BC / VEC)) * KT_LD + (c % (BC / VEC)) * VEC),
                         kb + (long long)(c / (BC / VEC)) * L + (long long)j * BC + (c % (BC / VEC)) * VEC, 16);)"
          : R"(      kiln::cp_async<16>(kiln::smem_u32(ks + (c / CHUNKS) * LD + (c % CHUNKS) * VEC),
                         kb + ((long long)j * BC + c / CHUNKS) * D + (c % CHUNKS) * VEC, 16);)";
  std::string load_kf;
  if (f32 && a.k_transposed) {
    load_kf = R"(        b[0] = tf32(ks[(kk * 8 + t) * KT_LD + n * 8 + g]);
        b[1] = tf32(ks[(kk * 8 + t + 4) * KT_LD + n * 8 + g]);)";
  } else if (f32) {
    load_kf = R"(        b[0] = tf32(ks[(n * 8 + g) * LD + kk * 8 + t]);
        b[1] = tf32(ks[(n * 8 + g) * LD + kk * 8 + t + 4]);)";
  } else if (a.k_transposed) {
    load_kf = R"(        kiln::ldmatrix_x4_trans(b, kiln::smem_u32(ks + (kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8) * KT_LD +
                                                   n2 * 16 + (lane / 16) * 8));)";
  } else {
    load_kf = R"(        kiln::ldmatrix_x4(b, kiln::smem_u32(ks + (n2 * 16 + (lane % 8) + (lane / 16) * 8) * LD + kk * 16 +
                                             ((lane / 8) % 2) * 8));)";
  }

  // The batch item's index along each batch dim (for the mask), and the mask's element.
  std::string batch, mask;
  if (a.mask >= 0) {
    int64_t stride = 1;
    std::vector<std::string> idx(a.batch.size());
    for (int b = static_cast<int>(a.batch.size()) - 1; b >= 0; --b) {
      // Only the batch dims the mask does not broadcast over.
      if (std::find(a.mask_dims.begin(), a.mask_dims.end(), b) != a.mask_dims.end())
        idx[b] = absl::StrCat("  const long long ", Ident(a.batch_vars[b]), " = item / ", stride, " % ", a.batch[b],
                              ";\n");
      stride *= a.batch[b];
    }
    batch = absl::StrJoin(idx, "");
    const TileArg& m = k.args[a.mask];
    std::vector<std::string> terms;
    int64_t mstride = 1;
    for (int i = static_cast<int>(m.shape.size()) - 1; i >= 0; --i) {
      const int dim = a.mask_dims[i];
      if (dim >= 0) {
        const std::string index = dim < static_cast<int>(a.batch.size())   ? Ident(a.batch_vars[dim])
                                  : dim == static_cast<int>(a.batch.size()) ? "(long long)row"
                                                                            : "(long long)col";
        terms.push_back(absl::StrCat(index, " * ", mstride));
      }
      mstride *= m.shape[i];
    }
    mask = absl::StrCat("        x += kiln::to_f32(", arg(a.mask), "[", absl::StrJoin(terms, " + "), "]);\n");
  }
  if (a.causal) absl::StrAppend(&mask, "        if (col > row) x = -INFINITY;\n");
  if (batch.empty()) batch = "  // (no mask reads the batch dims)\n";
  if (!mask.empty() && mask.back() == '\n') mask.pop_back();
  if (!batch.empty() && batch.back() == '\n') batch.pop_back();

  const int64_t threads = a.br / 16 * 32;
  // A slot holds a K or V tile, BC x (D + pad), or K^T's, D x (BC + pad):
  // rows padded by 16 bytes. The f32 form adds each warp's 16 rows of P.
  const int64_t pad = 16 / Bytes(a.dt);
  const int64_t kv_tile = a.k_transposed ? std::max(a.bc * (a.d + pad), a.d * (a.bc + pad)) : a.bc * (a.d + pad);
  const int64_t smem =
      (a.br * (a.d + pad) + 4 * kv_tile + (f32 ? threads / 32 * 16 * (a.bc + 4) : 0)) * Bytes(a.dt);
  int64_t items = 1;
  for (int64_t b : a.batch) items *= b;
  const std::string tiles =
      a.causal ? absl::StrCat("min(L / BC, ((rt + 1) * BR - 1) / BC + 1)  /* key tiles up to the diagonal */")
               : "L / BC";

  CudaKernel out;
  out.name = Ident(k.name);
  out.matrix = true;
  out.plan = absl::StrCat("cuda attention ", a.br, "x", a.bc, " tiles, head ", a.d, ", ", threads / 32,
                          f32 ? " warps, mma.sync m16n8k8 (tf32), P through shared memory" : " warps, mma.sync m16n8k16",
                          ", online softmax in registers, K and V in 2 cp.async slots",
                          a.k_transposed ? ", K given transposed" : "",
                          a.causal ? ", key tiles past the diagonal skipped" : "", a.mask >= 0 ? ", additive mask" : "");
  const std::string function = out.name + "_sm80";
  std::string src = absl::StrReplaceAll(
      kKernel, {{"@SETUP@", f32 ? kSetup32 : kSetup16},
                {"@SCORES@", f32 ? kScores32 : kScores16},
                {"@PROBS@", f32 ? kProbs32 : kProbs16},
                {"@PV@", f32 ? kPv32 : kPv16}});
  src = absl::StrReplaceAll(
      src, {{"@PLAN@", out.plan},
            {"@NAME@", function},
            {"@PARAMS@", params},
            {"@THREADS@", absl::StrCat(threads)},
            {"@T@", ct},
            {"@BR@", absl::StrCat(a.br)},
            {"@BC@", absl::StrCat(a.bc)},
            {"@D@", absl::StrCat(a.d)},
            {"@S@", absl::StrCat(a.s)},
            {"@L@", absl::StrCat(a.l)},
            {"@BATCH@", batch},
            {"@Q@", arg(a.q)},
            {"@K@", arg(a.k)},
            {"@V@", arg(a.v)},
            {"@Y@", arg(a.y)},
            {"@LOAD_K@", load_k},
            {"@LOAD_KF@", load_kf},
            {"@TILES@", tiles},
            {"@M_INIT@", FloatLit(a.m_init)},
            {"@SCALE@", FloatLit(a.scale)},
            {"@MASK@", mask},
            {"@KT_LD@", a.k_transposed ? "  constexpr int KT_LD = BC + VEC;  // rows of a K^T tile\n" : ""},
            {"@KV_TILE@", a.k_transposed ? absl::StrCat(kv_tile) : "BC * LD"},
            {"@MMA@", a.dt == DType::kBF16 ? "mma_bf16" : "mma_f16"}});
  out.source = std::move(src);
  out.variants.push_back(CudaVariant{function, 80, {items, a.s / a.br, 1}, threads, smem});
  return out;
}

}  // namespace kiln::target::cuda::internal
