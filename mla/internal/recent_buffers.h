#ifndef MLA_TAIL_MLA_INTERNAL_RECENT_BUFFERS_H_
#define MLA_TAIL_MLA_INTERNAL_RECENT_BUFFERS_H_

// The buffer sets a node or a graph-set layer validated and checked last. A runtime that
// double-buffers its activations passes two sets in turn; for a set passed again ValidateTail
// and the cached pointer checks would give the answers they gave (both depend on the shape and
// the buffers alone), so the caller skips them. Full pointer checks are never skipped. Not part
// of the public API.

#include <array>

#include "mla_tail/mla/tail_args.h"

namespace mla_tail::internal {

// Whether `a` and `b` are the same buffers: every pointer, stride and flag equal.
bool SameBuffers(const TailBuffers& a, const TailBuffers& b);

// The last sets that passed, most recent first; `count` of them are held. The holder's shape is
// fixed, so the sets alone identify a check.
using RecentBufferSets = std::array<TailBuffers, 2>;

bool IsRecent(const RecentBufferSets& sets, int count, const TailBuffers& buffers);

// Records `buffers` as the most recent set that passed (the oldest is dropped).
void MakeRecent(RecentBufferSets& sets, int& count, const TailBuffers& buffers);

}  // namespace mla_tail::internal

#endif  // MLA_TAIL_MLA_INTERNAL_RECENT_BUFFERS_H_
