//===- executable.cc - The runtime half of a target -----------------------===//
#include "target/api/executable.h"

#include "absl/strings/str_cat.h"

namespace kiln::target {

std::string TensorSpec::ToString() const {
  std::string s = absl::StrCat(name, ": ", DTypeName(dtype), "[");
  for (size_t i = 0; i < dims.size(); ++i) {
    const bool named = i < symbols.size() && !symbols[i].empty();
    absl::StrAppend(&s, i ? "," : "", dims[i] >= 0 ? absl::StrCat(dims[i]) : named ? symbols[i] : "?");
  }
  return s + "]";
}

}  // namespace kiln::target
