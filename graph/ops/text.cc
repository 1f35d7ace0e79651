//===- text.cc - StringNormalizer and TfIdfVectorizer ---------------------===//
//
// The operators on text: StringNormalizer (case mapping and stopwords) and
// TfIdfVectorizer (n-gram counts over an integer or string pool).
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "graph/ir/dtype_dispatch.h"
#include "graph/ops/kernel_util.h"
#include "graph/ops/op_registry.h"
#include "graph/ops/op_table.h"
#include "graph/ops/operand_checks.h"
#include "graph/support/status.h"

namespace kiln {
namespace {

//===--- StringNormalizer -------------------------------------------------===//

// Simple case mapping of one code point: ASCII, Latin-1, Latin Extended-A,
// Greek and Cyrillic.
char32_t MapCase(char32_t c, bool upper) {
  if (upper) {
    if (c >= 'a' && c <= 'z') return c - 32;
    if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 32;
    if (c == 0xFF) return 0x178;
    if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
      bool odd_lower = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
      if (odd_lower ? (c % 2 == 0) : (c % 2 == 1)) return c - 1;
      return c;
    }
    if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 32;
    if (c == 0x3C2) return 0x3A3;
    if (c >= 0x430 && c <= 0x44F) return c - 32;
    if (c >= 0x450 && c <= 0x45F) return c - 80;
    return c;
  }
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
  if (c == 0x178) return 0xFF;
  if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
    bool odd_lower = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    if (odd_lower ? (c % 2 == 1) : (c % 2 == 0)) return c + 1;
    return c;
  }
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  return c;
}

std::string ChangeCase(const std::string& s, bool upper) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char b = static_cast<unsigned char>(s[i]);
    char32_t c;
    size_t n;
    if (b < 0x80) { c = b; n = 1; }
    else if ((b & 0xE0) == 0xC0 && i + 1 < s.size()) { c = ((b & 0x1F) << 6) | (s[i + 1] & 0x3F); n = 2; }
    else {
      // Other sequences (3- and 4-byte, or malformed) are copied unchanged.
      size_t len = (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 1;
      len = std::min(len, s.size() - i);
      out.append(s, i, len);
      i += len;
      continue;
    }
    char32_t m = MapCase(c, upper);
    if (m < 0x80) out.push_back(static_cast<char>(m));
    else {
      out.push_back(static_cast<char>(0xC0 | (m >> 6)));
      out.push_back(static_cast<char>(0x80 | (m & 0x3F)));
    }
    i += n;
  }
  return out;
}

template <typename Ctx>
absl::Status CheckStringNormalizerAttrs(const Ctx& ctx) {
  std::string action = ctx.node().GetString("case_change_action", "NONE");
  if (action != "NONE" && action != "LOWER" && action != "UPPER")
    return ctx.Error("case_change_action must be NONE, LOWER or UPPER, got '", action, "'");
  return absl::OkStatus();
}

absl::Status InferStringNormalizer(InferContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckStringNormalizerAttrs(ctx));
  const Type& x = ctx.input_type(0);
  if (DTypeIsNot(x, {DType::kString})) return ctx.Error("expects a string input, got ", DTypeName(x.dtype()));
  if (x.is_tensor() && x.shape().ranked()) {
    const Shape& s = x.shape();
    if (s.rank() == 1) {
      ctx.set_output(0, Type::Tensor(DType::kString, Shape({Dim()})));
      return absl::OkStatus();
    }
    if (s.rank() == 2 && !(s[0].is_static() && s[0].value() != 1)) {
      ctx.set_output(0, Type::Tensor(DType::kString, Shape({Dim(1), Dim()})));
      return absl::OkStatus();
    }
    return ctx.Error("expects a [C] or [1, C] input, got ", s.ToString());
  }
  ctx.set_output(0, Type::Tensor(DType::kString, Shape()));
  return absl::OkStatus();
}

absl::Status StringNormalizer(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(CheckStringNormalizerAttrs(ctx));
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DType::kString) return ctx.Error("expects a string input, got ", DTypeName(x.dtype()));
  if (!(x.rank() == 1 || (x.rank() == 2 && x.dim(0) == 1)))
    return ctx.Error("expects a [C] or [1, C] input, got ", DimsText(x.dims()));
  const Node& n = ctx.node();
  std::string action = n.GetString("case_change_action", "NONE");
  bool sensitive = n.GetInt("is_case_sensitive", 0) != 0;
  std::vector<std::string> stop;
  if (const Attribute* a = n.attr("stopwords")) stop = a->strings();
  if (!sensitive)
    for (std::string& s : stop) s = ChangeCase(s, false);
  std::sort(stop.begin(), stop.end());
  std::vector<std::string> kept;
  const std::string* p = x.data<std::string>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const std::string& key = sensitive ? p[i] : ChangeCase(p[i], false);
    if (std::binary_search(stop.begin(), stop.end(), key)) continue;
    if (action == "LOWER") kept.push_back(ChangeCase(p[i], false));
    else if (action == "UPPER") kept.push_back(ChangeCase(p[i], true));
    else kept.push_back(p[i]);
  }
  if (kept.empty()) kept.push_back("");
  int64_t c = static_cast<int64_t>(kept.size());
  Tensor& y = ctx.AllocOutput(0, DType::kString, x.rank() == 1 ? Dims{c} : Dims{1, c});
  std::move(kept.begin(), kept.end(), y.data<std::string>());
  return absl::OkStatus();
}

//===--- TfIdfVectorizer --------------------------------------------------===//

struct TfIdfConfig {
  int64_t min_n = 0, max_n = 0, max_skip = 0;
  enum { kTF, kIDF, kTFIDF } mode = kTF;
  int64_t out_size = 0;
  std::vector<int64_t> indexes;  // output coordinate of each pool n-gram
  std::vector<float> weights;
  // Pool n-grams of each length n (1-based), with their pool ids.
  std::vector<std::map<std::vector<int64_t>, int64_t>> pool_ints;
  std::vector<std::map<std::vector<std::string>, int64_t>> pool_strings;
  bool strings = false;
};

template <typename Ctx>
absl::StatusOr<TfIdfConfig> ReadTfIdf(const Ctx& ctx) {
  const Node& n = ctx.node();
  TfIdfConfig c;
  c.min_n = n.GetInt("min_gram_length", 0);
  c.max_n = n.GetInt("max_gram_length", 0);
  c.max_skip = n.GetInt("max_skip_count", 0);
  if (c.min_n < 1 || c.max_n < c.min_n)
    return ctx.Error("gram lengths must satisfy 1 <= min_gram_length <= max_gram_length, got ", c.min_n, " and ", c.max_n);
  if (c.max_skip < 0) return ctx.Error("max_skip_count is negative");
  std::string mode = n.GetString("mode", "");
  if (mode == "TF") c.mode = TfIdfConfig::kTF;
  else if (mode == "IDF") c.mode = TfIdfConfig::kIDF;
  else if (mode == "TFIDF") c.mode = TfIdfConfig::kTFIDF;
  else return ctx.Error("mode must be TF, IDF or TFIDF, got '", mode, "'");
  std::vector<int64_t> counts = n.GetInts("ngram_counts");
  c.indexes = n.GetInts("ngram_indexes");
  c.weights = n.GetFloats("weights");
  bool has_ints = n.has_attr("pool_int64s"), has_strings = n.has_attr("pool_strings");
  if (has_ints == has_strings) return ctx.Error("exactly one of pool_int64s and pool_strings must be set");
  c.strings = has_strings;
  std::vector<int64_t> pi = has_ints ? n.GetInts("pool_int64s") : std::vector<int64_t>{};
  std::vector<std::string> ps = has_strings ? n.attr("pool_strings")->strings() : std::vector<std::string>{};
  int64_t pool = static_cast<int64_t>(has_ints ? pi.size() : ps.size());
  if (counts.empty()) return ctx.Error("ngram_counts is empty");
  c.pool_ints.resize(counts.size() + 1);
  c.pool_strings.resize(counts.size() + 1);
  int64_t id = 0;
  for (size_t g = 0; g < counts.size(); ++g) {
    int64_t len = static_cast<int64_t>(g) + 1;
    int64_t start = counts[g], end = g + 1 < counts.size() ? counts[g + 1] : pool;
    if (start < 0 || end < start || end > pool || (end - start) % len != 0)
      return ctx.Error("ngram_counts does not split the pool into whole ", len, "-grams");
    for (int64_t i = start; i < end; i += len, ++id) {
      if (has_ints) c.pool_ints[len].emplace(std::vector<int64_t>(pi.begin() + i, pi.begin() + i + len), id);
      else c.pool_strings[len].emplace(std::vector<std::string>(ps.begin() + i, ps.begin() + i + len), id);
    }
  }
  if (static_cast<int64_t>(c.indexes.size()) != id)
    return ctx.Error("ngram_indexes has ", c.indexes.size(), " entries but the pool holds ", id, " n-grams");
  if (!c.weights.empty() && c.weights.size() != c.indexes.size())
    return ctx.Error("weights has ", c.weights.size(), " entries, expected ", c.indexes.size());
  for (int64_t i : c.indexes) {
    if (i < 0) return ctx.Error("ngram_indexes has a negative entry");
    c.out_size = std::max(c.out_size, i + 1);
  }
  return c;
}

absl::Status InferTfIdfVectorizer(InferContext& ctx) {
  KILN_ASSIGN_OR_RETURN(TfIdfConfig c, ReadTfIdf(ctx));
  const Type& x = ctx.input_type(0);
  if (c.strings ? DTypeIsNot(x, {DType::kString}) : DTypeIsNot(x, {DType::kI32, DType::kI64}))
    return ctx.Error("the input dtype ", DTypeName(x.dtype()), " does not match the pool");
  if (x.is_tensor() && x.shape().ranked()) {
    if (x.shape().rank() == 1) ctx.set_output(0, Type::Tensor(DType::kF32, Shape({Dim(c.out_size)})));
    else if (x.shape().rank() == 2) ctx.set_output(0, Type::Tensor(DType::kF32, Shape({x.shape()[0], Dim(c.out_size)})));
    else return ctx.Error("expects a [C] or [N, C] input, got ", x.shape().ToString());
  } else {
    ctx.set_output(0, Type::Tensor(DType::kF32, Shape()));
  }
  return absl::OkStatus();
}

absl::Status TfIdfVectorizer(KernelContext& ctx) {
  KILN_ASSIGN_OR_RETURN(TfIdfConfig c, ReadTfIdf(ctx));
  const Tensor& x = ctx.input(0);
  if (c.strings ? x.dtype() != DType::kString : (x.dtype() != DType::kI32 && x.dtype() != DType::kI64))
    return ctx.Error("the input dtype ", DTypeName(x.dtype()), " does not match the pool");
  if (x.rank() != 1 && x.rank() != 2) return ctx.Error("expects a [C] or [N, C] input, got ", DimsText(x.dims()));
  int64_t rows = x.rank() == 2 ? x.dim(0) : 1;
  int64_t cols = x.rank() == 2 ? x.dim(1) : (x.rank() == 1 ? x.dim(0) : 0);
  Dims ydims = x.rank() == 2 ? Dims{rows, c.out_size} : Dims{c.out_size};
  KILN_RETURN_IF_ERROR(CheckOutputSize(ctx, ydims));
  Tensor& y = ctx.AllocOutput(0, DType::kF32, ydims);
  float* out = y.data<float>();
  std::vector<int64_t> ints = c.strings ? std::vector<int64_t>{} : ToInt64Vector(x);
  const std::string* strs = c.strings ? x.data<std::string>() : nullptr;
  std::vector<int64_t> counts(c.indexes.size());
  std::vector<int64_t> key_i;
  std::vector<std::string> key_s;
  int64_t max_len = std::min<int64_t>(c.max_n, static_cast<int64_t>(c.pool_ints.size()) - 1);
  for (int64_t r = 0; r < rows; ++r) {
    std::fill(counts.begin(), counts.end(), 0);
    for (int64_t len = c.min_n; len <= max_len; ++len) {
      int64_t skips = len == 1 ? 0 : c.max_skip;
      for (int64_t skip = 0; skip <= skips; ++skip) {
        int64_t step = skip + 1;
        for (int64_t start = 0; start + (len - 1) * step < cols; ++start) {
          int64_t id = -1;
          if (c.strings) {
            key_s.clear();
            for (int64_t j = 0; j < len; ++j) key_s.push_back(strs[r * cols + start + j * step]);
            auto it = c.pool_strings[len].find(key_s);
            if (it != c.pool_strings[len].end()) id = it->second;
          } else {
            key_i.clear();
            for (int64_t j = 0; j < len; ++j) key_i.push_back(ints[r * cols + start + j * step]);
            auto it = c.pool_ints[len].find(key_i);
            if (it != c.pool_ints[len].end()) id = it->second;
          }
          if (id >= 0) ++counts[id];
        }
      }
    }
    float* row = out + r * c.out_size;
    for (size_t id = 0; id < counts.size(); ++id) {
      if (counts[id] == 0) continue;
      float w = c.weights.empty() ? 1.f : c.weights[id];
      float v = c.mode == TfIdfConfig::kTF ? static_cast<float>(counts[id])
                : c.mode == TfIdfConfig::kIDF ? w
                                              : static_cast<float>(counts[id]) * w;
      row[c.indexes[id]] += v;
    }
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterTextOps(OpRegistry& r) {
  r.Register("StringNormalizer").Inputs(1).Outputs(1).Class(OpClass::kOther).Since(10)
      .Attr("case_change_action", AttrKind::kString, "NONE")
      .Attr("is_case_sensitive", AttrKind::kInt, "0")
      .Attr("locale", AttrKind::kString, "(ignored: built-in case mapping)")
      .Attr("stopwords", AttrKind::kStrings, "[]")
      .Infer(InferStringNormalizer).Kernel(StringNormalizer);
  r.Register("TfIdfVectorizer").Inputs(1).Outputs(1).Class(OpClass::kOther).Since(9)
      .RequiredAttr("max_gram_length", AttrKind::kInt)
      .RequiredAttr("min_gram_length", AttrKind::kInt)
      .RequiredAttr("max_skip_count", AttrKind::kInt)
      .RequiredAttr("mode", AttrKind::kString)
      .RequiredAttr("ngram_counts", AttrKind::kInts)
      .RequiredAttr("ngram_indexes", AttrKind::kInts)
      .Attr("pool_int64s", AttrKind::kInts, "(one of the pools)")
      .Attr("pool_strings", AttrKind::kStrings, "(one of the pools)")
      .Attr("weights", AttrKind::kFloats, "[1, ...]")
      .Infer(InferTfIdfVectorizer).Kernel(TfIdfVectorizer);
}

}  // namespace kiln
