//===- host_kernels.h - kiln's reference kernels as HostKernels -*- C++ -*-===//
#pragma once

#include "target/api/host_kernels.h"

namespace kiln::target {

// The HostKernels of target/api backed by graph/exec's reference executor.
const HostKernels& ReferenceHostKernels();

}  // namespace kiln::target
