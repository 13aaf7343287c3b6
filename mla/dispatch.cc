#include "mla_tail/mla/dispatch.h"

namespace mla_tail {

const char* FusedKernelName(FusedKernel kernel) {
  switch (kernel) {
    case FusedKernel::kAuto:
      return "Auto";
#define MLA_TAIL_NAME_CASE(name) \
  case FusedKernel::k##name:     \
    return #name;
      MLA_TAIL_FUSED_KERNELS(MLA_TAIL_NAME_CASE)
#undef MLA_TAIL_NAME_CASE
  }
  return "?";
}

}  // namespace mla_tail
