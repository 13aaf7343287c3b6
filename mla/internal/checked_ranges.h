#ifndef MLA_TAIL_MLA_INTERNAL_CHECKED_RANGES_H_
#define MLA_TAIL_MLA_INTERNAL_CHECKED_RANGES_H_

// The address ranges of one device whose memory the pointer checks (pointer_checks.h) have
// found reachable: a sorted set of disjoint mapped ranges, each with the reserved range it lies
// in. Not thread-safe (its owner locks). Not part of the public API.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mla_tail::internal {

class CheckedRanges {
 public:
  // A mapped range [begin, end) and the start of the address range reserved for it: the
  // allocation's own start for a plain allocation, the reservation's (cuMemAddressReserve) for
  // mappings laid end to end in one.
  struct Range {
    uintptr_t begin, end, reservation;
    bool operator==(const Range& o) const {
      return begin == o.begin && end == o.end && reservation == o.reservation;
    }
  };

  // At most this many ranges are kept: past it the set starts again empty.
  static constexpr size_t kMaxRanges = 4096;

  // Whether [begin, end) lies in ranges of one reservation laid end to end.
  bool Covers(uintptr_t begin, uintptr_t end) const {
    auto it = std::upper_bound(ranges_.begin(), ranges_.end(), begin,
                               [](uintptr_t address, const Range& r) { return address < r.begin; });
    if (it == ranges_.begin()) return false;
    --it;
    if (begin >= it->end) return false;
    const uintptr_t reservation = it->reservation;
    while (end > it->end) {
      const uintptr_t next = it->end;
      ++it;
      if (it == ranges_.end() || it->begin != next || it->reservation != reservation) return false;
    }
    return true;
  }

  // Adds a range found reachable. Live mappings never overlap, so a kept range that overlaps it
  // belonged to memory freed since and is dropped. A range held already is no change (the stamp
  // stays).
  void Add(const Range& r) {
    const auto at =
        std::lower_bound(ranges_.begin(), ranges_.end(), r,
                         [](const Range& a, const Range& b) { return a.begin < b.begin; });
    if (at != ranges_.end() && *at == r) return;
    const size_t before = ranges_.size();
    DropOverlapping(r, /*keep_same=*/false);
    if (ranges_.size() >= kMaxRanges) ranges_.clear();
    if (ranges_.size() != before) ++stamp_;
    ranges_.insert(
        std::lower_bound(ranges_.begin(), ranges_.end(), r,
                         [](const Range& a, const Range& b) { return a.begin < b.begin; }),
        r);
  }

  // Drops the ranges that overlap `r` (memory found since at those addresses, by another
  // device's check, means theirs was freed), but for `r` itself where `keep_same` (memory every
  // device may reach, found by two). The stamp changes where one is dropped.
  void Drop(const Range& r, bool keep_same) {
    const size_t before = ranges_.size();
    DropOverlapping(r, keep_same);
    if (ranges_.size() != before) ++stamp_;
  }

  void Clear() {
    ranges_.clear();
    ++stamp_;
  }
  size_t size() const { return ranges_.size(); }

  // Changes whenever a range is dropped (by Add, Drop or Clear), never otherwise: while it holds,
  // every span Covers accepted is still accepted.
  uint64_t stamp() const { return stamp_; }

 private:
  // Drops the ranges that overlap `r`, but for `r` itself where `keep_same`.
  void DropOverlapping(const Range& r, bool keep_same) {
    ranges_.erase(std::remove_if(ranges_.begin(), ranges_.end(),
                                 [&](const Range& c) {
                                   return c.begin < r.end && r.begin < c.end &&
                                          !(keep_same && c == r);
                                 }),
                  ranges_.end());
  }

  std::vector<Range> ranges_;  // sorted by begin, disjoint
  uint64_t stamp_ = 1;
};

}  // namespace mla_tail::internal

#endif  // MLA_TAIL_MLA_INTERNAL_CHECKED_RANGES_H_
