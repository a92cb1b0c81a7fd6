// A member's connection to the membership server (the gradcomm-store program):
// join the job, ask for a quorum, vote on a step, leave. Each request is
// synchronous and bounded; a lost connection is final (the member is gone for the
// server, and a new one must join). Used by one thread at a time.
#pragma once

#include <string>

#include "comm/bootstrap/store_protocol.hpp"
#include "comm/membership/membership_state.hpp"
#include "comm/net/tcp_socket.hpp"

namespace gradcomm::comm::membership {

struct MemberOptions {
  std::string host;  // the membership server's address
  int port = 0;
  std::string job_key;
  std::string name;  // this process in the server's messages
  JobSettings job;
};

class MembershipClient {
 public:
  // Connects (retrying until `deadline`) and joins the job. Throws gcommTimeout if
  // no server answered, gcommInvalidArgument if it refused (other settings).
  MembershipClient(const MemberOptions& options, Deadline deadline);
  ~MembershipClient();
  MembershipClient(const MembershipClient&) = delete;
  MembershipClient& operator=(const MembershipClient&) = delete;

  // Waits for the next generation (at most `wait_s`). A refusal or a timeout
  // comes back as an outcome with its status; a lost server throws gcommRemoteError.
  QuorumOutcome quorum(double wait_s);
  // This member's vote on the step of `generation`.
  CommitOutcome vote(uint32_t generation, bool ok, const std::string& why);
  // Leaves the job cleanly. Never throws.
  void bye() noexcept;

  const std::string& host() const { return options_.host; }
  const std::string& address() const { return address_; }
  uint32_t member_id() const { return id_; }

 private:
  bootstrap::Reader request(const std::vector<uint8_t>& frame, Deadline reply_deadline, const char* what);

  MemberOptions options_;
  std::string address_;
  uint64_t tag_ = 0;
  net::Socket socket_;
  uint32_t id_ = 0;
  std::vector<uint8_t> reply_;
  std::string broken_;
};

}  // namespace gradcomm::comm::membership
