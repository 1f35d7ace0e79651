//===- hostops_library.cc - libkiln_hostops.so: the reference host-op provider ===//
//
// The one symbol of libkiln_hostops.so: an application that embeds a
// package with host tasks points KILN_HOSTOPS_LIBRARY at this library (or
// leaves it beside libkiln_model.so, where the launcher looks first), and
// the launcher calls kiln_host_ops_v1 for kiln's reference kernels.
//
//===----------------------------------------------------------------------===//
#include "runtime/host_ops.h"

extern "C" __attribute__((visibility("default"))) const void* kiln_host_ops_v1(void) {
  return kiln::runtime::ReferenceHostOps();
}
