#include "reducer/side_stream.hpp"

#include <cuda_runtime_api.h>

#include "common/cuda_check.hpp"
#include "common/device.hpp"

namespace gradcomm::reducer {

namespace {
cudaStream_t as_stream(gcommStream_t s) {
  return static_cast<cudaStream_t>(s);
}
cudaEvent_t as_event(void* e) {
  return static_cast<cudaEvent_t>(e);
}
}  // namespace

SideStream::SideStream(gcommDevice_t device, comm::HostLane* lane)
    : cuda_(device.kind == gcommDeviceCuda), ordinal_(device.ordinal) {
  if (!cuda_) {
    lane_ = lane;
    return;
  }
  DeviceGuard guard(ordinal_);
  cudaStream_t s = nullptr;
  cudaEvent_t e[3] = {nullptr, nullptr, nullptr};
  // Events without timing are the cheapest to record and wait on.
  GCOMM_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (cudaEvent_t& ev : e) {
    cudaError_t err = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    if (err == cudaSuccess) continue;
    (void)cudaGetLastError();
    for (cudaEvent_t made : e)
      if (made != nullptr) cudaEventDestroy(made);
    cudaStreamDestroy(s);
    throw_cuda_error(err, "cudaEventCreateWithFlags", __FILE__, __LINE__);
  }
  stream_ = s;
  to_side_ = e[0];
  from_side_ = e[1];
  marked_ = e[2];
}

SideStream::~SideStream() {
  if (!cuda_) {
    drain_host();  // nothing queued may outlive what it captured
    return;
  }
  DeviceGuard guard(ordinal_);
  GCOMM_CUDA_WARN(cudaStreamSynchronize(as_stream(stream_)));
  if (mark_pending_) GCOMM_CUDA_WARN(cudaEventSynchronize(as_event(marked_)));
  GCOMM_CUDA_WARN(cudaEventDestroy(as_event(marked_)));
  GCOMM_CUDA_WARN(cudaEventDestroy(as_event(to_side_)));
  GCOMM_CUDA_WARN(cudaEventDestroy(as_event(from_side_)));
  GCOMM_CUDA_WARN(cudaStreamDestroy(as_stream(stream_)));
}

// One event per direction is enough: cudaStreamWaitEvent waits for the record
// that precedes it, so re-recording afterwards does not disturb an earlier wait.
void SideStream::wait_for(gcommStream_t other) {
  if (!cuda_ || other == stream_) return;
  DeviceGuard guard(ordinal_);
  GCOMM_CUDA_CHECK(cudaEventRecord(as_event(to_side_), as_stream(other)));
  GCOMM_CUDA_CHECK(cudaStreamWaitEvent(as_stream(stream_), as_event(to_side_), 0));
}

void SideStream::run(std::function<void()> work) {
  if (lane_ != nullptr) {
    lane_->push(std::move(work), errors_);
  } else {
    work();
  }
}

void SideStream::drain_host() const noexcept {
  if (lane_ != nullptr) lane_->wait_idle();
}

void SideStream::quiesce() {
  if (!cuda_) return drain_host();
  synchronize();
}

void SideStream::make_wait(gcommStream_t other) {
  if (!cuda_) {  // the caller's host work runs now: after the side's
    if (lane_ != nullptr) lane_->drain(errors_);
    return;
  }
  if (other == stream_) return;
  DeviceGuard guard(ordinal_);
  GCOMM_CUDA_CHECK(cudaEventRecord(as_event(from_side_), as_stream(stream_)));
  GCOMM_CUDA_CHECK(cudaStreamWaitEvent(as_stream(other), as_event(from_side_), 0));
}

void SideStream::mark(gcommStream_t other) {
  if (!cuda_) return;
  DeviceGuard guard(ordinal_);
  GCOMM_CUDA_CHECK(cudaEventRecord(as_event(marked_), as_stream(other)));
  mark_pending_ = true;
}

void SideStream::wait_for_marked() {
  if (!cuda_ || !mark_pending_) return;
  DeviceGuard guard(ordinal_);
  GCOMM_CUDA_CHECK(cudaStreamWaitEvent(as_stream(stream_), as_event(marked_), 0));
  mark_pending_ = false;
}

void SideStream::synchronize() {
  synchronize(stream_);
}

void SideStream::synchronize(gcommStream_t other) {
  if (!cuda_) {
    if (lane_ != nullptr) lane_->drain(errors_);
    return;
  }
  DeviceGuard guard(ordinal_);
  GCOMM_CUDA_CHECK(cudaStreamSynchronize(as_stream(other)));
}

}  // namespace gradcomm::reducer
