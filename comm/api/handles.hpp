// Internal access to the communicator behind a C handle, for the floors above
// (the reducer's C API). acquire_communicator counts a user (gcommCommDestroy
// refuses while users remain); release_communicator undoes it and never throws.
#pragma once

#include "comm/communicator.hpp"

namespace gradcomm::comm {
Communicator& acquire_communicator(gcommComm_t handle);
void release_communicator(gcommComm_t handle) noexcept;
// gcommInvalidState while gcommCommDestroy would refuse (reducers still use it, or
// a group is open on it), asked before anything changes.
void refuse_to_destroy_communicator(gcommComm_t handle);
}  // namespace gradcomm::comm
