// The NCCL transport: collectives enqueued on the caller's stream through an
// ncclComm_t that gradcomm created (and destroys) or that the caller owns (and
// gradcomm never destroys). Asynchronous errors are polled; abort() calls
// ncclCommAbort once, from any thread (the communicator's watchdog).
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

#include "comm/transport.hpp"

namespace gradcomm::comm {

class NcclTransport final : public Transport {
 public:
  // Takes an initialized communicator. `owned`: gradcomm destroys it.
  NcclTransport(ncclComm_t comm, bool owned, gcommDevice_t device);
  ~NcclTransport() override;

  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  gcommDevice_t device() const noexcept override { return device_; }
  gcommTransport_t kind() const noexcept override { return gcommTransportNccl; }
  void run(const CollectiveArgs& args) override;
  void wait_group_launched(std::chrono::steady_clock::time_point deadline) override;
  void join_group() override;  // ncclGroupStart, once per thread and group
  gcommStatus_t poll_async_error(std::string& message) noexcept override;
  void abort() noexcept override;

 private:
  void enqueue(const CollectiveArgs& a, ncclDataType_t type, cudaStream_t stream);
  void all_to_all(const CollectiveArgs& a, ncclDataType_t type, cudaStream_t stream);

  ncclComm_t comm_;
  bool owned_;
  gcommDevice_t device_;
  int rank_ = 0;
  int size_ = 1;
  float* barrier_buffer_ = nullptr;  // one float on the device, for barriers
  std::atomic<bool> aborted_{false};
  std::mutex abort_mutex_;
};

// One communicator per GPU of this process (ncclCommInitAll).
std::vector<std::unique_ptr<Transport>> make_nccl_transports_all(int ndev, const int* devices);

// A rank of a job whose ncclUniqueId the caller shared. Non-blocking init
// (NCCL >= 2.14) polled against the timeout; on timeout the communicator is
// aborted and the error says so.
std::unique_ptr<Transport> make_nccl_transport_from_id(const ncclUniqueId& id, int rank, int nranks,
                                                       gcommDevice_t device, double timeout_s);

// Waits, bounded by `deadline`, until a non-blocking communicator is no longer
// ncclInProgress; throws on error or timeout (the caller aborts it).
void wait_nccl_ready(ncclComm_t comm, std::chrono::steady_clock::time_point deadline,
                     const std::string& what);

}  // namespace gradcomm::comm
