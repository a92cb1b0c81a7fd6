// Hands new communicators to the C API (registers their handles). Defined in
// comm_api.cpp, which owns the handle registry; used by every creation path.
#pragma once

#include <memory>
#include <vector>

#include "comm/transport.hpp"

namespace gradcomm::comm {
gcommComm_t publish_communicator(std::unique_ptr<Transport> transport, double timeout_s);
// All or nothing: out[r] for every rank, once every communicator exists.
void publish_communicators(std::vector<std::unique_ptr<Transport>> transports, double timeout_s,
                           gcommComm_t* out);
// config.timeout_s, or GRADCOMM_TIMEOUT_S / the default when it is 0.
double timeout_from(const gcommCommConfig_t& config);
}  // namespace gradcomm::comm
