//===- printer.cc - The .kir text form of the graph IR: printing ----------===//
#include "graph/ir/printer.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "graph/support/checked_math.h"
#include "graph/support/read_file.h"
#include "graph/support/status.h"

namespace kiln {

//===----------------------------------------------------------------------===//
// Stable tensor hash
//===----------------------------------------------------------------------===//

namespace {

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
constexpr uint64_t kFnvPrime = 0x100000001b3ull;

uint64_t Fnv1a(uint64_t h, const void* data, size_t n) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= kFnvPrime;
  }
  return h;
}

uint64_t FnvU64(uint64_t h, uint64_t v) {
  unsigned char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
  return Fnv1a(h, b, 8);
}

// XXH64 (Yann Collet's xxHash, 64-bit variant), reading little-endian words.
constexpr uint64_t kP1 = 11400714785074694791ull;
constexpr uint64_t kP2 = 14029467366897019727ull;
constexpr uint64_t kP3 = 1609587929392839161ull;
constexpr uint64_t kP4 = 9650029242287828579ull;
constexpr uint64_t kP5 = 2870177450012600261ull;

inline uint64_t Rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

inline uint64_t Read64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

inline uint32_t Read32(const unsigned char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}

inline uint64_t XxRound(uint64_t acc, uint64_t input) {
  acc += input * kP2;
  acc = Rotl(acc, 31);
  return acc * kP1;
}

inline uint64_t XxMerge(uint64_t acc, uint64_t val) {
  acc ^= XxRound(0, val);
  return acc * kP1 + kP4;
}

uint64_t Xxh64(const void* data, size_t len, uint64_t seed) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  const unsigned char* end = p + len;
  uint64_t h;
  if (len >= 32) {
    uint64_t v1 = seed + kP1 + kP2, v2 = seed + kP2, v3 = seed, v4 = seed - kP1;
    const unsigned char* limit = end - 32;
    do {
      v1 = XxRound(v1, Read64(p));
      v2 = XxRound(v2, Read64(p + 8));
      v3 = XxRound(v3, Read64(p + 16));
      v4 = XxRound(v4, Read64(p + 24));
      p += 32;
    } while (p <= limit);
    h = Rotl(v1, 1) + Rotl(v2, 7) + Rotl(v3, 12) + Rotl(v4, 18);
    h = XxMerge(h, v1);
    h = XxMerge(h, v2);
    h = XxMerge(h, v3);
    h = XxMerge(h, v4);
  } else {
    h = seed + kP5;
  }
  h += static_cast<uint64_t>(len);
  while (p + 8 <= end) {
    h ^= XxRound(0, Read64(p));
    h = Rotl(h, 27) * kP1 + kP4;
    p += 8;
  }
  if (p + 4 <= end) {
    h ^= static_cast<uint64_t>(Read32(p)) * kP1;
    h = Rotl(h, 23) * kP2 + kP3;
    p += 4;
  }
  while (p < end) {
    h ^= static_cast<uint64_t>(*p) * kP5;
    h = Rotl(h, 11) * kP1;
    ++p;
  }
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

}  // namespace

uint64_t StableTensorHash(const Tensor& t) {
  // Header (dtype name, rank, dims) through FNV-1a; it seeds XXH64 of the data.
  absl::string_view name = DTypeName(t.dtype());
  uint64_t h = Fnv1a(kFnvOffset, name.data(), name.size());
  h = FnvU64(h, t.dims().size());
  for (int64_t d : t.dims()) h = FnvU64(h, static_cast<uint64_t>(d));
  if (!t.defined()) return Xxh64(nullptr, 0, h);
  if (t.dtype() == DType::kString) {
    const std::string* s = t.data<std::string>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      h = FnvU64(h, s[i].size());
      h = Fnv1a(h, s[i].data(), s[i].size());
    }
    return Xxh64(nullptr, 0, h);
  }
  return Xxh64(t.raw(), t.nbytes(), h);
}

std::string BlobHashString(uint64_t hash) {
  static const char kHex[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, hash >>= 4) s[i] = kHex[hash & 15];
  return s;
}

//===----------------------------------------------------------------------===//
// BlobStore and its file
//===----------------------------------------------------------------------===//

uint64_t BlobStore::Add(const Tensor& t) {
  uint64_t h = StableTensorHash(t);
  blobs.emplace(h, t);
  return h;
}

const Tensor* BlobStore::Find(uint64_t hash) const {
  auto it = blobs.find(hash);
  return it == blobs.end() ? nullptr : &it->second;
}

namespace {

constexpr char kBlobMagic[8] = {'K', 'I', 'L', 'N', 'B', 'L', 'O', 'B'};
// Version 2 starts every payload at a multiple of kBlobAlignment bytes from
// the store's start (zero padding after its length); version 1, still read,
// has no padding.
constexpr uint32_t kBlobVersion = 2;
constexpr size_t kBlobAlignment = 64;

void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}
void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

class ByteReader {
 public:
  explicit ByteReader(absl::string_view b) : b_(b) {}
  size_t remaining() const { return b_.size() - pos_; }
  size_t pos() const { return pos_; }
  bool U64(uint64_t* v) {
    if (remaining() < 8) return false;
    *v = Read64(reinterpret_cast<const unsigned char*>(b_.data() + pos_));
    pos_ += 8;
    return true;
  }
  bool U32(uint32_t* v) {
    if (remaining() < 4) return false;
    *v = Read32(reinterpret_cast<const unsigned char*>(b_.data() + pos_));
    pos_ += 4;
    return true;
  }
  bool Bytes(size_t n, absl::string_view* out) {
    if (remaining() < n) return false;
    *out = b_.substr(pos_, n);
    pos_ += n;
    return true;
  }

 private:
  absl::string_view b_;
  size_t pos_ = 0;
};

}  // namespace

std::string SerializeBlobStore(const BlobStore& store) {
  // Sized up front: the blobs are a model's constants (100 MB for ResNet-50).
  size_t size = sizeof(kBlobMagic) + 12;
  for (const auto& [hash, t] : store.blobs)
    size += 8 + 4 + DTypeName(t.dtype()).size() + 4 + 8 * static_cast<size_t>(t.rank()) + 8 + kBlobAlignment +
            (t.dtype() == DType::kString ? 0 : static_cast<size_t>(t.nbytes()));
  std::string out;
  out.reserve(size);
  out.append(kBlobMagic, sizeof(kBlobMagic));
  PutU32(&out, kBlobVersion);
  PutU64(&out, store.blobs.size());
  auto align = [&out] { out.append((kBlobAlignment - out.size() % kBlobAlignment) % kBlobAlignment, '\0'); };
  for (const auto& [hash, t] : store.blobs) {
    PutU64(&out, hash);
    absl::string_view name = DTypeName(t.dtype());
    PutU32(&out, static_cast<uint32_t>(name.size()));
    out.append(name.data(), name.size());
    PutU32(&out, static_cast<uint32_t>(t.rank()));
    for (int64_t d : t.dims()) PutU64(&out, static_cast<uint64_t>(d));
    if (t.dtype() == DType::kString) {
      std::string payload;
      const std::string* s = t.data<std::string>();
      for (int64_t i = 0; i < t.numel(); ++i) {
        PutU64(&payload, s[i].size());
        payload += s[i];
      }
      PutU64(&out, payload.size());
      align();
      out += payload;
    } else {
      PutU64(&out, t.nbytes());
      align();
      out.append(static_cast<const char*>(t.raw()), t.nbytes());
    }
  }
  return out;
}

absl::Status DeserializeBlobStore(absl::string_view bytes, BlobStore* store, BlobHashes hashes,
                                  std::shared_ptr<const void> owner) {
  auto bad = [](auto&&... what) {
    return absl::InvalidArgumentError(absl::StrCat("blob store: ", what...));
  };
  ByteReader r(bytes);
  absl::string_view magic;
  if (!r.Bytes(sizeof(kBlobMagic), &magic) || magic != absl::string_view(kBlobMagic, sizeof(kBlobMagic)))
    return bad("not a kiln blob store (bad magic)");
  uint32_t version;
  uint64_t count;
  if (!r.U32(&version) || !r.U64(&count)) return bad("truncated header");
  if (version != kBlobVersion && version != 1) return bad("unsupported version ", version);
  for (uint64_t e = 0; e < count; ++e) {
    auto trunc = [&] { return bad("entry ", e, " is truncated"); };
    uint64_t hash, payload_len;
    uint32_t name_len, rank;
    absl::string_view name;
    if (!r.U64(&hash) || !r.U32(&name_len) || !r.Bytes(name_len, &name)) return trunc();
    std::optional<DType> dt = ParseDType(name);
    if (!dt || *dt == DType::kUndefined) return bad("entry ", e, " has unknown dtype '", name, "'");
    if (!r.U32(&rank)) return trunc();
    if (rank > 64) return bad("entry ", e, " has rank ", rank);
    Dims dims(rank);
    for (uint32_t i = 0; i < rank; ++i) {
      uint64_t d;
      if (!r.U64(&d)) return trunc();
      if (d > (uint64_t{1} << 62)) return bad("entry ", e, " has dim ", d);
      dims[i] = static_cast<int64_t>(d);
    }
    const std::optional<int64_t> counted = CheckedProduct(dims);
    if (!counted || *counted > (int64_t{1} << 62)) return bad("entry ", e, " has too many elements");
    const uint64_t numel = static_cast<uint64_t>(*counted);
    if (!r.U64(&payload_len)) return trunc();
    absl::string_view padding;
    if (version >= 2 && !r.Bytes((kBlobAlignment - r.pos() % kBlobAlignment) % kBlobAlignment, &padding))
      return trunc();
    if (padding.find_first_not_of('\0') != absl::string_view::npos) return bad("entry ", e, " has nonzero padding");
    if (payload_len > r.remaining()) return trunc();
    absl::string_view payload;
    r.Bytes(payload_len, &payload);
    Tensor t;
    if (*dt == DType::kString) {
      if (numel > payload_len / 8) return bad("entry ", e, ": payload too short for ", numel, " strings");
      t = Tensor(*dt, dims);
      ByteReader pr(payload);
      std::string* s = t.data<std::string>();
      for (uint64_t i = 0; i < numel; ++i) {
        uint64_t len;
        absl::string_view str;
        if (!pr.U64(&len) || len > pr.remaining() || !pr.Bytes(len, &str))
          return bad("entry ", e, ": string ", i, " is truncated");
        s[i] = std::string(str);
      }
      if (pr.remaining() != 0) return bad("entry ", e, ": extra bytes after the strings");
    } else {
      uint64_t size = DTypeSize(*dt);
      if (numel > payload_len / size || numel * size != payload_len)
        return bad("entry ", e, ": payload has ", payload_len, " bytes, expected ", numel * size);
      if (owner && payload_len > 0 && reinterpret_cast<uintptr_t>(payload.data()) % kBlobAlignment == 0) {
        t = Tensor::Borrowed(*dt, dims, const_cast<char*>(payload.data()), owner);
      } else {
        t = Tensor(*dt, dims);
        if (payload_len) std::memcpy(t.raw(), payload.data(), payload_len);
      }
    }
    if (hashes == BlobHashes::kVerify && StableTensorHash(t) != hash)
      return bad("entry ", e, ": contents do not match hash ", BlobHashString(hash), " (corrupt file)");
    store->blobs.emplace(hash, std::move(t));
  }
  if (r.remaining() != 0) return bad(r.remaining(), " trailing bytes after the last entry");
  return absl::OkStatus();
}

absl::Status SaveBlobStore(const BlobStore& store, const std::string& path) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return absl::PermissionDeniedError(absl::StrCat(path, ": cannot open for writing"));
  std::string bytes = SerializeBlobStore(store);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) return absl::DataLossError(absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

absl::Status LoadBlobStore(const std::string& path, BlobStore* store) {
  KILN_ASSIGN_OR_RETURN(const std::string bytes, ReadFileBytes(path));
  absl::Status s = DeserializeBlobStore(bytes, store);
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
  return absl::OkStatus();
}

//===----------------------------------------------------------------------===//
// Lexical pieces
//===----------------------------------------------------------------------===//

namespace kir {

bool IsBareName(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!IsNameChar(c)) return false;
  return true;
}

bool IsBareIdent(absl::string_view s) {
  if (s.empty() || !IsIdentStart(s[0])) return false;
  for (char c : s)
    if (!IsNameChar(c)) return false;
  return true;
}

void AppendQuoted(std::string* out, absl::string_view s) {
  static const char kHex[] = "0123456789abcdef";
  out->push_back('"');
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\n': out->append("\\n"); break;
      case '\t': out->append("\\t"); break;
      case '\r': out->append("\\r"); break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out->append("\\x");
          out->push_back(kHex[c >> 4]);
          out->push_back(kHex[c & 15]);
        } else {
          out->push_back(ch);
        }
    }
  }
  out->push_back('"');
}

void AppendName(std::string* out, char sigil, absl::string_view name) {
  out->push_back(sigil);
  if (IsBareName(name)) out->append(name.data(), name.size());
  else AppendQuoted(out, name);
}

namespace {

template <typename Bits>
void AppendHexBits(std::string* out, Bits bits) {
  static const char kHex[] = "0123456789abcdef";
  out->append("0x");
  for (int i = static_cast<int>(sizeof(Bits)) * 2 - 1; i >= 0; --i)
    out->push_back(kHex[(bits >> (4 * i)) & 15]);
}

// `nan`, `-nan` (the canonical quiet NaN and its negation) or `nan(0xBITS)`.
template <typename Bits>
void AppendNan(std::string* out, Bits bits, Bits canonical) {
  constexpr Bits kSign = Bits{1} << (sizeof(Bits) * 8 - 1);
  if (bits == canonical) {
    out->append("nan");
  } else if (bits == (canonical | kSign)) {
    out->append("-nan");
  } else {
    out->append("nan(");
    AppendHexBits(out, bits);
    out->push_back(')');
  }
}

void EnsureFloatSyntax(std::string* out, size_t start) {
  for (size_t i = start; i < out->size(); ++i) {
    char c = (*out)[i];
    if (c == '.' || c == 'e' || c == 'E' || c == 'n' || c == 'i') return;
  }
  out->append(".0");
}

}  // namespace

void AppendF32(std::string* out, float v) {
  if (std::isnan(v)) return AppendNan<uint32_t>(out, std::bit_cast<uint32_t>(v), kF32CanonicalNan);
  if (std::isinf(v)) {
    out->append(v > 0 ? "inf" : "-inf");
    return;
  }
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  size_t start = out->size();
  out->append(buf, r.ptr);
  EnsureFloatSyntax(out, start);
}

void AppendF64(std::string* out, double v) {
  if (std::isnan(v)) return AppendNan<uint64_t>(out, std::bit_cast<uint64_t>(v), kF64CanonicalNan);
  if (std::isinf(v)) {
    out->append(v > 0 ? "inf" : "-inf");
    return;
  }
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  size_t start = out->size();
  out->append(buf, r.ptr);
  EnsureFloatSyntax(out, start);
}

// The shortest decimal that reads back (through float) to the same 16 bits,
// in fixed notation unless scientific is shorter (as std::to_chars does).
void Append16(std::string* out, uint16_t bits, bool bf16) {
  float v = bf16 ? BFloat16BitsToFloat(bits) : HalfBitsToFloat(bits);
  if (std::isnan(v)) return AppendNan<uint16_t>(out, bits, bf16 ? kBF16CanonicalNan : kF16CanonicalNan);
  if (std::isinf(v)) {
    out->append(v > 0 ? "inf" : "-inf");
    return;
  }
  auto round_trips = [&](const char* b, const char* e) {
    float back = 0;
    std::from_chars(b, e, back);
    return (bf16 ? FloatToBFloat16Bits(back) : FloatToHalfBits(back)) == bits;
  };
  char sci[64];
  char* sci_end = sci;
  int digits = 1;
  for (; digits <= 9; ++digits) {
    sci_end = std::to_chars(sci, sci + sizeof(sci), v, std::chars_format::scientific, digits - 1).ptr;
    if (round_trips(sci, sci_end)) break;
  }
  // The same digits in fixed notation: the decimal exponent is after the 'e'.
  const char* e = std::find(sci, sci_end, 'e');
  int exp10 = 0;
  std::from_chars(e + 1 + (e[1] == '+'), sci_end, exp10);
  char fixed[128];
  char* fixed_end = fixed;
  bool use_fixed = false;
  if (exp10 > -8 && exp10 < 20) {
    int decimals = std::max(0, digits - 1 - exp10);
    fixed_end = std::to_chars(fixed, fixed + sizeof(fixed), v, std::chars_format::fixed, decimals).ptr;
    use_fixed = fixed_end - fixed <= sci_end - sci && round_trips(fixed, fixed_end);
  }
  size_t start = out->size();
  if (use_fixed) out->append(fixed, fixed_end);
  else out->append(sci, sci_end);
  EnsureFloatSyntax(out, start);
}

}  // namespace kir

std::string PrintValueName(absl::string_view name) {
  std::string s;
  kir::AppendName(&s, '%', name);
  return s;
}

std::string QuoteString(absl::string_view s) {
  std::string out;
  kir::AppendQuoted(&out, s);
  return out;
}

namespace {

void AppendType(std::string* out, const Type& t) {
  switch (t.kind()) {
    case Type::Kind::kNone:
      out->push_back('?');
      return;
    case Type::Kind::kSequence:
    case Type::Kind::kOptional:
      out->append(t.kind() == Type::Kind::kSequence ? "seq<" : "opt<");
      AppendType(out, t.element());
      out->push_back('>');
      return;
    case Type::Kind::kTensor:
      break;
  }
  absl::string_view dt = DTypeName(t.dtype());
  out->append(dt.data(), dt.size());
  const Shape& s = t.shape();
  if (!s.ranked()) {
    out->append("[*]");
    return;
  }
  out->push_back('[');
  for (int i = 0; i < s.rank(); ++i) {
    if (i) out->push_back(',');
    const Dim& d = s[i];
    if (d.is_static()) {
      absl::StrAppend(out, d.value());
    } else if (d.is_symbolic()) {
      if (kir::IsBareIdent(d.symbol())) out->append(d.symbol());
      else kir::AppendQuoted(out, d.symbol());
    } else {
      out->push_back('?');
    }
  }
  out->push_back(']');
}

}  // namespace

std::string PrintType(const Type& type) {
  std::string s;
  AppendType(&s, type);
  return s;
}

//===----------------------------------------------------------------------===//
// The printer
//===----------------------------------------------------------------------===//

namespace {

class Printer {
 public:
  Printer(const PrintOptions& options, BlobStore* blobs) : options_(options), blobs_(blobs) {}

  std::string& out() { return out_; }

  void PrintModelHeader(const Model& m) {
    absl::StrAppend(&out_, "kiln.model ir_version ", m.ir_version);
    if (!m.producer_name.empty()) {
      out_ += " producer ";
      kir::AppendQuoted(&out_, m.producer_name);
    }
    if (!m.producer_version.empty()) {
      out_ += " producer_version ";
      kir::AppendQuoted(&out_, m.producer_version);
    }
    if (!m.opsets.empty()) {
      out_ += " opset {";
      bool first = true;
      for (const auto& [domain, version] : m.opsets) {
        if (!first) out_ += ", ";
        first = false;
        kir::AppendQuoted(&out_, domain);
        absl::StrAppend(&out_, " = ", version);
      }
      out_ += "}";
    }
    out_ += "\n";
  }

  // Prints `graph @name(...) {` ... `}`; the first line is not indented (the
  // caller places it), the body is at indent + 1, the closing brace at indent.
  void PrintGraphBody(const Graph& g, int indent) {
    out_ += "graph ";
    kir::AppendName(&out_, '@', g.name());
    out_ += "(";
    bool first = true;
    for (const Value* v : g.inputs()) {
      if (!first) out_ += ", ";
      first = false;
      PrintRef(v);
      out_ += ": ";
      AppendType(&out_, v ? v->type() : Type());
      if (v && v->initial().defined()) {
        out_ += " = ";
        PrintTensorData(v->initial());
      }
    }
    out_ += ") {\n";
    for (const Value* c : g.Constants()) PrintConstant(*c, indent + 1);
    for (const Node* n : g.nodes()) PrintNode(*n, indent + 1);
    Indent(indent + 1);
    out_ += "return";
    first = true;
    for (const Value* v : g.outputs()) {
      out_ += first ? " " : ", ";
      first = false;
      PrintRef(v);
    }
    out_ += "\n";
    Indent(indent);
    out_ += "}";
  }

 private:
  void Indent(int n) { out_.append(2 * n, ' '); }

  void PrintRef(const Value* v) {
    if (!v) out_ += "_";
    else kir::AppendName(&out_, '%', v->name());
  }

  void PrintConstant(const Value& c, int indent) {
    Indent(indent);
    PrintRef(&c);
    out_ += " = const ";
    const Tensor& t = c.constant();
    if (!t.defined()) {
      AppendType(&out_, c.type());
      out_ += " elided\n";
      return;
    }
    AppendType(&out_, Type::Of(t));
    out_ += " ";
    PrintTensorData(t);
    out_ += "\n";
  }

  static bool IsBareOpPart(absl::string_view s, bool allow_digit_start) {
    if (s.empty()) return false;
    if (!allow_digit_start && !kir::IsIdentStart(s[0])) return false;
    for (char c : s)
      if (!kir::IsIdentStart(c) && !(c >= '0' && c <= '9')) return false;
    return true;
  }

  void PrintOp(const Node& n) {
    const std::string& op = n.op();
    const std::string& domain = n.domain();
    bool bare = IsBareOpPart(op, false);
    if (bare && domain.empty() && kir::IsKeyword(op)) bare = false;
    if (bare && !domain.empty()) {
      if (!kir::IsIdentStart(domain[0])) bare = false;
      size_t start = 0;
      while (bare) {
        size_t dot = domain.find('.', start);
        absl::string_view part =
            absl::string_view(domain).substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        if (!IsBareOpPart(part, true)) bare = false;
        if (dot == std::string::npos) break;
        start = dot + 1;
      }
    }
    if (bare) {
      if (!domain.empty()) {
        out_ += domain;
        out_ += ".";
      }
      out_ += op;
      return;
    }
    if (!domain.empty()) {
      kir::AppendQuoted(&out_, domain);
      out_ += "::";
    }
    kir::AppendQuoted(&out_, op);
  }

  void PrintNode(const Node& n, int indent) {
    Indent(indent);
    for (int i = 0; i < n.num_outputs(); ++i) {
      if (i) out_ += ", ";
      PrintRef(n.output(i));
    }
    if (n.num_outputs() > 0) out_ += " = ";
    PrintOp(n);
    out_ += "(";
    for (int i = 0; i < n.num_inputs(); ++i) {
      if (i) out_ += ", ";
      PrintRef(n.input(i));
    }
    out_ += ")";
    if (!n.attrs().empty()) {
      out_ += " {";
      bool first = true;
      for (const auto& [name, a] : n.attrs()) {
        if (!first) out_ += ", ";
        first = false;
        if (kir::IsBareIdent(name)) out_ += name;
        else kir::AppendQuoted(&out_, name);
        out_ += " = ";
        PrintAttr(a, indent);
      }
      out_ += "}";
    }
    bool any_type = false;
    for (const Value* o : n.outputs())
      if (o && !o->type().is_none()) any_type = true;
    if (any_type) {
      out_ += " : ";
      for (int i = 0; i < n.num_outputs(); ++i) {
        if (i) out_ += ", ";
        AppendType(&out_, n.output(i) ? n.output(i)->type() : Type());
      }
    }
    if (!n.name().empty()) {
      out_ += " name ";
      kir::AppendQuoted(&out_, n.name());
    }
    out_ += "\n";
  }

  void PrintTensor(const Tensor& t) {
    out_ += "tensor ";
    if (!t.defined()) {
      out_ += "undef";
      return;
    }
    AppendType(&out_, Type::Of(t));
    out_ += " ";
    PrintTensorData(t);
  }

  void PrintSubgraph(const Graph* g, int indent) {
    if (!g) {
      out_ += "<null graph>";
      return;
    }
    PrintGraphBody(*g, indent);
  }

  void PrintAttr(const Attribute& a, int indent) {
    switch (a.kind()) {
      case AttrKind::kInt: absl::StrAppend(&out_, a.i()); return;
      case AttrKind::kFloat: kir::AppendF32(&out_, a.f()); return;
      case AttrKind::kString: kir::AppendQuoted(&out_, a.s()); return;
      case AttrKind::kTensor: PrintTensor(a.t()); return;
      case AttrKind::kGraph: PrintSubgraph(a.g(), indent); return;
      case AttrKind::kType:
        out_ += "type ";
        AppendType(&out_, a.type());
        return;
      case AttrKind::kInts:
        if (a.ints().empty()) out_ += "ints ";
        out_ += "[";
        for (size_t i = 0; i < a.ints().size(); ++i) {
          if (i) out_ += ", ";
          absl::StrAppend(&out_, a.ints()[i]);
        }
        out_ += "]";
        return;
      case AttrKind::kFloats:
        if (a.floats().empty()) out_ += "floats ";
        out_ += "[";
        for (size_t i = 0; i < a.floats().size(); ++i) {
          if (i) out_ += ", ";
          kir::AppendF32(&out_, a.floats()[i]);
        }
        out_ += "]";
        return;
      case AttrKind::kStrings:
        if (a.strings().empty()) out_ += "strings ";
        out_ += "[";
        for (size_t i = 0; i < a.strings().size(); ++i) {
          if (i) out_ += ", ";
          kir::AppendQuoted(&out_, a.strings()[i]);
        }
        out_ += "]";
        return;
      case AttrKind::kTensors:
        if (a.tensors().empty()) out_ += "tensors ";
        out_ += "[";
        for (size_t i = 0; i < a.tensors().size(); ++i) {
          if (i) out_ += ", ";
          PrintTensor(a.tensors()[i]);
        }
        out_ += "]";
        return;
      case AttrKind::kGraphs:
        if (a.graphs().empty()) out_ += "graphs ";
        out_ += "[";
        for (size_t i = 0; i < a.graphs().size(); ++i) {
          if (i) out_ += ", ";
          PrintSubgraph(a.graphs()[i].get(), indent);
        }
        out_ += "]";
        return;
    }
  }

  // `dense [...]` or `blob "HASH"`.
  void PrintTensorData(const Tensor& t) {
    bool inline_it = options_.inline_all_constants || t.numel() <= options_.max_inline_elements;
    if (!inline_it) {
      uint64_t h = StableTensorHash(t);
      if (blobs_) {
        const Tensor* prev = blobs_->Find(h);
        if (!prev) blobs_->blobs.emplace(h, t);
        else if (!prev->Equals(t)) inline_it = true;  // a hash collision: keep the data inline
      }
      if (!inline_it) {
        out_ += "blob \"";
        out_ += BlobHashString(h);
        out_ += "\"";
        return;
      }
    }
    out_ += "dense [";
    int64_t n = t.numel();
    auto sep = [&](int64_t i) {
      if (i) out_ += ", ";
    };
    switch (t.dtype()) {
      case DType::kF32: {
        const float* p = t.data<float>();
        for (int64_t i = 0; i < n; ++i) { sep(i); kir::AppendF32(&out_, p[i]); }
        break;
      }
      case DType::kF64: {
        const double* p = t.data<double>();
        for (int64_t i = 0; i < n; ++i) { sep(i); kir::AppendF64(&out_, p[i]); }
        break;
      }
      case DType::kF16:
      case DType::kBF16: {
        const uint16_t* p = static_cast<const uint16_t*>(t.raw());
        for (int64_t i = 0; i < n; ++i) { sep(i); kir::Append16(&out_, p[i], t.dtype() == DType::kBF16); }
        break;
      }
      case DType::kC64: {
        const float* p = t.data<float>();
        for (int64_t i = 0; i < n; ++i) {
          sep(i);
          out_ += "(";
          kir::AppendF32(&out_, p[2 * i]);
          out_ += ", ";
          kir::AppendF32(&out_, p[2 * i + 1]);
          out_ += ")";
        }
        break;
      }
      case DType::kC128: {
        const double* p = t.data<double>();
        for (int64_t i = 0; i < n; ++i) {
          sep(i);
          out_ += "(";
          kir::AppendF64(&out_, p[2 * i]);
          out_ += ", ";
          kir::AppendF64(&out_, p[2 * i + 1]);
          out_ += ")";
        }
        break;
      }
      case DType::kBool: {
        const uint8_t* p = static_cast<const uint8_t*>(t.raw());
        for (int64_t i = 0; i < n; ++i) { sep(i); out_ += p[i] ? "true" : "false"; }
        break;
      }
      case DType::kString: {
        const std::string* p = t.data<std::string>();
        for (int64_t i = 0; i < n; ++i) { sep(i); kir::AppendQuoted(&out_, p[i]); }
        break;
      }
      case DType::kI8: AppendInts<int8_t>(t); break;
      case DType::kI16: AppendInts<int16_t>(t); break;
      case DType::kI32: AppendInts<int32_t>(t); break;
      case DType::kI64: AppendInts<int64_t>(t); break;
      case DType::kU8: AppendInts<uint8_t>(t); break;
      case DType::kU16: AppendInts<uint16_t>(t); break;
      case DType::kU32: AppendInts<uint32_t>(t); break;
      case DType::kU64: AppendInts<uint64_t>(t); break;
      case DType::kUndefined: break;
    }
    out_ += "]";
  }

  template <typename T>
  void AppendInts(const Tensor& t) {
    const T* p = static_cast<const T*>(t.raw());
    char buf[32];
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (i) out_ += ", ";
      auto r = std::to_chars(buf, buf + sizeof(buf), p[i]);
      out_.append(buf, r.ptr);
    }
  }

  const PrintOptions& options_;
  BlobStore* blobs_;
  std::string out_;
};

}  // namespace

std::string PrintModel(const Model& model, const PrintOptions& options, BlobStore* blobs) {
  Printer p(options, blobs);
  p.PrintModelHeader(model);
  if (model.graph) p.PrintGraphBody(*model.graph, 0);
  p.out() += "\n";
  return std::move(p.out());
}

std::string PrintGraph(const Graph& graph, const PrintOptions& options, BlobStore* blobs) {
  Printer p(options, blobs);
  p.PrintGraphBody(graph, 0);
  p.out() += "\n";
  return std::move(p.out());
}

}  // namespace kiln
