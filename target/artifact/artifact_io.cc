//===- artifact_io.cc - Reading and writing .kiln artifacts ---------------===//
#include "target/artifact/artifact_io.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>

#include <algorithm>
#include <cstring>
#include <cstdint>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "graph/support/mapped_file.h"
#include "graph/support/replace_file.h"
#include "graph/support/status.h"

namespace kiln::artifact {
namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'A', 'R', 'T', '\n'};
constexpr size_t kChecksumBytes = 4;

constexpr size_t kSectionAlignment = 64;
constexpr size_t kSectionTrailerBytes = 16;  // the message's size and the section's

// `crc` carried over `size` more bytes (zlib takes the length as a 32-bit
// uInt: larger payloads go in pieces).
uLong Crc32(uLong crc, const char* data, size_t size) {
  constexpr size_t kPiece = size_t{1} << 30;
  for (size_t at = 0; at < size; at += kPiece)
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data + at), static_cast<uInt>(std::min(kPiece, size - at)));
  return crc;
}
uint32_t Crc32(const char* data, size_t size) { return static_cast<uint32_t>(Crc32(crc32(0L, Z_NULL, 0), data, size)); }

uint64_t ReadLe64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

// A protobuf output stream into a file descriptor through a buffer of its
// own, which keeps the CRC-32 of the bytes that pass through it (the
// message; the magic and the trailer are written around it, unsummed).
class ChecksummedFileStream : public google::protobuf::io::ZeroCopyOutputStream {
 public:
  explicit ChecksummedFileStream(int fd) : fd_(fd), buf_(kBufferBytes) {}

  bool Next(void** data, int* size) override {
    if (used_ == buf_.size() && !Flush()) return false;
    *data = buf_.data() + used_;
    *size = static_cast<int>(buf_.size() - used_);
    total_ += buf_.size() - used_;
    used_ = buf_.size();
    return true;
  }
  void BackUp(int count) override {
    used_ -= static_cast<size_t>(count);
    total_ -= static_cast<size_t>(count);
  }
  int64_t ByteCount() const override { return static_cast<int64_t>(total_); }

  // Writes `n` bytes after those buffered, outside the checksum.
  bool WriteRaw(const char* data, size_t n) { return Flush() && WriteFd(data, n); }
  // Writes `n` bytes after those buffered, summed, without copying them.
  bool WriteSummed(const char* data, size_t n) {
    if (!Flush()) return false;
    crc_ = Crc32(crc_, data, n);
    total_ += n;
    return WriteFd(data, n);
  }
  uint32_t checksum() {
    Flush();
    return static_cast<uint32_t>(crc_);
  }
  bool Flush() {
    if (used_ == 0) return ok_;
    crc_ = Crc32(crc_, buf_.data(), used_);
    ok_ = WriteFd(buf_.data(), used_) && ok_;
    used_ = 0;
    return ok_;
  }

 private:
  static constexpr size_t kBufferBytes = size_t{1} << 20;
  bool WriteFd(const char* p, size_t n) {
    if (!WriteAll(fd_, p, n)) ok_ = false;
    return ok_;
  }

  int fd_;
  std::vector<char> buf_;
  size_t used_ = 0, total_ = 0;
  uLong crc_ = crc32(0L, Z_NULL, 0);
  bool ok_ = true;
};

void FillOne(const Value* v, TensorSignature* s) {
  s->set_name(v->name());
  s->set_dtype(std::string(DTypeName(v->type().dtype())));
  for (const Dim& d : v->type().shape().dims()) {
    s->add_dims(d.is_static() ? d.value() : -1);
    s->add_dim_symbols(d.is_symbolic() ? d.symbol() : "");
  }
}

}  // namespace

std::string GearLabel(const Artifact& bundle, const Gear& gear) {
  std::vector<std::string> parts;
  for (int k = 0; k < gear.values_size() && k < bundle.gear_symbols_size(); ++k)
    parts.push_back(absl::StrCat(bundle.gear_symbols(k), "=", gear.values(k)));
  return absl::StrJoin(parts, ", ");
}

int RootBuffer(const NpusimModule& module, int b) {
  while (module.buffers(b).has_alias_of()) b = module.buffers(b).alias_of();
  return b;
}

void FillSignatures(const Graph& graph, Artifact* a) {
  for (const Value* v : graph.inputs()) FillOne(v, a->add_inputs());
  for (const Value* v : graph.outputs()) FillOne(v, a->add_outputs());
}

std::string DescribeSignature(const TensorSignature& s) {
  std::vector<std::string> dims;
  for (int i = 0; i < s.dims_size(); ++i)
    dims.push_back(s.dims(i) >= 0 ? absl::StrCat(s.dims(i))
                                  : (i < s.dim_symbols_size() && !s.dim_symbols(i).empty() ? s.dim_symbols(i) : "?"));
  return absl::StrCat(s.name(), ": ", s.dtype(), "[", absl::StrJoin(dims, ","), "]");
}

absl::Status WriteArtifact(Artifact artifact, const std::string& path) {
  // The constants go after the message, in a section of their own.
  const std::string constants = std::move(*artifact.mutable_constants());
  artifact.clear_constants();
  const size_t size = artifact.ByteSizeLong();
  if (size > static_cast<size_t>(INT32_MAX))
    return absl::InvalidArgumentError(absl::StrCat("the artifact (", size, " bytes) is past protobuf's 2 GiB"));
  // Written beside the path and renamed over it (replace_file.h): a run
  // that has the old artifact mapped keeps its bytes.
  absl::Status written = WriteReplacing(path, [&](int fd) {
    // Serialized straight into the file through a small buffer (the
    // constants are not copied into a buffer of the artifact's size first),
    // the checksum taken as the bytes pass.
    ChecksummedFileStream out(fd);
    bool ok = out.WriteRaw(kMagic, sizeof kMagic);
    {
      google::protobuf::io::CodedOutputStream cos(&out);
      cos.SetSerializationDeterministic(true);
      ok = ok && artifact.SerializeToCodedStream(&cos) && cos.ByteCount() == static_cast<int64_t>(size);
    }
    if (!constants.empty()) {
      const size_t at = sizeof kMagic + size;
      const std::string padding((kSectionAlignment - at % kSectionAlignment) % kSectionAlignment, '\0');
      char trailer[kSectionTrailerBytes];
      for (int i = 0; i < 8; ++i) {
        trailer[i] = static_cast<char>((static_cast<uint64_t>(size) >> (8 * i)) & 0xff);
        trailer[8 + i] = static_cast<char>((static_cast<uint64_t>(constants.size()) >> (8 * i)) & 0xff);
      }
      ok = ok && out.WriteSummed(padding.data(), padding.size()) &&
           out.WriteSummed(constants.data(), constants.size()) && out.WriteSummed(trailer, sizeof trailer);
    }
    const uint32_t crc = out.checksum();
    char crc_bytes[kChecksumBytes];
    for (size_t i = 0; i < kChecksumBytes; ++i) crc_bytes[i] = static_cast<char>((crc >> (8 * i)) & 0xff);
    return ok && out.WriteRaw(crc_bytes, sizeof crc_bytes);
  });
  if (!written.ok()) return absl::InvalidArgumentError(absl::StrCat("cannot write '", path, "'"));
  return absl::OkStatus();
}

absl::StatusOr<ArtifactFile> ReadArtifactFile(const std::string& path) {
  absl::StatusOr<MappedFile> read = MappedFile::Open(path, MappedFile::kCopyOnWrite);
  if (!read.ok()) return read.status();
  ArtifactFile out;
  out.file = std::make_shared<const MappedFile>(*std::move(read));
  const absl::string_view bytes = out.file->bytes();
  if (bytes.size() < sizeof kMagic || bytes.substr(0, sizeof kMagic) != absl::string_view(kMagic, sizeof kMagic))
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a kiln artifact (bad magic)"));
  auto version_error = [&](uint32_t version) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": artifact format version ", version,
                                                   "; this kiln reads version ", kArtifactFormatVersion,
                                                   " (recompile the model)"));
  };
  const char* payload = bytes.data() + sizeof kMagic;
  size_t payload_size = bytes.size() - sizeof kMagic;
  uint32_t stored = 0;
  if (payload_size >= kChecksumBytes) {
    payload_size -= kChecksumBytes;
    for (size_t i = 0; i < kChecksumBytes; ++i)
      stored |= static_cast<uint32_t>(static_cast<unsigned char>(payload[payload_size + i])) << (8 * i);
  }
  if (bytes.size() < sizeof kMagic + kChecksumBytes || Crc32(payload, payload_size) != stored) {
    // Artifacts of format version 2 and before end without a checksum: name
    // their version rather than calling them damaged.
    Artifact old;
    if (old.ParseFromArray(payload, static_cast<int>(std::min<size_t>(bytes.size() - sizeof kMagic, INT32_MAX))) &&
        old.format_version() != 0 && old.format_version() < kArtifactFormatVersion)
      return version_error(old.format_version());
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": the artifact is truncated or corrupted (its checksum does not match)"));
  }
  // A section of constants where the bytes end with a trailer that places
  // the message and the section exactly (artifact.proto); else the message
  // is all the bytes.
  size_t message_size = payload_size;
  if (payload_size >= kSectionTrailerBytes) {
    const uint64_t n = ReadLe64(payload + payload_size - kSectionTrailerBytes);
    const uint64_t c = ReadLe64(payload + payload_size - 8);
    const size_t body = payload_size - kSectionTrailerBytes;
    if (c > 0 && n <= body && c <= body) {
      const size_t start = (sizeof kMagic + n + kSectionAlignment - 1) / kSectionAlignment * kSectionAlignment;
      if (start - sizeof kMagic <= body && body - (start - sizeof kMagic) == c) {
        message_size = n;
        out.section = absl::string_view(bytes.data() + start, c);
      }
    }
  }
  if (message_size > static_cast<size_t>(INT32_MAX) ||
      !out.message.ParseFromArray(payload, static_cast<int>(message_size)))
    return absl::InvalidArgumentError(absl::StrCat(path, ": the artifact is truncated or corrupted"));
  if (out.message.format_version() != kArtifactFormatVersion) return version_error(out.message.format_version());
  if (!out.section.empty() && !out.message.constants().empty())
    return absl::InvalidArgumentError(absl::StrCat(path, ": the artifact holds its constants twice"));
  return out;
}

absl::StatusOr<Artifact> ReadArtifact(const std::string& path) {
  absl::StatusOr<ArtifactFile> f = ReadArtifactFile(path);
  if (!f.ok()) return f.status();
  if (!f->section.empty()) f->message.set_constants(std::string(f->section));
  return std::move(f->message);
}

std::string PeekArtifactTarget(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return "";
  char head[512];
  f.read(head, sizeof head);
  const std::streamsize n = f.gcount();
  if (n < static_cast<std::streamsize>(sizeof kMagic) || std::memcmp(head, kMagic, sizeof kMagic) != 0) return "";
  // Fields are written in number order: format_version (1), then target (2).
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(head) + sizeof kMagic,
                                            static_cast<int>(n - sizeof kMagic));
  for (uint32_t tag = in.ReadTag(); tag != 0; tag = in.ReadTag()) {
    const uint32_t field = tag >> 3, wire = tag & 7;
    uint32_t varint = 0;
    if (field == 1 && wire == 0 && in.ReadVarint32(&varint)) continue;
    std::string target;
    if (field == 2 && wire == 2 && in.ReadVarint32(&varint) && varint <= 256 &&
        in.ReadString(&target, static_cast<int>(varint)))
      return target;
    return "";
  }
  return "";
}

}  // namespace kiln::artifact
