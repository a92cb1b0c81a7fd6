// Pooled CUDA events. Creating an event costs far more than recording one, and
// the cache records events on every cross-stream free, so released events are
// kept and reused. Handles index a table so the cache never sees cudaEvent_t.
#include <cuda_runtime_api.h>

#include <vector>

#include "common/cuda_check.hpp"
#include "common/device.hpp"
#include "common/error.hpp"
#include "memory/events/event_source.hpp"

namespace gradcomm {
namespace memory {
namespace {

class CudaEventSource final : public EventSource {
 public:
  explicit CudaEventSource(int ordinal) : ordinal_(ordinal) {}
  ~CudaEventSource() override {
    // Never switch to the device just to destroy nothing (switching can create
    // its context).
    if (events_.empty()) return;
    try {
      DeviceGuard guard(ordinal_);
      for (cudaEvent_t e : events_) GCOMM_CUDA_WARN(cudaEventDestroy(e));
    } catch (...) {
      // Could not switch to the device: the events die with the context.
    }
  }

  Event record(gcommStream_t stream) override {
    DeviceGuard guard(ordinal_);
    size_t index;
    if (free_.empty()) {
      cudaEvent_t e = nullptr;
      GCOMM_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      events_.push_back(e);
      // So that release(), which must not throw, never needs to grow free_.
      free_.reserve(events_.size());
      index = events_.size() - 1;
    } else {
      index = free_.back();
      free_.pop_back();
    }
    cudaError_t err = cudaEventRecord(events_[index], reinterpret_cast<cudaStream_t>(stream));
    if (err != cudaSuccess) {
      free_.push_back(index);
      GCOMM_CUDA_CHECK(err);
    }
    return index + 1;
  }

  bool query(Event event) override {
    DeviceGuard guard(ordinal_);
    cudaError_t err = cudaEventQuery(at(event));
    if (err == cudaErrorNotReady) {
      (void)cudaGetLastError();
      return false;
    }
    GCOMM_CUDA_CHECK(err);
    return true;
  }

  void synchronize(Event event) override {
    DeviceGuard guard(ordinal_);
    GCOMM_CUDA_CHECK(cudaEventSynchronize(at(event)));
  }

  void release(Event event) noexcept override {
    if (event >= 1 && event <= events_.size()) free_.push_back(static_cast<size_t>(event - 1));
  }

 private:
  cudaEvent_t at(Event event) const {
    if (event < 1 || event > events_.size()) fail(gcommInternalError, "unknown event handle ", event);
    return events_[event - 1];
  }

  int ordinal_;
  std::vector<cudaEvent_t> events_;
  std::vector<size_t> free_;
};

}  // namespace

std::unique_ptr<EventSource> make_cuda_event_source(int ordinal) {
  return std::make_unique<CudaEventSource>(ordinal);
}

}  // namespace memory
}  // namespace gradcomm
