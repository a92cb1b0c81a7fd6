// Hands a new communicator to the C API (registers its handle). Defined in
// comm_api.cpp, which owns the handle registry.
#pragma once

#include <memory>

#include "comm/transport.hpp"

namespace gradcomm::comm {
gcommComm_t publish_communicator(std::unique_ptr<Transport> transport, double timeout_s);
}  // namespace gradcomm::comm
