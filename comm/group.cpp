#include "comm/group.hpp"

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include "comm/communicator.hpp"
#include "common/deadline.hpp"
#include "common/error.hpp"

namespace gradcomm::comm {

namespace {

struct GroupState {
  int depth = 0;
  std::vector<const TransportGroupHooks*> open;                 // transports' groups opened in this one
  std::vector<std::pair<Communicator*, CollectiveArgs>> calls;  // in call order
};
thread_local GroupState t_group;

// The first failure of the launch, to be reported by every grouped call.
struct Failure {
  gcommStatus_t status = gcommSuccess;
  std::string message;
  bool local = false;  // a mismatch that leaves the communicators usable (mismatch_is_local)
  void set(gcommStatus_t s, std::string m, bool mismatch_is_local = false) {
    if (status != gcommSuccess) return;
    status = s;
    message = std::move(m);
    local = mismatch_is_local && s == gcommInvalidArgument;
  }
};

}  // namespace

bool in_group() noexcept {
  return t_group.depth > 0;
}

void group_start() {
  ++t_group.depth;
}

void join_transport_group(const TransportGroupHooks& hooks) {
  if (t_group.depth == 0) return;
  auto& open = t_group.open;
  if (std::find(open.begin(), open.end(), &hooks) != open.end()) return;
  hooks.open();
  open.push_back(&hooks);
}

void group_end() {
  if (t_group.depth == 0)
    fail(gcommInvalidState, "gcommGroupEnd without a matching gcommGroupStart on this thread");
  if (--t_group.depth > 0) return;
  std::vector<std::pair<Communicator*, CollectiveArgs>> calls;
  calls.swap(t_group.calls);
  std::vector<const TransportGroupHooks*> open;
  open.swap(t_group.open);
  // The outermost end launches the transports' grouped calls (every opened group
  // is closed, even after a failure).
  Failure failure;
  for (const TransportGroupHooks* hooks : open) {
    try {
      hooks->close();
    } catch (...) {
      const Error e = as_error(std::current_exception());
      failure.set(e.status(), e.message(), hooks->mismatch_is_local);
    }
  }
  // A mismatch of sends and receives: everything else ran; report it, abort nothing.
  Failure mismatch;
  if (failure.local) std::swap(mismatch, failure);
  // A non-blocking communicator may still be enqueueing (NCCL's ncclInProgress):
  // each one is waited for once, before any event goes on a stream behind it.
  std::vector<Communicator*> distinct;
  for (const auto& [comm, args] : calls)
    if (std::find(distinct.begin(), distinct.end(), comm) == distinct.end()) distinct.push_back(comm);
  for (Communicator* comm : distinct) {
    if (failure.status != gcommSuccess) break;
    try {
      auto deadline = deadline_after(comm->timeout_s());
      comm->transport().wait_group_launched(deadline);
    } catch (...) {
      const Error e = as_error(std::current_exception());
      failure.set(e.status(), e.message());
    }
  }
  for (const auto& [comm, args] : calls) {
    struct Leave {  // counted out of the group whatever happens below
      Communicator* comm;
      ~Leave() { comm->left_group(); }
    } leave{comm};
    if (failure.status == gcommSuccess) {
      try {
        comm->complete_grouped(args);
        continue;
      } catch (...) {
        const Error e = as_error(std::current_exception());
        failure.set(e.status(), e.message());
      }
    }
    comm->fail_grouped(args, failure.status, failure.message);
  }
  if (failure.status != gcommSuccess)
    fail(failure.status, "the group of ", calls.size(), " collective(s) failed: ", failure.message,
         "; the communicators whose calls were not launched (or not watched) were aborted");
  if (mismatch.status != gcommSuccess)
    fail(mismatch.status, "the group's sends and receives do not match: ", mismatch.message,
         " (the communicators stay usable)");
}

void add_to_group(Communicator* comm, const CollectiveArgs& args) {
  t_group.calls.emplace_back(comm, args);
}

}  // namespace gradcomm::comm
