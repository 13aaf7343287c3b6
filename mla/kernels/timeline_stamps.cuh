#ifndef MLA_TAIL_MLA_KERNELS_TIMELINE_STAMPS_CUH_
#define MLA_TAIL_MLA_KERNELS_TIMELINE_STAMPS_CUH_

// The fused kernels' timeline stamps. bench/timeline_probe.cu includes the kernels' sources with
// these defined, to record when thread 0 of each block reaches each point of its chain
// (MLA_TIMELINE_STAMP_AFTER: once `value`, a word the point produced, is available); everywhere
// else they compile to nothing.

#ifndef MLA_TIMELINE_STAMP
#define MLA_TIMELINE_STAMP(point)
#endif
#ifndef MLA_TIMELINE_STAMP_AFTER
#define MLA_TIMELINE_STAMP_AFTER(point, value)
#endif

#endif  // MLA_TAIL_MLA_KERNELS_TIMELINE_STAMPS_CUH_
