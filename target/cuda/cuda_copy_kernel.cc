//===- cuda_copy_kernel.cc - Data movement as strided-copy CUDA kernels ----===//
#include "target/cuda/cuda_copy_kernel.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "graph/passes/rewrite_helpers.h"
#include "target/cuda/cuda_resize_pieces.h"

namespace kiln::target::cuda {
namespace {

constexpr int64_t kThreads = 256;
// Blocks of a grid-stride loop: enough to fill 132 SMs 16 times over.
constexpr int64_t kMaxBlocks = 132 * 16;

const char* UnsignedOfWidth(int64_t bytes) {
  switch (bytes) {
    case 1: return "unsigned char";
    case 2: return "unsigned short";
    case 8: return "unsigned long long";
    default: return "unsigned int";
  }
}

}  // namespace

uint64_t StableHash(const std::string& bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

bool IsCopyOp(const Node& n) {
  // Views (kViewOps) are no copy on the GPU.
  return (HasCopyPieces(n) && !IsOneOf(n, kViewOps)) || IsScatterCopy(n) || (IsResizeCopy(n) && ResizeCopyBlocker(n).empty());
}

absl::StatusOr<std::vector<CopyPiece>> DevicePiecesOf(const Node& n) {
  if (IsResizeCopy(n)) return ResizePiecesOf(n);
  return IsScatterCopy(n) ? ScatterPiecesOf(n) : CopyPiecesOf(n);
}

CopyLaunch MakeCopyLaunch(CopyPiece piece, int64_t element_bytes, const std::string& what) {
  SimplifyPiece(piece);
  CopyLaunch l;
  l.element_bytes = element_bytes;
  l.elements = piece.elements();
  // 32-bit index arithmetic when every offset fits.
  int64_t reach = std::max<int64_t>(l.elements, 1) + std::abs(piece.src_base) + std::abs(piece.dst_base);
  for (size_t i = 0; i < piece.dims.size(); ++i)
    reach += (piece.dims[i] - 1) * (std::abs(piece.src_strides[i]) + std::abs(piece.dst_strides[i]));
  for (int64_t t : piece.table) reach = std::max(reach, t + std::abs(piece.src_base) + l.elements);
  if (piece.index_input >= 0) reach += piece.index_extent * piece.index_scale;
  const bool wide = reach >= (int64_t{1} << 31);
  const char* idx = wide ? "long long" : "int";
  const char* elem = UnsignedOfWidth(element_bytes);

  std::string body;
  absl::StrAppend(&body, "  // ", l.elements, " elements of ", element_bytes, " bytes; dims [",
                  absl::StrJoin(piece.dims, ", "), "], source strides [", absl::StrJoin(piece.src_strides, ", "),
                  "] from ", piece.src_base, ", destination strides [", absl::StrJoin(piece.dst_strides, ", "),
                  "] from ", piece.dst_base, "\n");
  absl::StrAppend(&body, "  const ", idx, " n = ", l.elements, ";\n");
  absl::StrAppend(&body, "  for (", idx, " i = (", idx, ")blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (", idx,
                  ")gridDim.x * blockDim.x) {\n");
  const int nd = static_cast<int>(piece.dims.size());
  if (nd > 0) absl::StrAppend(&body, "    ", idx, " r = i, s = ", piece.src_base, ", d = ", piece.dst_base, ";\n");
  else absl::StrAppend(&body, "    ", idx, " s = ", piece.src_base, ", d = ", piece.dst_base, ";\n");
  for (int i = nd - 1; i >= 0; --i) {
    const bool table = i == piece.table_dim;
    std::string coord = i == 0 ? "r" : "q";
    if (i > 0) absl::StrAppend(&body, "    { const ", idx, " q = r % ", piece.dims[i], "; r /= ", piece.dims[i], ";");
    else absl::StrAppend(&body, "    {");
    if (table && piece.index_input >= 0)
      absl::StrAppend(&body, " { long long v = (long long)index[", coord, "]; v = v < 0 ? v + ", piece.index_extent,
                      " : v; v = v < 0 ? 0 : v > ", piece.index_extent - 1, " ? ", piece.index_extent - 1, " : v; s += (",
                      idx, ")v * ", piece.index_scale, "; }");
    else if (table) absl::StrAppend(&body, " s += TABLE[", coord, "];");
    else if (piece.src_strides[i] != 0) absl::StrAppend(&body, " s += ", coord, " * ", piece.src_strides[i], ";");
    if (piece.dst_strides[i] != 0) absl::StrAppend(&body, " d += ", coord, " * ", piece.dst_strides[i], ";");
    absl::StrAppend(&body, " }\n");
  }
  if (piece.scatter)  // the element's own index moves its destination
    absl::StrAppend(&body, "    { long long v = (long long)index[i]; v = v < 0 ? v + ", piece.index_extent,
                    " : v; v = v < 0 ? 0 : v > ", piece.index_extent - 1, " ? ", piece.index_extent - 1, " : v; d += (",
                    idx, ")v * ", piece.index_scale, "; }\n");
  absl::StrAppend(&body, "    dst[d] = src[s];\n  }\n");
  std::string table_text;
  if (piece.table_dim >= 0 && piece.index_input < 0) {
    table_text = absl::StrCat("[", piece.table.size(), "] = {");
    for (size_t j = 0; j < piece.table.size(); ++j)
      absl::StrAppend(&table_text, j ? "," : "", j % 16 == 0 ? "\n    " : " ", piece.table[j]);
    absl::StrAppend(&table_text, "}");
  }
  std::string params = absl::StrCat(elem, "* __restrict__ dst, const ", elem, "* __restrict__ src");
  if (piece.index_input >= 0)
    absl::StrAppend(&params, ", const ", piece.index_bytes == 4 ? "int" : "long long", "* __restrict__ index");
  const uint64_t h = StableHash(absl::StrCat(params, "\n", table_text, "\n", body));
  l.function = absl::StrFormat("kiln_copy_%016x", h);
  std::string table_name = l.function + "_table";
  std::string src;
  absl::StrAppend(&src, "// ", what.empty() ? "strided copy" : what, "\n");
  if (!table_text.empty()) absl::StrAppend(&src, "__device__ const ", idx, " ", table_name, table_text, ";\n");
  absl::StrAppend(&src, "extern \"C\" __global__ void __launch_bounds__(", kThreads, ") ", l.function, "(", params,
                  ") {\n");
  std::string b = body;
  for (size_t pos; (pos = b.find("TABLE")) != std::string::npos;) b.replace(pos, 5, table_name);
  absl::StrAppend(&src, b, "}\n");
  l.source = std::move(src);
  l.threads = kThreads;
  l.blocks = std::clamp<int64_t>((l.elements + kThreads - 1) / kThreads, 1, kMaxBlocks);
  l.piece = std::move(piece);
  return l;
}

absl::StatusOr<int64_t> CopyElementBytes(const Node& n) {
  const DType dt = n.output(0)->type().dtype();
  const int64_t es = static_cast<int64_t>(DTypeSize(dt));
  if (dt == DType::kString || es == 0 || es > 8)
    return absl::FailedPreconditionError(absl::StrCat("elements of ", DTypeName(dt), " do not live on the device"));
  return es;
}

}  // namespace kiln::target::cuda
