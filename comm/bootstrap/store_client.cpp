#include "comm/bootstrap/store_client.hpp"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <thread>

#include "comm/bootstrap/store_protocol.hpp"
#include "common/error.hpp"
#include "common/log.hpp"

namespace gradcomm::comm::bootstrap {

namespace {

// How long past a request's own deadline the client waits for the store's reply:
// the store answers a timed-out wait at the deadline, with the better message.
constexpr auto kGrace = std::chrono::seconds(2);

std::string self_name() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '?';
  return cat(host, ":", getpid());
}

Deadline reply_deadline(Deadline deadline) {
  return std::max(deadline, Clock::now()) + kGrace;
}

}  // namespace

uint32_t wire_timeout_ms(Deadline deadline) {
  double ms = seconds_left(deadline) * 1000.0 + 0.5;
  if (ms < 1) return 1;
  if (ms > static_cast<double>(UINT32_MAX)) return UINT32_MAX;
  return static_cast<uint32_t>(ms);
}

StoreClient::StoreClient(const StoreClientOptions& options, Deadline deadline)
    : options_(options),
      address_(options.address.empty() ? host_port(options.host, options.port) : options.address),
      tag_(job_key_tag(options.job_key)) {
  require(options.job_key.size() <= kMaxNameBytes, "the job key has ", options.job_key.size(),
          " bytes; the limit is ", kMaxNameBytes);
  const auto start = Clock::now();
  auto elapsed = [&] { return seconds_text(std::chrono::duration<double>(Clock::now() - start).count()); };
  int full = 0;  // hellos the store turned away because it was full
  std::string full_message;
  for (auto pause = std::chrono::milliseconds(20);;
       pause = std::min(2 * pause, std::chrono::milliseconds(500))) {
    std::string error;
    bool fatal = false;
    socket_ = connect_until(options.host, options.port, deadline, error, fatal);
    if (!socket_.valid()) {
      if (fatal)
        fail(gcommInvalidArgument, "rank ", options.rank, " cannot reach the store: ", error,
             " (check MASTER_ADDR)");
      if (full > 0)
        fail(gcommTimeout, "rank ", options.rank, " of ", options.world_size, " could not join the store at ",
             address_, " within ", elapsed(), " s: it was full ", full, " time(s) (", full_message, ")");
      fail(gcommTimeout, "rank ", options.rank, " of ", options.world_size, " could not connect to ",
           address_, " within ", elapsed(), " s (last attempt: ", error,
           "); check that rank 0 was started and that MASTER_ADDR and MASTER_PORT point at it");
    }
    broken_.clear();  // a new connection: an earlier one's loss is not its
    Writer hello;
    hello.str(options.job_key)
        .i32(options.rank)
        .i32(options.world_size)
        .str(self_name())
        .u32(options.generation);
    try {
      (void)request(hello.frame(MsgType::kHello, tag_), reply_deadline(deadline), "hello");
      return;
    } catch (const Error& e) {
      socket_.close();
      if (e.status() == gcommInvalidArgument)
        fail(gcommInvalidArgument, "the store at ", address_, " refused rank ", options.rank, ": ",
             e.message());
      // The previous communicator's store, still closing: rank 0 opens this one's
      // next. It says so while it serves (gcommInvalidState); while it stops it may
      // drop the connection, which only a rank that made a communicator here before
      // (generation > 0) takes for that.
      if (e.status() == gcommInvalidState || (e.status() == gcommRemoteError && options.generation > 0)) {
        if (Clock::now() >= deadline)
          fail(gcommTimeout, "rank ", options.rank, " of ", options.world_size, " found only an earlier ",
               "communicator's store at ", address_, " within ", elapsed(), " s (", e.message(),
               "): rank 0 has not made this rank's communicator #", options.generation + 1,
               " on this port; if it is running, it made fewer communicators here than this rank (every rank "
               "must make and close the same ones on one MASTER_PORT)");
        std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - Clock::now()));
        continue;
      }
      if (e.status() != gcommOutOfMemory) throw;
      // Full (connections held by something else, say): it frees room as idle
      // connections time out; try again until the deadline.
      ++full;
      full_message = e.message();
      const auto left = deadline - Clock::now();
      if (left <= Clock::duration::zero())
        fail(gcommTimeout, "rank ", options.rank, " of ", options.world_size, " could not join the store at ",
             address_, " within ", elapsed(), " s: it was full ", full, " time(s) (", full_message, ")");
      GCOMM_INFO(STORE, "rank ", options.rank, ": the store at ", address_, " is full; trying again in ",
                 pause.count(), " ms");
      std::this_thread::sleep_for(
          std::min<Clock::duration>(pause, left));  // then one more try, at the deadline
    }
  }
}

void StoreClient::set(const std::string& key, const std::vector<uint8_t>& value, Deadline deadline) {
  Writer w;
  w.str(key).blob(value);
  (void)request(w.frame(MsgType::kSet, tag_), reply_deadline(deadline), cat("set '", key, "'"));
}

std::vector<uint8_t> StoreClient::get(const std::string& key, Deadline deadline) {
  Writer w;
  w.str(key).u32(wire_timeout_ms(deadline));
  std::string what = cat("get '", key, "'");
  std::vector<uint8_t> reply = request(w.frame(MsgType::kGet, tag_), reply_deadline(deadline), what);
  Reader r(reply.data(), reply.size(), "reply to get");
  std::vector<uint8_t> value = r.blob();
  r.finish();
  return value;
}

std::vector<std::vector<uint8_t>> StoreClient::gather(const std::string& name,
                                                      const std::vector<uint8_t>& mine, Deadline deadline) {
  Writer w;
  w.str(name).u32(wire_timeout_ms(deadline)).blob(mine);
  std::vector<uint8_t> reply =
      request(w.frame(MsgType::kGather, tag_), reply_deadline(deadline), cat("'", name, "'"));
  Reader r(reply.data(), reply.size(), "reply to gather");
  uint32_t n = r.u32();
  if (n != static_cast<uint32_t>(options_.world_size))
    fail(gcommRemoteError, "the store at ", address_, " answered gather '", name, "' with ", n,
         " contributions for a world of ", options_.world_size);
  std::vector<std::vector<uint8_t>> all(n);
  for (auto& c : all) c = r.blob();
  r.finish();
  return all;
}

void StoreClient::abort(const std::string& reason) noexcept {
  if (!broken_.empty() || !socket_.valid()) return;
  try {
    Writer w;
    w.str(reason.size() > 4096 ? reason.substr(0, 4096) + "..." : reason);
    (void)request(w.frame(MsgType::kAbort, tag_), Clock::now() + std::chrono::seconds(1), "abort");
  } catch (const std::exception& e) {
    GCOMM_INFO(STORE, "rank ", options_.rank, " could not report its failure to the store at ", address_,
               ": ", e.what());
  }
}

void StoreClient::bye() noexcept {
  if (broken_.empty() && socket_.valid()) {
    try {
      std::vector<uint8_t> frame = Writer().frame(MsgType::kBye, tag_);
      std::string error;
      (void)send_all(socket_, frame.data(), frame.size(), Clock::now() + std::chrono::seconds(1), error);
    } catch (...) {
    }
  }
  broken_ = "the client said goodbye";
  socket_.close();
}

std::vector<uint8_t> StoreClient::request(const std::vector<uint8_t>& frame, Deadline deadline,
                                          const std::string& what) {
  if (!broken_.empty())
    fail(gcommRemoteError, "rank ", options_.rank, " cannot send ", what, " to the store: ", broken_);
  auto lost = [&](IoResult r, const std::string& error) {
    if (r == IoResult::kTimeout) {
      broken_ = cat("the store did not answer an earlier request (", what, ")");
      fail(gcommTimeout, "the store at ", address_, " did not answer ", what, " of rank ", options_.rank,
           " in time: is rank 0 alive and responsive?");
    }
    broken_ = cat("the connection to the store at ", address_, " was lost (", error, ")");
    fail(gcommRemoteError, "rank ", options_.rank, " lost its connection to the store at ", address_,
         " during ", what, ": ", error, " (did rank 0 exit or fail? its log says why)");
  };
  std::string error;
  IoResult r = send_all(socket_, frame.data(), frame.size(), deadline, error);
  if (r != IoResult::kOk) lost(r, error);
  uint8_t head[kHeaderBytes];
  r = recv_exact(socket_, head, sizeof(head), deadline, error);
  if (r != IoResult::kOk) lost(r, error);
  Header h;
  std::string bad = parse_header(head, kMaxPayloadBytes, h);
  if (bad.empty() && h.tag != tag_) bad = "a reply carrying another job key";
  if (bad.empty() && h.type != MsgType::kOk && h.type != MsgType::kError)
    bad = cat("a '", msg_type_name(h.type), "' message where a reply was expected");
  if (!bad.empty()) {
    broken_ = "the store sent an invalid reply earlier";
    fail(gcommRemoteError, "the peer at ", address_, " answered ", what, " with ", bad,
         ": is it a gradcomm store of this job?");
  }
  std::vector<uint8_t> payload(h.length);
  r = recv_exact(socket_, payload.data(), payload.size(), deadline, error);
  if (r != IoResult::kOk) lost(r, error);
  if (h.type == MsgType::kError) {
    Reader e(payload.data(), payload.size(), "error reply");
    uint32_t status = e.u32();
    std::string message = e.str(kMaxPayloadBytes);
    if (status == 0 || status >= static_cast<uint32_t>(gcommNumStatuses)) status = gcommRemoteError;
    throw Error(static_cast<gcommStatus_t>(status), message);
  }
  return payload;
}

}  // namespace gradcomm::comm::bootstrap
