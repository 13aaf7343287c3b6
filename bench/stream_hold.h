#ifndef MLA_TAIL_BENCH_STREAM_HOLD_H_
#define MLA_TAIL_BENCH_STREAM_HOLD_H_

// Holds a stream on the GPU until the host releases it, so that what the host enqueues meanwhile
// (a start event, the timed work, a stop event) runs back to back. Without it the GPU stamps the
// start event at once and then idles while the host submits the work (a graph launch takes
// microseconds of host time): every timing would carry that gap.
//
//   StreamHold hold;                    // once
//   hold.Hold(stream);                  // a kernel spinning on a flag in mapped host memory
//   cudaEventRecord(start, stream); ... enqueue the work ...; cudaEventRecord(stop, stream);
//   hold.Release();                     // the spin ends; the work runs
//   cudaEventSynchronize(stop); if (hold.TimedOut()) ... the timing holds the host's gap
//
// The spin gives up after a time limit (the host may have waited on the GPU meanwhile, which
// would otherwise never end); TimedOut() then says the timing is not back to back.

#include <cuda_runtime_api.h>

namespace mla_tail_bench {

class StreamHold {
 public:
  StreamHold() = default;
  ~StreamHold();
  StreamHold(const StreamHold&) = delete;
  StreamHold& operator=(const StreamHold&) = delete;

  // Launches the spin on `stream` (allocating the flag on first use, on the current device).
  cudaError_t Hold(cudaStream_t stream);
  // Ends the spin the last Hold launched.
  void Release();
  // After the stream has passed the spin: whether it gave up waiting for Release.
  bool TimedOut() const;

 private:
  volatile int* flags_ = nullptr;  // mapped host memory: [0] release, [1] timed out
  int* device_flags_ = nullptr;    // the same, as the device sees it
};

}  // namespace mla_tail_bench

#endif  // MLA_TAIL_BENCH_STREAM_HOLD_H_
