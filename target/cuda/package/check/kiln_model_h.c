/* kiln_model.h as a C program sees it: the C API of a package compiles as
 * C99 with warnings as errors (target/CMakeLists.txt). */
#include "../kiln_model.h"

int kiln_model_h_check_c(const kiln_model* m);
int kiln_model_h_check_c(const kiln_model* m) {
  const kiln_tensor_info* in = kiln_model_input(m, 0);
  return in && in->dtype == KILN_F32 ? kiln_model_num_inputs(m) : kiln_model_num_host_tasks(m);
}
