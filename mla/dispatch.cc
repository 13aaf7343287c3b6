#include "mla_tail/mla/dispatch.h"

namespace mla {

const char* FusedKernelName(FusedKernel kernel) {
  switch (kernel) {
    case FusedKernel::kAuto:
      return "auto";
    case FusedKernel::kColumnSplit:
      return "split";
    case FusedKernel::kLatentSplit:
      return "ksplit";
    case FusedKernel::kTile64x64Pipeline4:
      return "wgmma-p4";
    case FusedKernel::kTile64x64AllSteps:
      return "wgmma-a8";
    case FusedKernel::kTile64x128:
      return "wgmma-n128";
    case FusedKernel::kTile64x32AllSteps:
      return "wgmma-a8n32";
    case FusedKernel::kTile64x64Pipeline6:
      return "wgmma-p6";
    case FusedKernel::kPersistent128x128:
      return "wgmma-ws";
  }
  return "?";
}

}  // namespace mla
