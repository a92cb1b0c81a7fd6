#include "comm/store_backed_transport.hpp"

#include "comm/transports.hpp"
#include "common/device.hpp"
#include "common/error.hpp"
#include "common/log.hpp"

namespace gradcomm::comm {

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

std::unique_ptr<Transport> finish_store_init(
    std::unique_ptr<Bootstrap> boot, const bootstrap::LaunchConfig& launch, const char* name,
    const std::function<std::unique_ptr<Transport>(Bootstrap& boot)>& make_inner) {
  try {
    bootstrap::agree_on_transport(*boot, name);
    auto inner = make_inner(*boot);
    const TransportEntry* chosen = find_transport(inner->kind());  // "auto" names what it chose
    GCOMM_INFO(INIT, "rank ", launch.rank, " of ", launch.world_size, ": ",
               chosen != nullptr ? chosen->name : name, " transport on ", describe_device(inner->device()),
               " (met at ", boot->address(), ", ", launch.source, ")");
    return std::make_unique<StoreBackedTransport>(std::move(inner), std::move(boot), launch.timeout_s);
  } catch (...) {  // whatever was thrown: the peers waiting for this rank hear why now
    boot->abort(as_error(std::current_exception()).message());
    throw;
  }
}

}  // namespace gradcomm::comm
