#ifndef MLA_TAIL_TESTING_SUPPORT_CAPTURE_ON_ANOTHER_THREAD_H_
#define MLA_TAIL_TESTING_SUPPORT_CAPTURE_ON_ANOTHER_THREAD_H_

#include <cuda_runtime.h>

#include <future>
#include <thread>

namespace mla_tail_testing {

// Another thread's stream capture in Global mode on a blocking stream of device 0 (one that
// legacy-stream work would join), begun on construction (a memset of `scratch`'s first 4096
// bytes recorded) and ended by Finish(), which returns how it ended: a call made meanwhile that
// breaks other threads' captures shows there.
class CaptureOnAnotherThread {
 public:
  explicit CaptureOnAnotherThread(void* scratch) {
    std::promise<void> capturing;
    std::future<void> started = capturing.get_future();
    thread_ = std::thread([this, scratch, &capturing] {
      cudaSetDevice(0);
      cudaStream_t blocking = nullptr;
      cudaStreamCreate(&blocking);
      cudaStreamBeginCapture(blocking, cudaStreamCaptureModeGlobal);
      cudaMemsetAsync(scratch, 0, 4096, blocking);
      capturing.set_value();
      finish_.get_future().wait();
      cudaMemsetAsync(scratch, 1, 4096, blocking);
      cudaGraph_t graph = nullptr;
      ended_ = cudaStreamEndCapture(blocking, &graph);
      if (graph != nullptr) cudaGraphDestroy(graph);
      cudaStreamDestroy(blocking);
    });
    started.wait();
  }
  CaptureOnAnotherThread(const CaptureOnAnotherThread&) = delete;
  CaptureOnAnotherThread& operator=(const CaptureOnAnotherThread&) = delete;
  ~CaptureOnAnotherThread() { Finish(); }

  // How the other thread's capture ended.
  cudaError_t Finish() {
    if (thread_.joinable()) {
      finish_.set_value();
      thread_.join();
    }
    return ended_;
  }

 private:
  std::thread thread_;
  std::promise<void> finish_;
  cudaError_t ended_ = cudaErrorUnknown;
};

}  // namespace mla_tail_testing

#endif  // MLA_TAIL_TESTING_SUPPORT_CAPTURE_ON_ANOTHER_THREAD_H_
