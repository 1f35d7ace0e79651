//===- trace_kind_test.cc - The trace a file's name asks for --------------===//
//
// target::TraceKindOf is the one rule by which kiln run, kiln sim and Python
// choose a trace's form: ".pftrace" or ".perfetto-trace" Perfetto's
// protobuf, ".gz" gzip'd JSON, anything else JSON.
//
//===----------------------------------------------------------------------===//
#include "gtest/gtest.h"
#include "target/api/executable.h"

namespace kiln::target {
namespace {

TEST(TraceKind, TheFormFollowsTheFileName) {
  EXPECT_EQ(TraceKindOf("run.pftrace"), ReportKind::kTracePerfetto);
  EXPECT_EQ(TraceKindOf("run.perfetto-trace"), ReportKind::kTracePerfetto);
  EXPECT_EQ(TraceKindOf("run.json.gz"), ReportKind::kTraceJsonGz);
  EXPECT_EQ(TraceKindOf("run.json"), ReportKind::kTraceJson);
  EXPECT_EQ(TraceKindOf("run"), ReportKind::kTraceJson);
}

}  // namespace
}  // namespace kiln::target
