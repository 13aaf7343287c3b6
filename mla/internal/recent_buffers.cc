#include "mla/internal/recent_buffers.h"

#include <algorithm>

namespace mla_tail::internal {

// Every field of TailBuffers is compared below: a field added to it belongs there too.
static_assert(FieldCount<TailBuffers>() == kTailBuffersFields,
              "compare every TailBuffers field in SameBuffers");

bool SameBuffers(const TailBuffers& a, const TailBuffers& b) {
  return a.latent == b.latent && a.latent_row_stride == b.latent_row_stride && a.w_uv == b.w_uv &&
         a.w_uv_fp8 == b.w_uv_fp8 && a.w_head_stride == b.w_head_stride &&
         a.w_row_stride == b.w_row_stride && a.w_uv_scale == b.w_uv_scale &&
         a.w_uv_scale_head_stride == b.w_uv_scale_head_stride && a.gate == b.gate &&
         a.gate_row_stride == b.gate_row_stride && a.lengths == b.lengths && a.output == b.output &&
         a.output_fp8 == b.output_fp8 && a.output_row_stride == b.output_row_stride &&
         a.output_scale == b.output_scale &&
         a.output_scale_row_stride == b.output_scale_row_stride &&
         a.output_scale_head_stride == b.output_scale_head_stride && a.row_count == b.row_count &&
         a.row_count_before_upstream == b.row_count_before_upstream &&
         a.rows_past_count_readable == b.rows_past_count_readable;
}

bool IsRecent(const RecentSets& recent, const TailBuffers& buffers, uint64_t stamp_now) {
  if (stamp_now == 0 || stamp_now != recent.stamp) return false;
  for (int i = 0; i < recent.count; ++i) {
    if (SameBuffers(recent.sets[i], buffers)) return true;
  }
  return false;
}

void MakeRecent(const RecentSets& recent, const TailBuffers& buffers, uint64_t stamp) {
  // Sets checked under another stamp may rest on ranges the cache has dropped since.
  if (stamp != recent.stamp) {
    recent.count = 0;
    recent.stamp = stamp;
  }
  // Most recent first; a set already held moves to the front instead of taking two slots.
  RecentBufferSets& sets = recent.sets;
  int& count = recent.count;
  int held = 0;
  while (held < count && !SameBuffers(sets[held], buffers)) ++held;
  const int last = std::min(held, static_cast<int>(sets.size()) - 1);
  for (int i = last; i > 0; --i) sets[i] = sets[i - 1];
  sets[0] = buffers;
  if (held == count) count = std::min(count + 1, static_cast<int>(sets.size()));
}

}  // namespace mla_tail::internal
