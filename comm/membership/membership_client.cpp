#include "comm/membership/membership_client.hpp"

#include "comm/membership/frame_io.hpp"
#include "common/error.hpp"

namespace gradcomm::comm::membership {

using namespace net;
using bootstrap::MsgType;
using bootstrap::Reader;
using bootstrap::Writer;

namespace {

uint32_t to_ms(double s) {
  const double ms = s * 1000.0;
  return ms >= 4.0e9 ? 4000000000u : ms < 1.0 ? 1u : static_cast<uint32_t>(ms);
}

}  // namespace

MembershipClient::MembershipClient(const MemberOptions& options, Deadline deadline)
    : options_(options),
      address_(host_port(options.host, options.port)),
      tag_(bootstrap::job_key_tag(options.job_key)) {
  std::string error;
  bool fatal = false;
  socket_ = connect_until(options.host, options.port, deadline, error, fatal);
  if (!socket_.valid())
    fail(fatal ? gcommInvalidArgument : gcommTimeout, "no membership server (gradcomm-store) answered at ",
         address_, ": ", error, " (start it first: docs/fault-tolerance.md)");
  Reader r = request(Writer()
                         .str(options.job_key)
                         .str(options.name)
                         .u32(static_cast<uint32_t>(options.job.min_ranks))
                         .u32(to_ms(options.job.quorum_timeout_s))
                         .u32(to_ms(options.job.commit_timeout_s))
                         .frame(MsgType::kJoinJob, tag_),
                     deadline, "join the job");
  id_ = r.u32();
  r.finish();
}

MembershipClient::~MembershipClient() {
  bye();
}

Reader MembershipClient::request(const std::vector<uint8_t>& frame, Deadline reply_deadline,
                                 const char* what) {
  if (!broken_.empty())
    fail(gcommRemoteError, "cannot ", what, ": the connection to the membership server at ", address_,
         " was lost earlier (", broken_, ")");
  std::string bad = write_frame(socket_, frame, deadline_after(10.0));
  Frame f;
  bool closed = false;
  if (bad.empty()) bad = read_frame(socket_, reply_deadline, bootstrap::kMaxPayloadBytes, f, closed);
  if (bad.empty() && f.header.tag != tag_) bad = "its reply carries another job key";
  if (!bad.empty()) {
    broken_ = bad;
    fail(closed ? gcommRemoteError : gcommTimeout, "cannot ", what, ": the membership server at ", address_,
         closed ? " closed the connection (did gradcomm-store stop?)" : "", ": ", bad);
  }
  reply_ = std::move(f.payload);
  if (f.header.type == MsgType::kError) {
    Reader e(reply_.data(), reply_.size(), "error reply");
    const uint32_t status = e.u32();
    const std::string message = e.str(bootstrap::kMaxPayloadBytes);
    throw Error(status < static_cast<uint32_t>(gcommNumStatuses) && status != gcommSuccess
                    ? static_cast<gcommStatus_t>(status)
                    : gcommRemoteError,
                message);
  }
  if (f.header.type != MsgType::kOk) {
    broken_ = cat("it answered with '", bootstrap::msg_type_name(f.header.type), "'");
    fail(gcommRemoteError, "cannot ", what, ": the membership server at ", address_, " ", broken_);
  }
  return Reader(reply_.data(), reply_.size(), what);
}

QuorumOutcome MembershipClient::quorum(double wait_s) {
  QuorumOutcome q;
  try {
    Reader r = request(Writer().u32(to_ms(wait_s)).frame(MsgType::kQuorum, tag_),
                       deadline_after(wait_s + 10.0), "ask for a quorum");
    q.generation = r.u32();
    q.rank = r.i32();
    q.world = r.i32();
    q.holders = r.i32();
    q.rendezvous_port = static_cast<int>(r.u32());
    q.committed_steps = r.u64();
    q.members = r.str(bootstrap::kMaxPayloadBytes);
    q.change = r.str(bootstrap::kMaxPayloadBytes);
    r.finish();
  } catch (const Error& e) {
    if (!broken_.empty()) throw;
    q.status = e.status();
    q.change = e.message();
  }
  return q;
}

CommitOutcome MembershipClient::vote(uint32_t generation, bool ok, const std::string& why) {
  CommitOutcome c;
  try {
    Reader r = request(Writer().u32(generation).u32(ok ? 1 : 0).str(why).frame(MsgType::kCommit, tag_),
                       deadline_after(options_.job.commit_timeout_s + 15.0), "vote on the step");
    c.committed = r.u32() != 0;
    c.reconfigure = r.u32() != 0;
    c.committed_steps = r.u64();
    c.reason = r.str(bootstrap::kMaxPayloadBytes);
    r.finish();
  } catch (const Error& e) {
    if (!broken_.empty()) throw;
    c.status = e.status();
    c.reason = e.message();
  }
  return c;
}

void MembershipClient::bye() noexcept {
  if (!socket_.valid()) return;
  try {
    if (broken_.empty()) (void)write_frame(socket_, Writer().frame(MsgType::kBye, tag_), deadline_after(1.0));
  } catch (...) {
  }
  socket_.close();
}

}  // namespace gradcomm::comm::membership
