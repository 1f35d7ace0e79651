//===- executable.cc - The runtime half of a target -----------------------===//
#include "target/api/executable.h"

#include "absl/strings/match.h"
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

ReportKind TraceKindOf(const std::string& path) {
  if (absl::EndsWith(path, ".pftrace") || absl::EndsWith(path, ".perfetto-trace")) return ReportKind::kTracePerfetto;
  if (absl::EndsWith(path, ".gz")) return ReportKind::kTraceJsonGz;
  return ReportKind::kTraceJson;
}

}  // namespace kiln::target
