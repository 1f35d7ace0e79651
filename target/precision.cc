//===- precision.cc - Narrowing a graph as --precision asks ---------------===//
#include "target/precision.h"

namespace kiln::target {

std::function<absl::StatusOr<bool>(Graph&)> NarrowingFor(Precision precision, MixedPrecisionOptions mixed) {
  return [precision, mixed](Graph& g) -> absl::StatusOr<bool> {
    switch (precision) {
      case Precision::kFp32: return false;
      case Precision::kMixed: return MixPrecision(g, mixed);
      default: return NarrowMatrixOps(g, MatrixDType(precision));
    }
  };
}

absl::StatusOr<bool> NarrowForPrecision(Graph& g, const CompileOptions& options) {
  if (options.narrow) return options.narrow(g);
  return NarrowingFor(options.precision)(g);
}

}  // namespace kiln::target
