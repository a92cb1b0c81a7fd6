#include "comm/membership/membership_server.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "comm/membership/frame_io.hpp"
#include "common/error.hpp"
#include "common/log.hpp"

namespace gradcomm::comm::membership {

using namespace net;
using bootstrap::MsgType;
using bootstrap::Reader;
using bootstrap::Writer;

namespace {

// How often a member waiting for its answer has its connection looked at.
constexpr auto kWatchEvery = std::chrono::milliseconds(10);

std::string printable(const std::string& s, size_t max = 200) {
  std::string out;
  for (char ch : s.substr(0, max)) out += (ch >= 0x20 && ch < 0x7f) ? ch : '?';
  return out;
}

std::vector<uint8_t> quorum_frame(const QuorumOutcome& q, uint64_t tag) {
  if (q.status != gcommSuccess) return error_frame(q.status, q.change, tag);
  return Writer()
      .u32(q.generation)
      .i32(q.rank)
      .i32(q.world)
      .i32(q.holders)
      .u32(static_cast<uint32_t>(q.rendezvous_port))
      .u64(q.committed_steps)
      .str(q.members)
      .str(q.change)
      .frame(MsgType::kOk, tag);
}

std::vector<uint8_t> commit_frame(const CommitOutcome& c, uint64_t tag) {
  if (c.status != gcommSuccess) return error_frame(c.status, c.reason, tag);
  return Writer()
      .u32(c.committed ? 1 : 0)
      .u32(c.reconfigure ? 1 : 0)
      .u64(c.committed_steps)
      .str(c.reason)
      .frame(MsgType::kOk, tag);
}

}  // namespace

MembershipServer::MembershipServer(const MembershipServerOptions& options) : options_(options) {
  listener_ =
      listen_on(options.host, options.port, port_, loopback_, "gradcomm-store",
                "another gradcomm-store or program holds it: choose another --port, or 0 for any free one");
  address_ = host_port(options.host, port_);
  int fds[2];
  if (::pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0)
    fail(gcommInternalError, "pipe2() failed: ", errno_text(errno));
  wake_read_ = Socket(fds[0]);
  wake_write_ = Socket(fds[1]);
  GCOMM_INFO(STORE, "membership server listening on port ", port_);
  acceptor_ = std::thread([this] { accept_loop(); });
}

MembershipServer::~MembershipServer() {
  stop();
}

void MembershipServer::stop() noexcept {
  if (!acceptor_.joinable()) return;
  stopping_.store(true);
  char one = 1;
  (void)!::write(wake_write_.fd(), &one, 1);
  acceptor_.join();
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> held(lock_);
    for (auto& [fd, thread] : connections_) {
      ::shutdown(fd, SHUT_RDWR);  // its thread's read returns
      threads.push_back(std::move(thread));
    }
    connections_.clear();
    for (auto& t : finished_) threads.push_back(std::move(t));
    finished_.clear();
  }
  changed_.notify_all();
  for (auto& t : threads)
    if (t.joinable()) t.join();
  std::lock_guard<std::mutex> held(lock_);
  jobs_.clear();  // stops every rendezvous store
  listener_.close();
}

void MembershipServer::accept_loop() noexcept {
  while (!stopping_.load()) {
    pollfd fds[2] = {{wake_read_.fd(), POLLIN, 0}, {listener_.fd(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0 && errno != EINTR) {
      GCOMM_WARN("membership server at ", address_, ": poll() failed (", errno_text(errno),
                 "); it stops accepting");
      return;
    }
    if (stopping_.load()) return;
    if (!(fds[1].revents & POLLIN)) continue;
    std::string peer;
    Socket s = accept_one(listener_, peer);
    if (!s.valid()) continue;
    std::vector<std::thread> ended;
    {
      std::lock_guard<std::mutex> held(lock_);
      ended.swap(finished_);
    }
    for (auto& t : ended) t.join();  // connections that ended: their threads are returning
    std::lock_guard<std::mutex> held(lock_);
    const int fd = s.fd();
    connections_[fd] =
        std::thread([this, sock = std::move(s), peer]() mutable { serve(std::move(sock), peer); });
  }
}

void MembershipServer::serve(Socket socket, std::string peer) noexcept {
  try {
    serve_member(socket, peer);
  } catch (const std::exception& e) {
    GCOMM_WARN("membership server at ", address_, ": the connection from ", peer, " ended: ", e.what());
  }
  std::lock_guard<std::mutex> held(lock_);
  auto it = connections_.find(socket.fd());
  if (it != connections_.end()) {  // stop() may have taken it already
    finished_.push_back(std::move(it->second));
    connections_.erase(it);
  }
  socket.close();
}

MembershipServer::Job& MembershipServer::job_for(const std::string& key, const JobSettings& settings) {
  auto it = jobs_.find(key);
  if (it != jobs_.end()) {
    const JobSettings& s = it->second.state->settings();
    if (s.min_ranks != settings.min_ranks || s.quorum_timeout_s != settings.quorum_timeout_s ||
        s.commit_timeout_s != settings.commit_timeout_s)
      fail(gcommInvalidArgument, "the job '", key, "' runs with min_ranks ", s.min_ranks, ", quorum timeout ",
           s.quorum_timeout_s, " s and commit timeout ", s.commit_timeout_s, " s; this member asked for ",
           settings.min_ranks, ", ", settings.quorum_timeout_s, " s and ", settings.commit_timeout_s,
           " s: give every member the same settings");
    return it->second;
  }
  Job& job = jobs_[key];
  RendezvousHooks hooks;
  hooks.open = [this, key, &job](uint32_t generation, int world) {
    return open_rendezvous(key, job, generation, world);
  };
  hooks.fail = [&job](uint32_t generation, const std::string& why) {
    auto r = job.rendezvous.find(generation);
    if (r != job.rendezvous.end()) r->second->fail_job(why);
  };
  job.state = std::make_unique<MembershipState>(key, settings, std::move(hooks));
  GCOMM_INFO(STORE, "membership server at ", address_, ": job '", key, "' opened (min_ranks ",
             settings.min_ranks, ")");
  return job;
}

int MembershipServer::open_rendezvous(const std::string& key, Job& job, uint32_t generation, int world) {
  bootstrap::StoreServerOptions s;
  s.host = options_.host;
  s.port = 0;
  s.job_key = cat(key, "#", generation);
  s.world_size = world;
  s.hello_timeout_s = options_.hello_timeout_s;
  auto server = std::make_unique<bootstrap::StoreServer>(s);
  const int port = server->port();
  job.rendezvous[generation] = std::move(server);
  while (job.rendezvous.size() > 2) job.rendezvous.erase(job.rendezvous.begin());
  return port;
}

void MembershipServer::log_changes(const std::string& key, MembershipState& state) {
  for (const std::string& line : state.take_log()) GCOMM_INFO(STORE, "job '", key, "': ", line);
}

void MembershipServer::serve_member(const Socket& socket, const std::string& peer) {
  Frame f;
  bool closed = false;
  std::string bad =
      read_frame(socket, deadline_after(options_.hello_timeout_s), bootstrap::kMaxHelloBytes, f, closed);
  if (!bad.empty()) {
    if (!closed) GCOMM_WARN("membership server at ", address_, ": dropped ", peer, ": ", bad);
    return;
  }
  const uint64_t tag = f.header.tag;
  if (f.header.type != MsgType::kJoinJob) {
    (void)write_frame(
        socket,
        error_frame(gcommInvalidArgument,
                    cat("this is a gradcomm membership server (gradcomm-store): a member's first "
                        "request must be join-job, not '",
                        bootstrap::msg_type_name(f.header.type),
                        "' (a communicator's rank points at it instead of at its rank 0?)"),
                    tag),
        deadline_after(1.0));
    return;
  }
  Reader r(f.payload.data(), f.payload.size(), "join-job");
  const std::string key = r.str();
  const std::string who = cat(printable(r.str()), " at ", peer);
  JobSettings settings;
  settings.min_ranks = static_cast<int>(r.u32());
  settings.quorum_timeout_s = r.u32() / 1000.0;
  settings.commit_timeout_s = r.u32() / 1000.0;
  r.finish();
  if (tag != bootstrap::job_key_tag(key) || settings.min_ranks < 1) {
    (void)write_frame(socket, error_frame(gcommInvalidArgument, "a malformed join-job request", tag),
                      deadline_after(1.0));
    return;
  }
  MemberId id = 0;
  MembershipState* state = nullptr;
  try {
    std::lock_guard<std::mutex> held(lock_);
    Job& job = job_for(key, settings);
    state = job.state.get();
    id = state->add(who);
  } catch (const Error& e) {
    (void)write_frame(socket, error_frame(e.status(), e.message(), tag), deadline_after(1.0));
    return;
  }
  GCOMM_INFO(STORE, "job '", key, "': ", who, " joined as member ", id);
  // The member is gone (the lock held): the job learns it, and a job without a
  // live member is closed (its rendezvous stores with it). `state` is not used after.
  auto gone = [&](bool graceful, Deadline now) {
    state->lose(id, graceful, now);
    log_changes(key, *state);
    changed_.notify_all();
    if (!state->anyone_alive()) {
      GCOMM_INFO(STORE, "membership server at ", address_, ": job '", key, "' closed: no member left");
      jobs_.erase(key);
    }
  };
  if (!write_frame(socket, Writer().u32(id).frame(MsgType::kOk, tag), deadline_after(5.0)).empty()) {
    std::lock_guard<std::mutex> held(lock_);
    return gone(false, Clock::now());
  }
  // Waits (the lock held by `held`) until `ready` says the answer is there, the
  // member hangs up, the server stops or `give_up` passes; ticking the job's
  // timeouts meanwhile. Returns false if the member is gone.
  auto wait_for_answer = [&](std::unique_lock<std::mutex>& held, Deadline give_up, auto ready,
                             auto on_give_up) {
    for (;;) {
      Deadline now = Clock::now();
      state->tick(now);
      log_changes(key, *state);
      changed_.notify_all();
      if (ready()) return true;
      if (stopping_.load()) return false;
      if (peer_hung_up(socket)) {
        gone(false, now);
        return false;
      }
      if (now >= give_up) on_give_up(now);
      changed_.wait_for(held, kWatchEvery);
    }
  };
  for (;;) {
    bad = read_frame(socket, Deadline::max(), bootstrap::kMaxPayloadBytes, f, closed);
    std::unique_lock<std::mutex> held(lock_);
    if (!bad.empty() || f.header.tag != tag || f.header.type == MsgType::kBye) {
      const bool graceful = bad.empty() && f.header.tag == tag && f.header.type == MsgType::kBye;
      if (!graceful && !closed && !stopping_.load())
        GCOMM_WARN("membership server at ", address_, ": dropped ", who, ": ",
                   bad.empty() ? std::string("a message with another job key") : bad);
      return gone(graceful, Clock::now());
    }
    Reader req(f.payload.data(), f.payload.size(), bootstrap::msg_type_name(f.header.type));
    std::vector<uint8_t> reply;
    if (f.header.type == MsgType::kQuorum) {
      const double wait_s = req.u32() / 1000.0;
      req.finish();
      state->ask_quorum(id, Clock::now());
      std::optional<QuorumOutcome> q;
      if (!wait_for_answer(
              held, deadline_after(wait_s), [&] { return (q = state->take_quorum(id)).has_value(); },
              [&](Deadline) { state->give_up_quorum(id); }))
        return;
      reply = quorum_frame(*q, tag);
    } else if (f.header.type == MsgType::kCommit) {
      const uint32_t generation = req.u32();
      const bool ok = req.u32() != 0;
      const std::string why = printable(req.str(bootstrap::kMaxPayloadBytes), 2000);
      req.finish();
      state->vote(id, generation, ok, why, Clock::now());
      std::optional<CommitOutcome> c;
      // The state's commit timeout ends the wait; the give-up is only a backstop.
      const Deadline backstop = deadline_after(state->settings().commit_timeout_s + 5.0);
      if (!wait_for_answer(
              held, backstop, [&] { return (c = state->take_commit(id)).has_value(); },
              [&](Deadline now) { state->tick(deadline_after(state->settings().commit_timeout_s, now)); }))
        return;
      reply = commit_frame(*c, tag);
    } else {
      reply =
          error_frame(gcommInvalidArgument,
                      cat("'", bootstrap::msg_type_name(f.header.type), "' is not a member's request"), tag);
    }
    held.unlock();
    if (!write_frame(socket, reply, deadline_after(5.0)).empty()) {
      std::lock_guard<std::mutex> again(lock_);
      return gone(false, Clock::now());
    }
  }
}

}  // namespace gradcomm::comm::membership
