//===- trace_test_util.h - A trace to record into, for tests ----*- C++ -*-===//
#pragma once

#include "sim/model/trace.h"

namespace kiln::sim {

// A trace reset with `o` and recording.
inline Trace FreshTrace(TraceOptions o = {}) {
  Trace t;
  t.Reset(o);
  t.set_enabled(true);
  return t;
}

}  // namespace kiln::sim
