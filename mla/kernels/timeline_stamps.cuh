#ifndef MLA_TAIL_MLA_KERNELS_TIMELINE_STAMPS_CUH_
#define MLA_TAIL_MLA_KERNELS_TIMELINE_STAMPS_CUH_

// The fused kernels' timeline stamp points: where thread 0 of a block may record when it reaches
// each point of its chain (MLA_TIMELINE_STAMP_AFTER: once `value`, a word the point produced, is
// available). They compile to nothing here. bench/timeline_probe links a build of the same
// sources with bench/timeline_stamps.cuh included first (//bench:stamped_kernels), which
// defines them to record, and MLA_TIMELINE_STAMP_REGISTERS as the registers a thread they take
// where a kernel's register count is held.

#ifndef MLA_TIMELINE_STAMP
#define MLA_TIMELINE_STAMP(point)
#endif
#ifndef MLA_TIMELINE_STAMP_AFTER
#define MLA_TIMELINE_STAMP_AFTER(point, value)
#endif
#ifndef MLA_TIMELINE_STAMP_REGISTERS
#define MLA_TIMELINE_STAMP_REGISTERS 0
#endif

#endif  // MLA_TAIL_MLA_KERNELS_TIMELINE_STAMPS_CUH_
