#include "comm/store_backed_transport.hpp"

#include "common/error.hpp"

namespace gradcomm::comm::bootstrap {

StoreBackedTransport::StoreBackedTransport(std::unique_ptr<Transport> inner, std::unique_ptr<Bootstrap> boot,
                                           double timeout_s)
    : inner_(std::move(inner)), boot_(std::move(boot)), timeout_s_(timeout_s) {}

StoreBackedTransport::~StoreBackedTransport() {
  int rank = inner_->rank();
  std::string why;
  if (inner_->poll_async_error(why) != gcommSuccess) failed_.store(true);
  inner_.reset();
  if (failed_.load())
    boot_->abort(cat("rank ", rank, "'s communicator failed or was aborted"));
  else
    boot_->shutdown(timeout_s_);
}

gcommStatus_t StoreBackedTransport::poll_async_error(std::string& message) noexcept {
  gcommStatus_t s = inner_->poll_async_error(message);
  if (s != gcommSuccess) failed_.store(true);
  return s;
}

void StoreBackedTransport::abort() noexcept {
  failed_.store(true);
  inner_->abort();
}

}  // namespace gradcomm::comm::bootstrap
