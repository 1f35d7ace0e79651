//===- artifact_io.cc - Reading and writing .kiln artifacts ---------------===//
#include "target/artifact/artifact_io.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace kiln::artifact {
namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'A', 'R', 'T', '\n'};

void FillOne(const Value* v, TensorSignature* s) {
  s->set_name(v->name());
  s->set_dtype(std::string(DTypeName(v->type().dtype())));
  for (const Dim& d : v->type().shape().dims()) {
    s->add_dims(d.is_static() ? d.value() : -1);
    s->add_dim_symbols(d.is_symbolic() ? d.symbol() : "");
  }
}

}  // namespace

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

absl::Status WriteArtifact(const Artifact& artifact, const std::string& path) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream sos(&bytes);
    google::protobuf::io::CodedOutputStream cos(&sos);
    cos.SetSerializationDeterministic(true);
    if (!artifact.SerializeToCodedStream(&cos)) return absl::InternalError("cannot serialize the artifact");
  }
  std::ofstream f(path, std::ios::binary);
  if (!f) return absl::InvalidArgumentError(absl::StrCat("cannot write '", path, "'"));
  f.write(kMagic, sizeof kMagic);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) return absl::InvalidArgumentError(absl::StrCat("cannot write '", path, "'"));
  return absl::OkStatus();
}

absl::StatusOr<Artifact> ReadArtifact(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat(path, ": cannot open file"));
  std::stringstream ss;
  ss << f.rdbuf();
  std::string bytes = ss.str();
  if (bytes.size() < sizeof kMagic || bytes.compare(0, sizeof kMagic, kMagic, sizeof kMagic) != 0)
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a kiln artifact (bad magic)"));
  Artifact a;
  if (!a.ParseFromArray(bytes.data() + sizeof kMagic, static_cast<int>(bytes.size() - sizeof kMagic)))
    return absl::InvalidArgumentError(absl::StrCat(path, ": the artifact is truncated or corrupted"));
  if (a.format_version() != kArtifactFormatVersion)
    return absl::InvalidArgumentError(absl::StrCat(path, ": artifact format version ", a.format_version(),
                                                   "; this kiln reads version ", kArtifactFormatVersion,
                                                   " (recompile the model)"));
  return a;
}

}  // namespace kiln::artifact
