#ifndef MLA_TAIL_MLA_INTERNAL_RECENT_BUFFERS_H_
#define MLA_TAIL_MLA_INTERNAL_RECENT_BUFFERS_H_

// The buffer sets a node or a graph-set layer validated and checked last. A runtime that
// double-buffers its activations passes two sets in turn; for a set passed again ValidateTail
// would give the answer it gave (it depends on the shape and the buffers alone), and so would
// the cached pointer checks while the cache has forgotten nothing since (its stamp,
// CheckedPointersStamp, unchanged), so the caller skips them. Full pointer checks are never
// skipped. Not part of the public API.

#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "mla_tail/mla/tail_args.h"

namespace mla_tail::internal {

// The number of fields of an aggregate without nested aggregates: the most initializers a braced
// initialization of it takes.
namespace field_count {
struct AnyField {
  template <typename T>
  constexpr operator T() const {
    return T{};
  }
};
template <typename T, typename Indices, typename = void>
struct TakesInitializers : std::false_type {};
template <typename T, size_t... I>
struct TakesInitializers<T, std::index_sequence<I...>,
                         std::void_t<decltype(T{(void(I), AnyField{})...})>> : std::true_type {};
}  // namespace field_count
template <typename T, size_t kCount = 0>
constexpr size_t FieldCount() {
  if constexpr (field_count::TakesInitializers<T, std::make_index_sequence<kCount + 1>>::value) {
    return FieldCount<T, kCount + 1>();
  } else {
    return kCount;
  }
}

// Whether `a` and `b` are the same buffers: every pointer, stride and flag equal (all
// kTailBuffersFields of them).
inline constexpr size_t kTailBuffersFields = 20;
bool SameBuffers(const TailBuffers& a, const TailBuffers& b);

// The last sets that passed, most recent first; `count` of them are held, all checked while the
// pointer cache's stamp was `stamp` (read before each check). The holder's shape is fixed, so the
// sets alone identify a validation.
using RecentBufferSets = std::array<TailBuffers, 2>;
struct RecentSets {
  RecentBufferSets& sets;
  int& count;
  uint64_t& stamp;
};

// Whether `buffers` is held and the cache's stamp is still the sets' (0, a device whose checks are
// not cached: never).
bool IsRecent(const RecentSets& recent, const TailBuffers& buffers, uint64_t stamp_now);

// Records `buffers`, checked while the stamp was `stamp`, as the most recent set (the oldest is
// dropped; every set is dropped when `stamp` differs from theirs).
void MakeRecent(const RecentSets& recent, const TailBuffers& buffers, uint64_t stamp);

}  // namespace mla_tail::internal

#endif  // MLA_TAIL_MLA_INTERNAL_RECENT_BUFFERS_H_
