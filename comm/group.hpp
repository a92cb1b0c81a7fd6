// Group calls (gcommGroupStart/End): collectives issued from one thread between
// them are launched together at the outermost end (ncclGroupStart/End), which is
// how one thread drives several GPUs' NCCL communicators without deadlock.
// Per thread; groups nest (counted here: NCCL sees one flat group, opened by the
// first NCCL call inside it, so a group without NCCL calls never reaches NCCL).
//
// A grouped NCCL collective is only launched at the end, so the communicator's
// watchdog event for it (recorded on the stream right after the call otherwise)
// must wait until then: recorded earlier it would complete before the collective
// even starts, and a hang would go unseen. Communicator::collective hands that
// part to the group, which completes it at the end, or fails and aborts every
// communicator of the group if the launch fails.
#pragma once

#include "comm/transport.hpp"

namespace gradcomm::comm {

class Communicator;

// Is this thread inside gcommGroupStart/End?
bool in_group() noexcept;

void group_start();

// Before an NCCL call on this thread: inside a group, opens NCCL's group (once).
void join_nccl_group();

// Throws gcommInvalidState without a matching start. At the outermost end:
// launches the group, waits until each grouped communicator has enqueued its
// calls, then completes each call; on failure every communicator with a call in
// the group is failed and aborted, and the first error is thrown.
void group_end();

// Called by Communicator::collective for a call made inside a group: the call is
// completed (Communicator::complete_grouped) or failed at the outermost end.
void add_to_group(Communicator* comm, const CollectiveArgs& args);

}  // namespace gradcomm::comm
