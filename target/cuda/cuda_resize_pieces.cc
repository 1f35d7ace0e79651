//===- cuda_resize_pieces.cc - Nearest-neighbour Resize as one copy piece -===//
#include "target/cuda/cuda_resize_pieces.h"

#include "absl/strings/str_cat.h"
#include "graph/exec/executor.h"

namespace kiln::target::cuda {

bool IsResizeCopy(const Node& n) { return n.domain().empty() && n.op() == "Resize"; }

std::string ResizeCopyBlocker(const Node& n) {
  if (!IsResizeCopy(n)) return "not a Resize";
  if (n.GetString("mode", "nearest") != "nearest") return "only mode nearest moves elements without arithmetic";
  if (n.GetString("coordinate_transformation_mode", "half_pixel") == "tf_crop_and_resize")
    return "a crop reads an extrapolation value";
  const Value* x = n.input(0);
  const Value* y = n.output(0);
  if (!x || !y || !x->type().is_tensor() || !y->type().is_tensor() || !x->type().shape().is_static() ||
      !y->type().shape().is_static())
    return "shapes known only at run time";
  for (int i = 1; i < n.num_inputs(); ++i)
    if (n.input(i) && !n.input(i)->is_constant()) return "scales or sizes computed at run time";
  const std::vector<int64_t> in = x->type().shape().StaticDims(), out = y->type().shape().StaticDims();
  const int r = static_cast<int>(in.size());
  if (r < 2 || static_cast<int>(out.size()) != r) return "not an image of two or more dimensions";
  for (int d = 0; d + 2 < r; ++d)
    if (in[d] != out[d]) return "a leading dimension is resized";
  const int64_t plane_out = out[r - 2] * out[r - 1];
  if (plane_out > kMaxResizeTable) return absl::StrCat(plane_out, " output pixels a plane: too large a table");
  if (in[r - 2] * in[r - 1] >= (int64_t{1} << 24)) return "planes too large to index in f32";
  return "";
}

absl::StatusOr<std::vector<CopyPiece>> ResizePiecesOf(const Node& n) {
  auto refuse = [](const std::string& why) { return absl::UnimplementedError(absl::StrCat("Resize: ", why)); };
  if (std::string why = ResizeCopyBlocker(n); !why.empty()) return refuse(why);
  const Value* x = n.input(0);
  const std::vector<int64_t> in = x->type().shape().StaticDims(), out = n.output(0)->type().shape().StaticDims();
  const int r = static_cast<int>(in.size());
  int64_t planes = 1;
  for (int d = 0; d + 2 < r; ++d) planes *= in[d];
  const int64_t plane_in = in[r - 2] * in[r - 1], plane_out = out[r - 2] * out[r - 1];
  // The reference kernel on an image whose every element is its offset in
  // its plane: its output says where each output pixel comes from.
  Tensor image(DType::kF32, in);
  float* v = image.data<float>();
  for (int64_t i = 0; i < image.numel(); ++i) v[i] = static_cast<float>(i % plane_in);
  Executor exec;
  auto result = exec.RunNode(n, [&](const Value* value) -> const Tensor* {
    if (value == x) return &image;
    return value && value->is_constant() ? &value->constant() : nullptr;
  });
  if (!result.ok()) return refuse(std::string(result.status().message()));
  const Tensor& sources = (*result)[0];
  if (sources.numel() != planes * plane_out) return refuse("the reference's output has another shape");
  CopyPiece p;
  p.dims = {planes, plane_out};
  p.src_strides = {plane_in, 0};
  p.dst_strides = {plane_out, 1};
  p.table_dim = 1;
  p.table.resize(static_cast<size_t>(plane_out));
  for (int64_t i = 0; i < plane_out; ++i) {
    const double s = sources.GetDouble(i);
    if (!(s >= 0 && s < static_cast<double>(plane_in)) || s != static_cast<double>(static_cast<int64_t>(s)))
      return refuse("an output pixel is no input pixel");
    p.table[static_cast<size_t>(i)] = static_cast<int64_t>(s);
  }
  return std::vector<CopyPiece>{p};
}

}  // namespace kiln::target::cuda
