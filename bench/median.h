#ifndef MLA_TAIL_BENCH_MEDIAN_H_
#define MLA_TAIL_BENCH_MEDIAN_H_

#include <algorithm>
#include <vector>

namespace mla_tail_bench {

// The median of `values` (the mean of the two middle ones for an even count); 0 for none.
template <typename T>
double Median(std::vector<T> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? double{values[n / 2]}
                    : 0.5 * (double{values[n / 2 - 1]} + double{values[n / 2]});
}

}  // namespace mla_tail_bench

#endif  // MLA_TAIL_BENCH_MEDIAN_H_
