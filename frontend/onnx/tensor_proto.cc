//===- tensor_proto.cc - ONNX TensorProto <-> kiln Tensor -----------------===//
#include "frontend/onnx/tensor_proto.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "graph/ir/dtype_dispatch.h"
#include "graph/support/status.h"
#include "onnx/onnx_pb.h"

namespace kiln::onnx_import {
namespace {

absl::StatusOr<std::string> ReadFileBytes(const std::string& path, int64_t offset, int64_t length) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFound("cannot open '", path, "'");
  f.seekg(0, std::ios::end);
  int64_t size = f.tellg();
  if (offset < 0 || offset > size) return InvalidArgument("offset ", offset, " is past the end of '", path, "'");
  if (length < 0) length = size - offset;
  if (offset + length > size)
    return InvalidArgument("'", path, "' holds ", size, " bytes; ", offset + length, " were asked for");
  std::string data(length, '\0');
  f.seekg(offset);
  f.read(data.data(), length);
  if (!f) return InvalidArgument("read of '", path, "' failed");
  return data;
}

absl::StatusOr<std::string> ReadExternal(const onnx::TensorProto& p, const std::string& base_dir) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : p.external_data()) {
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") offset = std::strtoll(kv.value().c_str(), nullptr, 10);
    else if (kv.key() == "length") length = std::strtoll(kv.value().c_str(), nullptr, 10);
  }
  if (location.empty()) return InvalidArgument("external data of tensor '", p.name(), "' has no location");
  if (base_dir.empty()) return InvalidArgument("tensor '", p.name(), "' uses external data, which is not allowed here");
  std::filesystem::path rel(location);
  if (rel.is_absolute() || location.find("..") != std::string::npos)
    return InvalidArgument("external data location '", location, "' of tensor '", p.name(),
                           "' must be a relative path inside the model's directory");
  std::string path = (std::filesystem::path(base_dir) / rel).string();
  auto bytes = ReadFileBytes(path, offset, length);
  if (!bytes.ok())
    return InvalidArgument("external data of tensor '", p.name(), "': ", bytes.status().message());
  return bytes;
}

// Copies typed repeated fields into `t`, checking the count.
template <typename Field, typename F>
absl::Status FillFrom(const onnx::TensorProto& p, const Field& field, Tensor& t, F convert) {
  if (static_cast<int64_t>(field.size()) != t.numel())
    return InvalidArgument("tensor '", p.name(), "' holds ", field.size(), " values but its shape needs ", t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) convert(i, field.Get(static_cast<int>(i)));
  return absl::OkStatus();
}

// The values a tensor's typed fields hold (the field its dtype travels in).
int64_t TypedValues(const onnx::TensorProto& p, DType dt) {
  switch (dt) {
    case DType::kString: return p.string_data_size();
    case DType::kF32: return p.float_data_size();
    case DType::kF64: return p.double_data_size();
    case DType::kI64: return p.int64_data_size();
    case DType::kU32: case DType::kU64: return p.uint64_data_size();
    default: return p.int32_data_size();
  }
}

}  // namespace

absl::StatusOr<Tensor> TensorFromProto(const onnx::TensorProto& p, const std::string& base_dir) {
  auto dt = DTypeFromOnnx(p.data_type());
  if (!dt) return InvalidArgument("tensor '", p.name(), "' has unknown data type ", p.data_type());
  if (*dt == DType::kC64 || *dt == DType::kC128)
    return Unimplemented("tensor '", p.name(), "' is complex, which kiln does not support");
  Dims dims;
  int64_t numel = 1;
  for (int64_t d : p.dims()) {
    if (d < 0) return InvalidArgument("tensor '", p.name(), "' has negative dimension ", d);
    if (d > 0 && numel > (int64_t{1} << 40) / d)
      return InvalidArgument("tensor '", p.name(), "' is too large");
    numel *= d;
    dims.push_back(d);
  }
  if (p.has_segment()) return Unimplemented("tensor '", p.name(), "' is segmented, which kiln does not support");
  const bool external = p.data_location() == onnx::TensorProto::EXTERNAL;
  // What the shape declares is checked against the values present before
  // anything is allocated: a small file cannot ask for gigabytes.
  const bool raw_data = external || p.has_raw_data();
  if (!raw_data && TypedValues(p, *dt) != numel)
    return InvalidArgument("tensor '", p.name(), "' holds ", TypedValues(p, *dt), " values but its shape needs ", numel);
  if (*dt == DType::kString) {
    if (external) return Unimplemented("string tensor '", p.name(), "' with external data");
    Tensor t(*dt, dims);
    std::string* out = t.data<std::string>();
    KILN_RETURN_IF_ERROR(FillFrom(p, p.string_data(), t, [&](int64_t i, const std::string& s) { out[i] = s; }));
    return t;
  }
  std::string raw;
  bool has_raw = false;
  if (external) {
    KILN_ASSIGN_OR_RETURN(raw, ReadExternal(p, base_dir));
    has_raw = true;
  } else if (p.has_raw_data()) {
    raw = p.raw_data();
    has_raw = true;
  }
  size_t elem = DTypeSize(*dt);
  if (numel * elem > (size_t{1} << 34))
    return InvalidArgument("tensor '", p.name(), "' is too large");
  if (has_raw && raw.size() != static_cast<size_t>(numel) * elem)
    return InvalidArgument("tensor '", p.name(), "' has ", raw.size(), " bytes of data but its shape and type need ",
                           static_cast<size_t>(numel) * elem);
  Tensor t(*dt, dims);
  if (has_raw) {
    if (!raw.empty()) std::memcpy(t.raw(), raw.data(), raw.size());
    return t;
  }
  switch (*dt) {
    case DType::kF32: {
      float* o = t.data<float>();
      KILN_RETURN_IF_ERROR(FillFrom(p, p.float_data(), t, [&](int64_t i, float v) { o[i] = v; }));
      break;
    }
    case DType::kF64: {
      double* o = t.data<double>();
      KILN_RETURN_IF_ERROR(FillFrom(p, p.double_data(), t, [&](int64_t i, double v) { o[i] = v; }));
      break;
    }
    case DType::kI64: {
      int64_t* o = t.data<int64_t>();
      KILN_RETURN_IF_ERROR(FillFrom(p, p.int64_data(), t, [&](int64_t i, int64_t v) { o[i] = v; }));
      break;
    }
    case DType::kU32:
    case DType::kU64: {
      KILN_RETURN_IF_ERROR(FillFrom(p, p.uint64_data(), t, [&](int64_t i, uint64_t v) {
        if (*dt == DType::kU32) t.data<uint32_t>()[i] = static_cast<uint32_t>(v);
        else t.data<uint64_t>()[i] = v;
      }));
      break;
    }
    case DType::kF16:
    case DType::kBF16: {
      uint16_t* o = t.data<uint16_t>();
      KILN_RETURN_IF_ERROR(FillFrom(p, p.int32_data(), t, [&](int64_t i, int32_t v) { o[i] = static_cast<uint16_t>(v); }));
      break;
    }
    default: {  // i8 i16 i32 u8 u16 bool travel in int32_data
      DType d = *dt;
      KILN_RETURN_IF_ERROR(FillFrom(p, p.int32_data(), t, [&](int64_t i, int32_t v) {
        DispatchNumeric(d, [&]<typename T>() { t.data<T>()[i] = static_cast<T>(v); });
      }));
      break;
    }
  }
  return t;
}

void TensorToProto(const Tensor& t, const std::string& name, onnx::TensorProto* p) {
  p->Clear();
  p->set_name(name);
  p->set_data_type(DTypeToOnnx(t.dtype()));
  for (int64_t d : t.dims()) p->add_dims(d);
  if (t.dtype() == DType::kString) {
    for (const std::string& s : t.span<std::string>()) p->add_string_data(s);
    return;
  }
  p->set_raw_data(std::string(static_cast<const char*>(t.raw()), t.nbytes()));
}

absl::StatusOr<Tensor> ReadTensorProtoFile(const std::string& path, std::string* name) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, ReadFileBytes(path, 0, -1));
  onnx::TensorProto p;
  if (!p.ParseFromString(bytes)) return InvalidArgument(path, ": not a serialized ONNX TensorProto");
  if (name) *name = p.name();
  auto t = TensorFromProto(p, std::filesystem::path(path).parent_path().string());
  if (!t.ok()) return absl::Status(t.status().code(), absl::StrCat(path, ": ", t.status().message()));
  return t;
}

absl::Status WriteTensorProtoFile(const std::string& path, const Tensor& t, const std::string& name) {
  onnx::TensorProto p;
  TensorToProto(t, name, &p);
  std::ofstream f(path, std::ios::binary);
  if (!f || !p.SerializeToOstream(&f)) return InvalidArgument("cannot write '", path, "'");
  return absl::OkStatus();
}

}  // namespace kiln::onnx_import
