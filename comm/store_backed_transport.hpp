// A transport whose job met through the rendezvous store. It keeps the store (and,
// on rank 0, its server) for the life of the communicator, for the shutdown
// barrier: destroying it destroys the inner transport, then meets the other ranks
// at 'shutdown' (bounded by the timeout) so that rank 0's store outlives every
// rank's use of it. After an abort it tells the others instead of waiting.
// Everything else is the inner transport's.
#pragma once

#include <atomic>
#include <functional>
#include <memory>

#include "comm/bootstrap/bootstrap.hpp"
#include "comm/bootstrap/launch_env.hpp"
#include "comm/transport.hpp"

namespace gradcomm::comm {

using bootstrap::Bootstrap;

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
  void join_group() override { inner_->join_group(); }
  std::optional<uint64_t> payload_bytes_sent() const noexcept override {
    return inner_->payload_bytes_sent();
  }
  bool waited_on_ns(int q, uint64_t& ns) const noexcept override { return inner_->waited_on_ns(q, ns); }
  gcommStatus_t poll_async_error(std::string& message) noexcept override;
  void abort() noexcept override;

 private:
  std::unique_ptr<Transport> inner_;
  std::unique_ptr<Bootstrap> boot_;
  double timeout_s_;
  std::atomic<bool> failed_{false};
};

// The end every store-made transport shares, once its ranks have met: they agree
// on `name` (every rank builds the same transport), `make_inner` builds it over the
// met job, and the result keeps the store for the shutdown barrier. A failure is
// told to the other ranks through the store (boot->abort) before it is thrown.
std::unique_ptr<Transport> finish_store_init(
    std::unique_ptr<Bootstrap> boot, const bootstrap::LaunchConfig& launch, const char* name,
    const std::function<std::unique_ptr<Transport>(Bootstrap& boot)>& make_inner);

}  // namespace gradcomm::comm
