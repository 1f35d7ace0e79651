//===- npy.cc - NumPy .npy files to and from tensors ----------------------===//
#include "graph/io/npy.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/support/mapped_file.h"
#include "absl/strings/str_join.h"
#include "graph/support/checked_math.h"
#include "graph/support/read_file.h"
#include "graph/support/replace_file.h"
#include "graph/support/status.h"

namespace kiln {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;

absl::Status Bad(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("malformed .npy file: ", what));
}

//===----------------------------------------------------------------------===//
// The header: a Python literal dict
//===----------------------------------------------------------------------===//

struct PyValue {
  enum Kind { kStr, kBool, kInt, kTuple, kList, kNone } kind = kNone;
  std::string s;
  bool b = false;
  int64_t i = 0;
  std::vector<PyValue> items;
};

class PyLiteralParser {
 public:
  explicit PyLiteralParser(absl::string_view s) : s_(s) {}

  absl::Status ParseDict(std::vector<std::pair<std::string, PyValue>>* out) {
    Skip();
    if (!Eat('{')) return Bad("header is not a Python dict");
    while (true) {
      Skip();
      if (Eat('}')) break;
      PyValue key;
      if (!ParseValue(&key, 0) || key.kind != PyValue::kStr) return Bad("header dict keys must be strings");
      Skip();
      if (!Eat(':')) return Bad("expected ':' in the header dict");
      PyValue v;
      if (!ParseValue(&v, 0)) return Bad(absl::StrCat("cannot read the value of '", key.s, "' in the header"));
      out->emplace_back(key.s, std::move(v));
      Skip();
      if (Eat(',')) continue;
      Skip();
      if (Eat('}')) break;
      return Bad("expected ',' or '}' in the header dict");
    }
    Skip();
    if (pos_ != s_.size()) return Bad("unexpected characters after the header dict");
    return absl::OkStatus();
  }

 private:
  void Skip() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }
  bool Eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool EatWord(absl::string_view w) {
    if (s_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }

  bool ParseValue(PyValue* v, int depth) {
    if (depth > 8) return false;
    Skip();
    if (pos_ >= s_.size()) return false;
    char c = s_[pos_];
    if (c == '\'' || c == '"') {
      ++pos_;
      v->kind = PyValue::kStr;
      while (pos_ < s_.size() && s_[pos_] != c) {
        if (s_[pos_] == '\\') {
          if (pos_ + 1 >= s_.size()) return false;
          ++pos_;
        }
        v->s.push_back(s_[pos_++]);
      }
      return Eat(c);
    }
    if (c == '(' || c == '[') {
      char close = c == '(' ? ')' : ']';
      ++pos_;
      v->kind = c == '(' ? PyValue::kTuple : PyValue::kList;
      while (true) {
        Skip();
        if (Eat(close)) return true;
        PyValue item;
        if (!ParseValue(&item, depth + 1)) return false;
        v->items.push_back(std::move(item));
        if (v->items.size() > 64) return false;
        Skip();
        if (Eat(',')) continue;
        Skip();
        return Eat(close);
      }
    }
    if (EatWord("True")) {
      v->kind = PyValue::kBool;
      v->b = true;
      return true;
    }
    if (EatWord("False")) {
      v->kind = PyValue::kBool;
      return true;
    }
    if (EatWord("None")) {
      v->kind = PyValue::kNone;
      return true;
    }
    if (c >= '0' && c <= '9') {
      v->kind = PyValue::kInt;
      int64_t n = 0;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
        int d = s_[pos_++] - '0';
        if (n > (std::numeric_limits<int64_t>::max() - d) / 10) return false;
        n = n * 10 + d;
      }
      Eat('L');  // Python 2 long
      v->i = n;
      return true;
    }
    return false;
  }

  absl::string_view s_;
  size_t pos_ = 0;
};

//===----------------------------------------------------------------------===//
// Element types
//===----------------------------------------------------------------------===//

struct NpyType {
  DType dtype;
  bool big_endian = false;
};

absl::StatusOr<NpyType> DTypeFromDescr(const PyValue& descr) {
  if (descr.kind == PyValue::kList) {
    // The bf16 convention: [('bf16', '<u2')].
    if (descr.items.size() == 1 && descr.items[0].kind == PyValue::kTuple &&
        descr.items[0].items.size() == 2 && descr.items[0].items[0].kind == PyValue::kStr &&
        descr.items[0].items[0].s == "bf16" && descr.items[0].items[1].kind == PyValue::kStr) {
      const std::string& f = descr.items[0].items[1].s;
      if (f == "<u2" || f == "=u2") return NpyType{DType::kBF16, false};
      if (f == ">u2") return NpyType{DType::kBF16, true};
    }
    return absl::UnimplementedError(
        "unsupported .npy dtype: structured arrays are not supported (except [('bf16', '<u2')] for bfloat16)");
  }
  if (descr.kind != PyValue::kStr) return Bad("'descr' is not a string");
  const std::string& d = descr.s;
  auto unsupported = [&] {
    return absl::UnimplementedError(absl::StrCat("unsupported .npy dtype '", d, "'"));
  };
  if (d.size() < 3) return unsupported();
  char order = d[0];
  if (order != '<' && order != '>' && order != '|' && order != '=') return unsupported();
  bool big = order == '>';
  char code = d[1];
  int size = 0;
  for (size_t i = 2; i < d.size(); ++i) {
    if (d[i] < '0' || d[i] > '9' || size > 1000) return unsupported();
    size = size * 10 + (d[i] - '0');
  }
  std::optional<DType> dt;
  switch (code) {
    case 'f':
      if (size == 2) dt = DType::kF16;
      else if (size == 4) dt = DType::kF32;
      else if (size == 8) dt = DType::kF64;
      break;
    case 'i':
      if (size == 1) dt = DType::kI8;
      else if (size == 2) dt = DType::kI16;
      else if (size == 4) dt = DType::kI32;
      else if (size == 8) dt = DType::kI64;
      break;
    case 'u':
      if (size == 1) dt = DType::kU8;
      else if (size == 2) dt = DType::kU16;
      else if (size == 4) dt = DType::kU32;
      else if (size == 8) dt = DType::kU64;
      break;
    case 'b':
      if (size == 1) dt = DType::kBool;
      break;
    case 'c':
      if (size == 8) dt = DType::kC64;
      else if (size == 16) dt = DType::kC128;
      break;
    case 'V':
      if (size == 2) dt = DType::kBF16;  // ml_dtypes' bfloat16
      break;
  }
  if (!dt) return unsupported();
  return NpyType{*dt, big && size > 1};
}

absl::StatusOr<std::string> DescrOf(DType t) {
  switch (t) {
    case DType::kF16: return std::string("'<f2'");
    case DType::kF32: return std::string("'<f4'");
    case DType::kF64: return std::string("'<f8'");
    case DType::kI8: return std::string("'|i1'");
    case DType::kI16: return std::string("'<i2'");
    case DType::kI32: return std::string("'<i4'");
    case DType::kI64: return std::string("'<i8'");
    case DType::kU8: return std::string("'|u1'");
    case DType::kU16: return std::string("'<u2'");
    case DType::kU32: return std::string("'<u4'");
    case DType::kU64: return std::string("'<u8'");
    case DType::kBool: return std::string("'|b1'");
    case DType::kC64: return std::string("'<c8'");
    case DType::kC128: return std::string("'<c16'");
    case DType::kBF16: return std::string("[('bf16', '<u2')]");
    default:
      return absl::UnimplementedError(
          absl::StrCat(DTypeName(t), " tensors cannot be written as .npy"));
  }
}

uint32_t ReadLE(const unsigned char* p, int n) {
  uint32_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}

}  // namespace

absl::StatusOr<Tensor> ParseNpy(absl::string_view bytes, std::shared_ptr<const void> owner) {
  const unsigned char* b = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() < kMagicLen + 2 || bytes.substr(0, kMagicLen) != absl::string_view(kMagic, kMagicLen))
    return Bad("missing the \\x93NUMPY magic");
  int major = b[6], minor = b[7];
  size_t len_size;
  if (major == 1) len_size = 2;
  else if (major == 2 || major == 3) len_size = 4;
  else return absl::UnimplementedError(absl::StrCat("unsupported .npy format version ", major, ".", minor));
  if (minor != 0) return absl::UnimplementedError(absl::StrCat("unsupported .npy format version ", major, ".", minor));
  size_t header_start = kMagicLen + 2 + len_size;
  if (bytes.size() < header_start) return Bad("truncated header length");
  size_t header_len = ReadLE(b + kMagicLen + 2, static_cast<int>(len_size));
  if (header_len > bytes.size() - header_start) return Bad("truncated header");
  absl::string_view header = bytes.substr(header_start, header_len);
  std::vector<std::pair<std::string, PyValue>> dict;
  absl::Status s = PyLiteralParser(header).ParseDict(&dict);
  if (!s.ok()) return s;
  const PyValue* descr = nullptr;
  const PyValue* fortran = nullptr;
  const PyValue* shape = nullptr;
  for (const auto& [k, v] : dict) {
    const PyValue** slot = k == "descr" ? &descr : k == "fortran_order" ? &fortran : k == "shape" ? &shape : nullptr;
    if (!slot) return Bad(absl::StrCat("unexpected header key '", k, "'"));
    if (*slot) return Bad(absl::StrCat("duplicate header key '", k, "'"));
    *slot = &v;
  }
  if (!descr || !fortran || !shape) return Bad("header lacks 'descr', 'fortran_order' or 'shape'");
  if (fortran->kind != PyValue::kBool) return Bad("'fortran_order' is not True or False");
  if (fortran->b)
    return absl::UnimplementedError(
        "Fortran-order .npy arrays are not supported (save a C-order array: np.save(f, np.ascontiguousarray(a)))");
  if (shape->kind != PyValue::kTuple) return Bad("'shape' is not a tuple");
  auto type = DTypeFromDescr(*descr);
  if (!type.ok()) return type.status();
  Dims dims;
  for (const PyValue& d : shape->items) {
    if (d.kind != PyValue::kInt) return Bad("'shape' holds something other than integers");
    dims.push_back(d.i);
  }
  const int64_t item = static_cast<int64_t>(DTypeSize(type->dtype));
  const size_t available = bytes.size() - header_start - header_len;
  // Element count and byte size, checked for overflow and against the bytes
  // present before anything is allocated.
  std::string shape_text = absl::StrCat("(", absl::StrJoin(dims, ", "), dims.size() == 1 ? ",)" : ")");
  absl::StatusOr<int64_t> need_or = ByteSize(dims, item, "");
  if (!need_or.ok() || *need_or > (int64_t{1} << 62)) return Bad(absl::StrCat("shape ", shape_text, " is too large"));
  const uint64_t need = static_cast<uint64_t>(*need_or);
  if (available != need)
    return Bad(absl::StrCat("the data has ", available, " bytes, shape ", shape_text, " of ",
                            DTypeName(type->dtype), " needs ", need));
  const char* data = bytes.data() + header_start + header_len;
  if (owner && need && !type->big_endian && type->dtype != DType::kBool &&
      reinterpret_cast<uintptr_t>(data) % 64 == 0)
    return Tensor::Borrowed(type->dtype, dims, const_cast<char*>(data), std::move(owner));
  Tensor t(type->dtype, dims);
  if (need) std::memcpy(t.raw(), data, need);
  if (type->big_endian) {
    size_t word = static_cast<size_t>(type->dtype == DType::kC64 || type->dtype == DType::kC128 ? item / 2 : item);
    unsigned char* p = static_cast<unsigned char*>(t.raw());
    for (size_t off = 0; off < need; off += word) std::reverse(p + off, p + off + word);
  }
  if (type->dtype == DType::kBool) {
    unsigned char* p = static_cast<unsigned char*>(t.raw());
    for (uint64_t i = 0; i < need; ++i) p[i] = p[i] != 0;  // one byte an element
  }
  return t;
}

absl::StatusOr<std::string> SerializeNpy(const Tensor& tensor) {
  if (!tensor.defined()) return absl::InvalidArgumentError("cannot write an undefined tensor as .npy");
  auto descr = DescrOf(tensor.dtype());
  if (!descr.ok()) return descr.status();
  std::string shape = "(";
  for (size_t i = 0; i < tensor.dims().size(); ++i) absl::StrAppend(&shape, i ? ", " : "", tensor.dims()[i]);
  if (tensor.dims().size() == 1) shape += ",";
  shape += ")";
  std::string header = absl::StrCat("{'descr': ", *descr, ", 'fortran_order': False, 'shape': ", shape, ", }");
  // Pad with spaces and a newline so the data starts 64-byte aligned.
  auto total = [&](size_t len_size) { return kMagicLen + 2 + len_size + header.size() + 1; };
  size_t len_size = total(2) + 63 <= 65535 ? 2 : 4;
  size_t pad = (64 - total(len_size) % 64) % 64;
  header.append(pad, ' ');
  header.push_back('\n');
  std::string out(kMagic, kMagicLen);
  out.push_back(static_cast<char>(len_size == 2 ? 1 : 2));
  out.push_back(0);
  uint32_t hl = static_cast<uint32_t>(header.size());
  for (size_t i = 0; i < len_size; ++i) out.push_back(static_cast<char>((hl >> (8 * i)) & 0xff));
  out += header;
  size_t data_start = out.size();
  out.append(static_cast<const char*>(tensor.raw()), tensor.nbytes());
  if (tensor.dtype() == DType::kBool)
    for (size_t i = data_start; i < out.size(); ++i) out[i] = out[i] != 0;
  return out;
}

absl::StatusOr<Tensor> ReadNpy(const std::string& path) {
  // Mapped copy-on-write: the tensor borrows the data where it lies, or
  // copies it once.
  KILN_ASSIGN_OR_RETURN(MappedFile mapped, MappedFile::Open(path, MappedFile::kCopyOnWrite));
  auto file = std::make_shared<const MappedFile>(std::move(mapped));
  auto t = ParseNpy(file->bytes(), file);
  if (!t.ok()) return absl::Status(t.status().code(), absl::StrCat(path, ": ", t.status().message()));
  return t;
}

absl::Status WriteNpy(const std::string& path, const Tensor& tensor) {
  auto bytes = SerializeNpy(tensor);
  if (!bytes.ok()) return absl::Status(bytes.status().code(), absl::StrCat(path, ": ", bytes.status().message()));
  // Beside the path and renamed over it: a mapped reader of the old file
  // (ReadNpy's borrowed tensors) keeps its bytes.
  absl::Status s = WriteReplacing(path, [&](int fd) { return WriteAll(fd, bytes->data(), bytes->size()); });
  if (!s.ok()) return absl::PermissionDeniedError(absl::StrCat(path, ": cannot open for writing"));
  return absl::OkStatus();
}

}  // namespace kiln
