// What the rendezvous store knows: its values, its gathers (a barrier is a gather
// of nothing), and which ranks joined, left or failed. No sockets here: the server
// (store_server.cpp) feeds it the requests of authenticated ranks and sends the
// replies it queues, so these rules are testable alone.
//
// Rules:
//  - Each rank joins once, from one connection. A second claim of a rank, a rank
//    outside the world, or another world size is refused.
//  - A gather completes when every rank contributed; all get every contribution.
//    A gather that times out, or cannot complete because a rank left, fails for
//    every rank waiting on it and for every rank that arrives later, with a
//    message naming the missing ranks: those that never connected, and those
//    that connected but did not reach it.
//  - A rank that reports a failure (abort), or whose connection drops without a
//    goodbye, fails the job: every pending and later get and gather returns that
//    failure at once instead of waiting for its timeout.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "comm/net/tcp_socket.hpp"
#include "gradcomm/types.h"

namespace gradcomm::comm::bootstrap {

using namespace net;  // comm/net/tcp_socket.hpp

using ConnId = uint64_t;

class StoreState {
 public:
  struct Reply {
    ConnId conn;
    std::vector<uint8_t> frame;
  };

  // `address` ("host:port") names the store in messages; `started`: when it
  // began listening (messages say how long ranks were awaited).
  StoreState(int world_size, uint64_t tag, std::string address, Deadline started = Clock::now());

  // A connection said hello as `rank` of `world_size`. Returns "" if accepted
  // (the kOk reply is queued), else why it is refused (nothing is queued).
  std::string join(ConnId conn, int rank, int world_size, const std::string& who);
  // A joined connection closed. `graceful`: it said goodbye first; otherwise the
  // job fails with "rank <r> (<who>) <why>".
  void leave(ConnId conn, bool graceful, const std::string& why = "");
  bool joined(ConnId conn) const { return rank_of_.count(conn) != 0; }
  int rank_of(ConnId conn) const;

  void set(ConnId conn, const std::string& key, std::vector<uint8_t> value);
  void get(ConnId conn, const std::string& key, double timeout_s, Deadline now);
  void gather(ConnId conn, const std::string& name, std::vector<uint8_t> contribution, double timeout_s,
              Deadline now);
  void abort(ConnId conn, const std::string& reason);
  // Fails the job for every rank (every wait, and every later request) with `message`.
  void fail(gcommStatus_t status, const std::string& message) { fail_job(status, message); }
  // A hello of this job's key claiming `rank` was refused for `why`: a rank still
  // missing later is named as refused, not as never connected.
  void note_refused(int rank, const std::string& why);
  // Whether `rank` joined (and maybe left) this store.
  bool rank_came(int rank) const { return rank >= 0 && rank < world_ && presence_[rank] != Presence::kNever; }

  // Fails the waits whose deadline passed.
  void expire(Deadline now);
  // When expire() next has work (Deadline::max() when nothing waits).
  Deadline next_deadline() const;
  std::vector<Reply> take_replies();
  // gcommSuccess, or why the job failed (an abort, a rank that dropped out).
  gcommStatus_t job_status() const { return job_status_; }
  const std::string& job_message() const { return job_message_; }

 private:
  enum class Presence { kNever, kJoined, kLeft };
  struct Gather {
    std::vector<std::optional<std::vector<uint8_t>>> contributions;
    std::vector<ConnId> waiters;  // by rank, valid where contributed
    size_t arrived = 0;
    size_t bytes = 0;
    Deadline deadline = Deadline::max();
    Deadline first_arrival = Deadline::max();
    bool failed = false;
    gcommStatus_t status = gcommSuccess;
    std::string message;
  };
  struct GetWaiter {
    ConnId conn;
    std::string key;
    Deadline deadline;
    double timeout_s;
  };

  void reply_ok(ConnId conn);
  void reply_value(ConnId conn, const std::vector<uint8_t>& value);
  void reply_error(ConnId conn, gcommStatus_t status, const std::string& message);
  void fail_gather(Gather& g, gcommStatus_t status, const std::string& message);
  void fail_job(gcommStatus_t status, const std::string& message);
  void complete(Gather& g);
  std::string missing_message(const Gather& g, const std::string& name, Deadline now) const;
  std::string departed_message(const Gather& g) const;  // "" if no missing rank left

  const int world_;
  const uint64_t tag_;
  const std::string address_;
  const Deadline started_;
  std::map<ConnId, int> rank_of_;
  std::vector<Presence> presence_;
  std::vector<std::string> who_;
  std::vector<std::string> left_how_;
  std::vector<std::string> refused_;  // per rank: why its last hello was refused ("" if none)
  gcommStatus_t job_status_ = gcommSuccess;
  std::string job_message_;
  std::unordered_map<std::string, std::vector<uint8_t>> values_;
  std::vector<GetWaiter> get_waiters_;
  std::map<std::string, Gather> gathers_;
  std::vector<Reply> replies_;
};

// "rank 2", "ranks 2, 3", "ranks 0, 1, ..., 15 (and 48 more)".
std::string rank_list(const std::vector<int>& ranks);

// A store answers a hello that claims rank 0 while its own rank 0 is there (two
// jobs with one job key on one port: issue 44 #13) with a refusal that starts
// with kSecondRankZero, and fails its job with clash_message.
constexpr const char* kSecondRankZero = "a second rank 0";
std::string clash_message(const std::string& job_key, const std::string& address);

}  // namespace gradcomm::comm::bootstrap
