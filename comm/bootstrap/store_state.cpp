#include "comm/bootstrap/store_state.hpp"

#include <algorithm>

#include "comm/bootstrap/store_protocol.hpp"
#include "common/error.hpp"
#include "common/log.hpp"

namespace gradcomm::comm::bootstrap {

namespace {

Deadline after(Deadline now, double seconds) {
  return deadline_after(seconds, now);
}

}  // namespace

std::string rank_list(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  const size_t shown = 16;
  for (size_t i = 0; i < ranks.size() && i < shown; ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > shown) s += cat(" (and ", ranks.size() - shown, " more)");
  return s;
}

std::string clash_message(const std::string& job_key, const std::string& address) {
  return cat("two jobs with the job key '", job_key, "' use ", address,
             ", and ranks of one may have joined the other; give each job its own MASTER_PORT or "
             "GRADCOMM_JOB_KEY");
}

StoreState::StoreState(int world_size, uint64_t tag, std::string address, Deadline started)
    : world_(world_size),
      tag_(tag),
      address_(std::move(address)),
      started_(started),
      presence_(world_size, Presence::kNever),
      who_(world_size),
      left_how_(world_size),
      refused_(world_size) {}

void StoreState::note_refused(int rank, const std::string& why) {
  if (rank >= 0 && rank < world_) refused_[rank] = why;
}

int StoreState::rank_of(ConnId conn) const {
  auto it = rank_of_.find(conn);
  return it == rank_of_.end() ? -1 : it->second;
}

std::string StoreState::join(ConnId conn, int rank, int world_size, const std::string& who) {
  if (world_size != world_)
    return cat(who, " says the world size is ", world_size, " but this job's rank 0 says ", world_,
               " (check WORLD_SIZE or config.world_size on every rank)");
  if (rank < 0 || rank >= world_) return cat(who, " claims rank ", rank, ", outside 0..", world_ - 1);
  if (presence_[rank] == Presence::kJoined)
    return cat(who, " claims rank ", rank, ", which ", who_[rank],
               " already holds (two processes with one RANK?)");
  if (presence_[rank] == Presence::kLeft)
    return cat(who, " claims rank ", rank, ", which already joined and left this job (", left_how_[rank],
               ")");
  presence_[rank] = Presence::kJoined;
  who_[rank] = who;
  rank_of_[conn] = rank;
  reply_ok(conn);
  return "";
}

void StoreState::leave(ConnId conn, bool graceful, const std::string& why) {
  auto it = rank_of_.find(conn);
  if (it == rank_of_.end()) return;
  int rank = it->second;
  rank_of_.erase(it);
  presence_[rank] = Presence::kLeft;
  left_how_[rank] = graceful ? "it said goodbye" : "its connection was lost";
  get_waiters_.erase(std::remove_if(get_waiters_.begin(), get_waiters_.end(),
                                    [&](const GetWaiter& w) { return w.conn == conn; }),
                     get_waiters_.end());
  if (!graceful) {
    fail_job(gcommRemoteError, cat("rank ", rank, " (", who_[rank], ") ", why));
    return;
  }
  // A gather that still needs this rank can never complete.
  for (auto& [name, g] : gathers_)
    if (!g.failed && !g.contributions[rank]) fail_gather(g, gcommRemoteError, departed_message(g));
}

void StoreState::set(ConnId conn, const std::string& key, std::vector<uint8_t> value) {
  if (job_status_ != gcommSuccess) return reply_error(conn, job_status_, job_message_);
  for (auto it = get_waiters_.begin(); it != get_waiters_.end();) {
    if (it->key == key) {
      reply_value(it->conn, value);
      it = get_waiters_.erase(it);
    } else {
      ++it;
    }
  }
  values_[key] = std::move(value);
  reply_ok(conn);
}

void StoreState::get(ConnId conn, const std::string& key, double timeout_s, Deadline now) {
  if (job_status_ != gcommSuccess) return reply_error(conn, job_status_, job_message_);
  auto it = values_.find(key);
  if (it != values_.end()) return reply_value(conn, it->second);
  get_waiters_.push_back({conn, key, after(now, timeout_s), timeout_s});
}

void StoreState::gather(ConnId conn, const std::string& name, std::vector<uint8_t> contribution,
                        double timeout_s, Deadline now) {
  // A gather that already failed answers with its own failure (the first cause),
  // even if the job failed since.
  auto found = gathers_.find(name);
  if (found != gathers_.end() && found->second.failed)
    return reply_error(conn, found->second.status, found->second.message);
  if (job_status_ != gcommSuccess) return reply_error(conn, job_status_, job_message_);
  int rank = rank_of(conn);
  Gather& g = gathers_[name];
  if (g.contributions.empty()) {
    g.contributions.resize(world_);
    g.waiters.resize(world_, 0);
  }
  if (g.contributions[rank])
    return reply_error(conn, gcommInvalidState, cat("rank ", rank, " entered gather '", name, "' twice"));
  g.bytes += 4 + contribution.size();
  if (4 + g.bytes > kMaxPayloadBytes) {
    fail_gather(
        g, gcommInvalidArgument,
        cat("gather '", name, "' would exceed the store's message limit of ", kMaxPayloadBytes, " bytes"));
    return reply_error(conn, g.status, g.message);
  }
  g.contributions[rank] = std::move(contribution);
  g.waiters[rank] = conn;
  ++g.arrived;
  g.deadline = std::min(g.deadline, after(now, timeout_s));
  g.first_arrival = std::min(g.first_arrival, now);
  if (g.arrived == static_cast<size_t>(world_)) {
    complete(g);
    gathers_.erase(name);  // the name may be used again: a new round
    return;
  }
  std::string departed = departed_message(g);
  if (!departed.empty()) fail_gather(g, gcommRemoteError, departed);
}

void StoreState::abort(ConnId conn, const std::string& reason) {
  int rank = rank_of(conn);
  if (job_status_ == gcommSuccess)
    fail_job(gcommRemoteError, cat("rank ", rank, " (", who_[rank], ") failed: ", reason));
  reply_ok(conn);
}

void StoreState::expire(Deadline now) {
  for (auto it = get_waiters_.begin(); it != get_waiters_.end();) {
    if (it->deadline <= now) {
      reply_error(it->conn, gcommTimeout,
                  cat("no rank set '", it->key, "' in the store at ", address_, " within ",
                      seconds_text(it->timeout_s), " s"));
      it = get_waiters_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& [name, g] : gathers_)
    if (!g.failed && g.deadline <= now) fail_gather(g, gcommTimeout, missing_message(g, name, now));
}

Deadline StoreState::next_deadline() const {
  Deadline next = Deadline::max();
  for (const auto& w : get_waiters_) next = std::min(next, w.deadline);
  for (const auto& [name, g] : gathers_)
    if (!g.failed) next = std::min(next, g.deadline);
  return next;
}

std::vector<StoreState::Reply> StoreState::take_replies() {
  std::vector<Reply> out;
  out.swap(replies_);
  return out;
}

void StoreState::reply_ok(ConnId conn) {
  replies_.push_back({conn, Writer().frame(MsgType::kOk, tag_)});
}

void StoreState::reply_value(ConnId conn, const std::vector<uint8_t>& value) {
  replies_.push_back({conn, Writer().blob(value).frame(MsgType::kOk, tag_)});
}

void StoreState::reply_error(ConnId conn, gcommStatus_t status, const std::string& message) {
  // Keep even a very long message inside the frame limit.
  std::string m = message.size() > 64 * 1024 ? message.substr(0, 64 * 1024) + "..." : message;
  replies_.push_back({conn, Writer().u32(static_cast<uint32_t>(status)).str(m).frame(MsgType::kError, tag_)});
}

void StoreState::fail_gather(Gather& g, gcommStatus_t status, const std::string& message) {
  g.failed = true;
  g.status = status;
  g.message = message;
  for (int r = 0; r < world_; ++r)
    if (g.contributions[r] && rank_of_.count(g.waiters[r])) reply_error(g.waiters[r], status, message);
  // Keep the failure for later arrivals; drop the data.
  for (auto& c : g.contributions) c.reset();
  g.deadline = Deadline::max();
}

void StoreState::fail_job(gcommStatus_t status, const std::string& message) {
  if (job_status_ != gcommSuccess) return;
  job_status_ = status;
  job_message_ = message;
  GCOMM_WARN("store at ", address_, ": ", message);
  for (const auto& w : get_waiters_) reply_error(w.conn, status, message);
  get_waiters_.clear();
  for (auto& [name, g] : gathers_)
    if (!g.failed) fail_gather(g, status, message);
}

void StoreState::complete(Gather& g) {
  Writer w;
  w.u32(static_cast<uint32_t>(world_));
  for (const auto& c : g.contributions) w.blob(*c);
  std::vector<uint8_t> frame = w.frame(MsgType::kOk, tag_);
  for (int r = 0; r < world_; ++r)
    if (rank_of_.count(g.waiters[r])) replies_.push_back({g.waiters[r], frame});
}

std::string StoreState::missing_message(const Gather& g, const std::string& name, Deadline now) const {
  auto since = [&](Deadline t) { return seconds_text(std::chrono::duration<double>(now - t).count()); };
  std::vector<int> never, refused, absent, present;
  for (int r = 0; r < world_; ++r) {
    if (g.contributions[r])
      present.push_back(r);
    else if (presence_[r] == Presence::kNever)
      (refused_[r].empty() ? never : refused).push_back(r);
    else
      absent.push_back(r);
  }
  std::string m;
  if (!never.empty())
    m = cat(rank_list(never), " of ", world_, " never connected to ", address_, " within ", since(started_),
            " s");
  for (int r : refused)  // it came, and was told why it could not join
    m += cat(m.empty() ? "" : "; ", "rank ", r, " of ", world_, " reached the store but was refused (",
             refused_[r], ")");
  if (!absent.empty())
    m += cat(m.empty() ? "" : "; ", rank_list(absent), " of ", world_, " connected but did not reach '", name,
             "' within ", since(g.first_arrival), " s");
  std::string here = present.empty() ? "none" : rank_list(present).substr(present.size() == 1 ? 5 : 6);
  return cat(
      m, " (present: ", here,
      "); check that every rank was started, with the same MASTER_ADDR, MASTER_PORT, world size and job key");
}

std::string StoreState::departed_message(const Gather& g) const {
  std::vector<int> gone;
  for (int r = 0; r < world_; ++r)
    if (!g.contributions[r] && presence_[r] == Presence::kLeft) gone.push_back(r);
  if (gone.empty()) return "";
  return cat(rank_list(gone), " already left the job (", left_how_[gone.front()],
             ") and cannot reach this barrier");
}

}  // namespace gradcomm::comm::bootstrap
