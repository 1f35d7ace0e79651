// A plugin that says it was built against another target API version: kiln
// must refuse it, naming both versions, without calling into it.
#include <cstdlib>

#include "target/api/target_registry.h"

extern "C" __attribute__((visibility("default"))) int kiln_target_api_version() {
  return KILN_TARGET_API_VERSION + 1;
}

extern "C" __attribute__((visibility("default"))) void kiln_register_targets(kiln::target::TargetRegistry*) {
  std::abort();  // never reached: the version is checked first
}
