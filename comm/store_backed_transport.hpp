// A transport whose job met through the rendezvous store. It keeps the store (and,
// on rank 0, its server) for the life of the communicator, for the shutdown
// barrier: destroying it destroys the inner transport, then meets the other ranks
// at 'shutdown' (bounded by the timeout) so that rank 0's store outlives every
// rank's use of it. After an abort it tells the others instead of waiting.
// Everything else is the inner transport's.
#pragma once

#include <atomic>
#include <memory>

#include "comm/bootstrap/bootstrap.hpp"
#include "comm/transport.hpp"

namespace gradcomm::comm::bootstrap {

class StoreBackedTransport final : public Transport {
 public:
  StoreBackedTransport(std::unique_ptr<Transport> inner, std::unique_ptr<Bootstrap> boot, double timeout_s);
  ~StoreBackedTransport() override;

  int rank() const noexcept override { return inner_->rank(); }
  int size() const noexcept override { return inner_->size(); }
  gcommDevice_t device() const noexcept override { return inner_->device(); }
  gcommTransport_t kind() const noexcept override { return inner_->kind(); }
  void run(const CollectiveArgs& args) override { inner_->run(args); }
  void wait_group_launched(std::chrono::steady_clock::time_point deadline) override {
    inner_->wait_group_launched(deadline);
  }
  gcommStatus_t poll_async_error(std::string& message) noexcept override;
  void abort() noexcept override;

 private:
  std::unique_ptr<Transport> inner_;
  std::unique_ptr<Bootstrap> boot_;
  double timeout_s_;
  std::atomic<bool> failed_{false};
};

}  // namespace gradcomm::comm::bootstrap
