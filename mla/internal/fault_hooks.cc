#include "mla/internal/fault_hooks.h"

#include <utility>

namespace mla_tail::internal {
namespace {

FaultHooks& Hooks() {
  static FaultHooks* hooks = new FaultHooks();
  return *hooks;
}

}  // namespace

const FaultHooks& ActiveFaultHooks() { return Hooks(); }

ScopedFaultHooks::ScopedFaultHooks(FaultHooks hooks) : previous_(std::move(Hooks())) {
  Hooks() = std::move(hooks);
}

ScopedFaultHooks::~ScopedFaultHooks() { Hooks() = std::move(previous_); }

}  // namespace mla_tail::internal
