//===- printer.h - The .kir text form of the graph IR: printing -*- C++ -*-===//
//
// PrintModel / PrintGraph write a model or graph in kiln's text form (.kir,
// described in docs/kir.md); ParseModel (parser.h) reads it back. The two are
// exact inverses on printed text: print(parse(print(g))) == print(g), byte
// for byte, for every graph the verifier accepts.
//
// Tensors (constants and tensor-valued attributes) with few elements are
// printed inline (`dense [...]`); larger ones as `blob "HASH"`, where HASH is
// a stable 64-bit content hash (StableTensorHash) and the bytes go to a
// BlobStore that the printer fills and the parser reads. A blob store is
// saved beside a .kir file as `X.kir.blobs`.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/ir/graph.h"
#include "graph/ir/tensor.h"
#include "graph/ir/type.h"

namespace kiln {

struct PrintOptions {
  // Print every tensor inline, whatever its size: the text alone then holds
  // the whole model and round-trips without a blob store.
  bool inline_all_constants = false;
  // Tensors with at most this many elements print inline; larger ones print
  // as blob references (ignored when inline_all_constants is set).
  int64_t max_inline_elements = 16;
};

// A stable 64-bit hash of a tensor's dtype, dims and contents: the same on
// every build and machine (unlike Tensor::Hash).
uint64_t StableTensorHash(const Tensor& t);
// 16 lowercase hex digits.
std::string BlobHashString(uint64_t hash);

// Tensors by content hash: the side store of blob references.
struct BlobStore {
  std::map<uint64_t, Tensor> blobs;

  bool empty() const { return blobs.empty(); }
  size_t size() const { return blobs.size(); }
  // Stores `t` under its content hash and returns the hash.
  uint64_t Add(const Tensor& t);
  // The tensor stored under `hash`, or null.
  const Tensor* Find(uint64_t hash) const;
};

// A blob store as one self-checking binary file (docs/kir.md describes the
// layout). Loading verifies every entry's hash against its contents, unless
// the bytes come inside a container that checked them already (an
// artifact's CRC-32): kTrusted skips the hashes, never the structure.
// With an `owner` that holds `bytes` (writable: a copy-on-write mapping),
// numeric tensors borrow their payloads instead of copying them
// (Tensor::Borrowed): every payload starts 64-byte aligned in the store.
std::string SerializeBlobStore(const BlobStore& store);
enum class BlobHashes { kVerify, kTrusted };
absl::Status DeserializeBlobStore(absl::string_view bytes, BlobStore* store,
                                  BlobHashes hashes = BlobHashes::kVerify,
                                  std::shared_ptr<const void> owner = nullptr);
absl::Status SaveBlobStore(const BlobStore& store, const std::string& path);
// Adds the blobs of the file at `path` to `store`.
absl::Status LoadBlobStore(const std::string& path, BlobStore* store);

// The text form of a model (header and main graph) or of one graph. When
// `blobs` is given, the tensors printed as blob references are added to it;
// without it their bytes are not kept anywhere (the text then parses back
// into elided constants).
std::string PrintModel(const Model& model, const PrintOptions& options = {},
                       BlobStore* blobs = nullptr);
std::string PrintGraph(const Graph& graph, const PrintOptions& options = {},
                       BlobStore* blobs = nullptr);

// Pieces of the text form, for messages and tools.
// "%x" or %"onnx::Conv_12".
std::string PrintValueName(absl::string_view name);
// A type as in Type::ToString, with symbolic dims quoted where they would not
// read back as symbols ("f32[batch,\"seq len\",3]").
std::string PrintType(const Type& type);
// A string literal with escapes.
std::string QuoteString(absl::string_view s);

// Lexical rules shared by the printer and the parser.
namespace kir {

// Characters of a bare value or graph name (%name, @name): [A-Za-z0-9_.].
inline bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.';
}
inline bool IsIdentStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
// Words that cannot be bare op names.
inline bool IsKeyword(absl::string_view s) { return s == "const" || s == "return" || s == "name"; }

// Canonical quiet NaNs, printed as `nan` (and `-nan` with the sign bit).
constexpr uint32_t kF32CanonicalNan = 0x7fc00000u;
constexpr uint64_t kF64CanonicalNan = 0x7ff8000000000000ull;
constexpr uint16_t kF16CanonicalNan = 0x7e00u;
constexpr uint16_t kBF16CanonicalNan = 0x7fc0u;

bool IsBareName(absl::string_view s);   // [A-Za-z0-9_.]+
bool IsBareIdent(absl::string_view s);  // [A-Za-z_][A-Za-z0-9_.]*
void AppendQuoted(std::string* out, absl::string_view s);
void AppendName(std::string* out, char sigil, absl::string_view name);
// Shortest text that reads back to the same bits; always has a '.', an
// exponent, or is nan/inf, so it never reads as an integer.
void AppendF32(std::string* out, float v);
void AppendF64(std::string* out, double v);
// f16 (bf16 = false) or bf16 bits; reads back through float to the same bits.
void Append16(std::string* out, uint16_t bits, bool bf16);

}  // namespace kir

}  // namespace kiln
