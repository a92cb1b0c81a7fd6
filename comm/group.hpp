// Group calls (gcommGroupStart/End): collectives issued from one thread between
// them are launched together at the outermost end (for NCCL: ncclGroupStart/End),
// which is how one thread drives several GPUs' NCCL communicators without deadlock.
// Per thread; groups nest (counted here). A transport that launches grouped calls
// late opens its own flat group at its first call inside ours (Transport::join_group
// -> join_transport_group) and is closed at our outermost end, so a group without
// such calls never reaches it. This file knows no transport.
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

// A transport's own group: how to open it and how to launch what it holds.
// `close` throws on failure (a launch that is still in progress is not one).
struct TransportGroupHooks {
  void (*open)();
  void (*close)();
  // gcommInvalidArgument from close is a mismatch between the ranks' calls that
  // leaves every communicator usable (the host transports' sends and receives):
  // the group's calls are completed, not failed, and the error is returned.
  bool mismatch_is_local = false;
};

// Inside a group on this thread: opens `hooks`' group the first time (by
// address: pass a static) and closes it at the outermost end. Outside: nothing.
void join_transport_group(const TransportGroupHooks& hooks);

// Throws gcommInvalidState without a matching start. At the outermost end:
// launches the group, waits until each grouped communicator has enqueued its
// calls, then completes each call; on failure every communicator with a call in
// the group is failed and aborted, and the first error is thrown.
void group_end();

// Called by Communicator::collective for a call made inside a group: the call is
// completed (Communicator::complete_grouped) or failed at the outermost end.
void add_to_group(Communicator* comm, const CollectiveArgs& args);

}  // namespace gradcomm::comm
