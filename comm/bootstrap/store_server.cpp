#include "comm/bootstrap/store_server.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <vector>

#include "comm/bootstrap/store_protocol.hpp"
#include "comm/bootstrap/store_state.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "common/warn_limiter.hpp"

namespace gradcomm::comm::bootstrap {

namespace {

// A peer that does not read its replies is dropped once this much is queued for it.
constexpr size_t kMaxQueuedBytes = 8 * kMaxPayloadBytes;
// Bounds on what a flood of connections can make the store hold: new connections
// taken per loop round, and refused ones lingering to deliver their reason (past
// that, one turned away is closed without a reason).
constexpr int kAcceptsPerRound = 64;
constexpr size_t kMaxLingering = 64;

// Text a peer sent, made safe for one log line.
std::string printable(const std::string& s, size_t max = 200) {
  std::string out;
  for (char ch : s.substr(0, max)) out += (ch >= 0x20 && ch < 0x7f) ? ch : '?';
  if (s.size() > max) out += "...";
  return out;
}

struct Conn {
  Socket socket;
  std::string peer;
  std::vector<uint8_t> in;
  std::vector<uint8_t> out;
  size_t sent = 0;
  bool hello_done = false;
  Deadline hello_deadline;
  bool closing = false;  // close once `out` is sent (a refusal)
  Deadline close_deadline = Deadline::max();
  bool dead = false;
};

class Loop {
 public:
  Loop(const StoreServerOptions& o, const Socket& listener, const Socket& wake, std::atomic<bool>& stopping,
       std::atomic<double>& flush_s, const std::string& address, std::mutex& failure_lock,
       std::string& failure)
      : o_(o),
        failure_lock_(failure_lock),
        failure_(failure),
        listener_(listener),
        wake_(wake),
        stopping_(stopping),
        flush_s_(flush_s),
        address_(address),
        tag_(job_key_tag(o.job_key)),
        state_(o.world_size, tag_, address, o.started),
        buffer_(64 * 1024),
        warnings_(cat("store at ", address, ": "), "connections dropped or refused") {}

  void run();

 private:
  void accept_all(Deadline now);
  void read_from(ConnId id, Conn& c, Deadline now);
  void parse(ConnId id, Conn& c, Deadline now);
  void handle(ConnId id, Conn& c, const Header& h, const uint8_t* payload, Deadline now);
  void flush(ConnId id, Conn& c);
  void deliver();
  void drop(ConnId id, Conn& c, const std::string& why);
  void tell_everyone_why();
  void close_all();
  // Answers with an error (in the peer's own job-key tag, so that it can read it), then closes.
  // `status` gcommOutOfMemory: the store is full; the client may retry.
  void refuse(Conn& c, uint64_t tag, const std::string& why, Deadline now,
              gcommStatus_t status = gcommInvalidArgument);
  size_t open_connections() const;
  size_t lingering() const;  // refused, still delivering the reason
  Conn* oldest_without_hello();
  std::string who(ConnId id, const Conn& c) const {
    int rank = state_.rank_of(id);
    return rank >= 0 ? cat(c.peer, " (rank ", rank, ")") : c.peer;
  }

  const StoreServerOptions& o_;
  std::mutex& failure_lock_;
  std::string& failure_;
  const Socket& listener_;
  const Socket& wake_;
  std::atomic<bool>& stopping_;
  std::atomic<double>& flush_s_;
  const std::string address_;
  const uint64_t tag_;
  StoreState state_;
  std::map<ConnId, Conn> conns_;
  ConnId next_id_ = 1;
  Deadline accept_paused_until_ = Deadline::min();
  std::vector<uint8_t> buffer_;
  // Connections that never joined the job (a joined rank's drop is always said).
  WarnLimiter warnings_;
};

void Loop::run() {
  std::vector<pollfd> fds;
  std::vector<ConnId> ids;
  Deadline stop_at = Deadline::max();
  for (;;) {
    Deadline now = Clock::now();
    bool stopping = stopping_.load(std::memory_order_acquire);
    if (stopping) {
      if (stop_at == Deadline::max()) {
        stop_at = deadline_after(flush_s_.load());
        tell_everyone_why();
      }
      bool queued = std::any_of(conns_.begin(), conns_.end(), [](const auto& kv) {
        return !kv.second.dead && kv.second.sent < kv.second.out.size();
      });
      if (!queued || now >= stop_at) return close_all();
    }
    bool listening = !stopping && now >= accept_paused_until_;
    fds.assign({pollfd{wake_.fd(), POLLIN, 0},
                pollfd{listener_.fd(), static_cast<short>(listening ? POLLIN : 0), 0}});
    ids.clear();
    Deadline wake_at = stopping ? stop_at : state_.next_deadline();
    if (!stopping && !listening) wake_at = std::min(wake_at, accept_paused_until_);
    wake_at = std::min(wake_at, warnings_.due());
    for (auto& [id, c] : conns_) {
      short events = stopping ? 0 : POLLIN;
      if (c.sent < c.out.size()) events |= POLLOUT;
      fds.push_back(pollfd{c.socket.fd(), events, 0});
      ids.push_back(id);
      if (!c.hello_done && !c.closing) wake_at = std::min(wake_at, c.hello_deadline);
      if (c.closing) wake_at = std::min(wake_at, c.close_deadline);
    }
    int rc = ::poll(fds.data(), fds.size(), wake_at == Deadline::max() ? -1 : poll_ms_until(wake_at));
    if (rc < 0 && errno != EINTR) {
      GCOMM_WARN("store at ", address_, ": poll() failed (", errno_text(errno), "); the store stops");
      return;
    }
    now = Clock::now();
    if (fds[0].revents != 0) {
      char drain[64];
      while (::read(wake_.fd(), drain, sizeof(drain)) > 0) {
      }
      std::string failure;
      {
        std::lock_guard<std::mutex> held(failure_lock_);
        failure.swap(failure_);
      }
      if (!failure.empty()) state_.fail(gcommRemoteError, failure);
    }
    if (fds[1].revents & POLLIN) accept_all(now);
    for (size_t i = 0; i < ids.size(); ++i) {
      auto it = conns_.find(ids[i]);
      if (it == conns_.end() || it->second.dead) continue;
      short re = fds[i + 2].revents;
      if (re & POLLOUT) flush(ids[i], it->second);
      if (!it->second.dead && (re & (POLLIN | POLLHUP | POLLERR))) {
        if (stopping)
          it->second.dead = true;
        else
          read_from(ids[i], it->second, now);
      }
    }
    state_.expire(now);
    if (now >= warnings_.due()) warnings_.summarize();
    for (auto& [id, c] : conns_) {
      if (c.dead) continue;
      if (!c.hello_done && !c.closing && now >= c.hello_deadline)
        drop(id, c, cat("it did not say hello within ", o_.hello_timeout_s, " s"));
      else if (c.closing && now >= c.close_deadline)
        c.dead = true;
    }
    deliver();
    for (auto it = conns_.begin(); it != conns_.end();)
      it = it->second.dead ? conns_.erase(it) : std::next(it);
  }
}

// The store stops after the job failed: every peer still connected (one that
// joined, or one whose hello is still unread) learns why instead of seeing only a
// closed connection.
void Loop::tell_everyone_why() {
  if (state_.job_status() == gcommSuccess) return;
  std::vector<uint8_t> frame = Writer()
                                   .u32(static_cast<uint32_t>(state_.job_status()))
                                   .str(state_.job_message())
                                   .frame(MsgType::kError, tag_);
  for (auto& [id, c] : conns_) {
    if (c.dead || c.closing) continue;
    c.out.insert(c.out.end(), frame.begin(), frame.end());
    flush(id, c);
  }
}

// Reads what peers sent but nobody read before closing: closing a socket with
// unread input sends a reset, which can destroy the replies still in flight.
void Loop::close_all() {
  for (auto& [id, c] : conns_) {
    if (!c.socket.valid()) continue;
    for (int i = 0; i < 16 && ::recv(c.socket.fd(), buffer_.data(), buffer_.size(), MSG_DONTWAIT) > 0; ++i) {
    }
    ::shutdown(c.socket.fd(), SHUT_WR);
  }
  conns_.clear();
}

void Loop::accept_all(Deadline now) {
  for (int round = 0; round < kAcceptsPerRound; ++round) {
    std::string peer;
    errno = 0;
    Socket s = accept_one(listener_, peer);
    if (!s.valid()) {
      int err = errno;
      if (err != 0 && err != EAGAIN && err != EWOULDBLOCK && err != EINTR && err != ECONNABORTED) {
        // Out of descriptors, say: pause accepting rather than spin on a listener that stays readable.
        GCOMM_WARN("store at ", address_, ": accept() failed (", errno_text(err),
                   "); pausing new connections");
        accept_paused_until_ = now + std::chrono::milliseconds(100);
      }
      return;
    }
    // Full: the oldest connection that has not said hello makes room (a rank
    // says hello at once, so idle connections go first and the job's ranks
    // keep their place); if every connection is a rank, the newcomer is turned
    // away. Either way the one turned away is told the store is full, so a
    // rank among them retries (StoreClient).
    const size_t open = open_connections();
    const bool full = open >= 2 * static_cast<size_t>(o_.world_size) + 64;
    Conn* victim = full ? oldest_without_hello() : nullptr;
    Conn& c = conns_[next_id_++];
    c.socket = std::move(s);
    c.peer = peer;
    c.hello_deadline = deadline_after(o_.hello_timeout_s, now);
    if (full) {
      Conn& turned = victim != nullptr ? *victim : c;
      if (lingering() < kMaxLingering)
        refuse(turned, tag_,
               cat("the store is full (", open,
                   " connections; another program may be holding connections to this port); try again"),
               now, gcommOutOfMemory);
      else
        turned.dead = true;  // a flood: no room left even to say why
    }
  }
}

void Loop::read_from(ConnId id, Conn& c, Deadline now) {
  // A bounded number of reads per round, so one chatty peer cannot starve the rest.
  for (int round = 0; round < 16 && !c.dead; ++round) {
    ssize_t got = ::recv(c.socket.fd(), buffer_.data(), buffer_.size(), 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (got == 0 || errno == ECONNRESET) {
      std::string how = got == 0 ? "closed its connection" : "reset its connection";
      c.dead = true;
      if (state_.joined(id)) {
        GCOMM_WARN("store at ", address_, ": ", who(id, c), " ", how, " without saying goodbye");
        state_.leave(id, false,
                     cat("lost its connection to the store at ", address_,
                         " without saying goodbye: did its process die? (its log says why)"));
      } else if (!c.closing) {
        GCOMM_INFO(STORE, "store at ", address_, ": ", c.peer, " ", how, " before saying hello");
      }
      return;
    }
    if (got < 0) return drop(id, c, cat("reading failed: ", errno_text(errno)));
    if (c.closing) continue;  // refused: whatever it sends now is ignored
    c.in.insert(c.in.end(), buffer_.begin(), buffer_.begin() + got);
    parse(id, c, now);
  }
}

void Loop::parse(ConnId id, Conn& c, Deadline now) {
  size_t used = 0;
  while (!c.dead && !c.closing && c.in.size() - used >= kHeaderBytes) {
    Header h;
    std::string bad = parse_header(c.in.data() + used, c.hello_done ? kMaxPayloadBytes : kMaxHelloBytes, h);
    if (!bad.empty()) return drop(id, c, bad);
    if (h.tag != tag_) {
      if (!c.hello_done)
        return refuse(
            c, h.tag,
            "its job key differs from this job's (set the same GRADCOMM_JOB_KEY or config.job_key on "
            "every rank)",
            now);
      return drop(id, c, "it sent a message with another job key");
    }
    if (c.in.size() - used < kHeaderBytes + h.length) break;
    try {
      handle(id, c, h, c.in.data() + used + kHeaderBytes, now);
    } catch (const Error& e) {
      return drop(id, c, e.message());
    }
    used += kHeaderBytes + h.length;
  }
  if (!c.dead)
    c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(std::min(used, c.in.size())));
}

void Loop::handle(ConnId id, Conn& c, const Header& h, const uint8_t* payload, Deadline now) {
  Reader r(payload, h.length, msg_type_name(h.type));
  if (!c.hello_done) {
    if (h.type != MsgType::kHello)
      return drop(id, c, cat("it sent '", msg_type_name(h.type), "' before hello"));
    std::string key = r.str();
    int rank = r.i32();
    int world = r.i32();
    std::string name = printable(r.str());
    const uint32_t generation = r.u32();
    r.finish();
    if (key == o_.job_key && generation > o_.generation)
      return refuse(c, h.tag,
                    cat("this store is an earlier communicator's of the job (generation ", o_.generation,
                        ", rank ", rank, "'s is ", generation, "): it is closing; try again"),
                    now, gcommInvalidState);
    if (key == o_.job_key && generation < o_.generation) {
      const std::string why = cat(
          "it is making the job's communicator #", generation + 1, " on this address, rank 0 its #",
          o_.generation + 1, ": every rank must make (and close) the same communicators on one MASTER_PORT");
      state_.note_refused(rank, why);
      return refuse(c, h.tag, why, now);
    }
    if (key != o_.job_key)
      return refuse(c, h.tag,
                    "its job key differs from this job's (set the same GRADCOMM_JOB_KEY or config.job_key on "
                    "every rank)",
                    now);
    if (rank == 0 && state_.rank_came(0)) {
      // Rank 0 runs this store: another rank 0 of this job key is another job's,
      // whose store found the port taken (Bootstrap::fail_listen).
      const std::string why = cat(kSecondRankZero, " (", name, " at ", c.peer,
                                  ") tried to start this job's store: ", clash_message(o_.job_key, address_));
      state_.fail(gcommInvalidArgument, why);
      return refuse(c, h.tag, why, now);
    }
    std::string refused = state_.join(id, rank, world, cat(name, " at ", c.peer));
    if (!refused.empty()) {
      state_.note_refused(rank, refused);
      return refuse(c, h.tag, refused, now);
    }
    c.hello_done = true;
    GCOMM_INFO(STORE, "store at ", address_, ": rank ", rank, " joined (", name, " at ", c.peer, ")");
    return;
  }
  switch (h.type) {
    case MsgType::kSet: {
      std::string key = r.str();
      std::vector<uint8_t> value = r.blob();
      r.finish();
      return state_.set(id, key, std::move(value));
    }
    case MsgType::kGet: {
      std::string key = r.str();
      uint32_t ms = r.u32();
      r.finish();
      return state_.get(id, key, ms / 1000.0, now);
    }
    case MsgType::kGather: {
      std::string name = r.str();
      uint32_t ms = r.u32();
      std::vector<uint8_t> mine = r.blob();
      r.finish();
      return state_.gather(id, name, std::move(mine), ms / 1000.0, now);
    }
    case MsgType::kAbort: {
      std::string reason = printable(r.str(kMaxPayloadBytes), 4096);
      r.finish();
      return state_.abort(id, reason);
    }
    case MsgType::kBye:
      r.finish();
      GCOMM_INFO(STORE, "store at ", address_, ": ", who(id, c), " said goodbye");
      state_.leave(id, true);
      c.dead = true;
      return;
    default:
      return drop(id, c,
                  cat("it sent '", msg_type_name(h.type), "' (",
                      h.type == MsgType::kHello ? "twice" : "a reply", ")"));
  }
}

void Loop::flush(ConnId id, Conn& c) {
  while (c.sent < c.out.size()) {
    ssize_t n =
        ::send(c.socket.fd(), c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c.sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (c.closing) {
      c.dead = true;
      return;
    }
    return drop(id, c, cat("sending failed: ", errno_text(errno)));
  }
  c.out.clear();
  c.sent = 0;
  // A refusal is sent: close our side only, and keep reading (and discarding)
  // until the peer closes or close_deadline. Closing with its unread bytes
  // pending would send a reset, which can destroy the reason in flight.
  if (c.closing) ::shutdown(c.socket.fd(), SHUT_WR);
}

void Loop::deliver() {
  // Dropping a peer can queue more replies (its peers learn that it left).
  for (auto replies = state_.take_replies(); !replies.empty(); replies = state_.take_replies()) {
    for (auto& reply : replies) {
      auto it = conns_.find(reply.conn);
      if (it == conns_.end() || it->second.dead) continue;
      Conn& c = it->second;
      if (c.out.size() - c.sent + reply.frame.size() > kMaxQueuedBytes) {
        drop(reply.conn, c, "it does not read its replies");
        continue;
      }
      c.out.insert(c.out.end(), reply.frame.begin(), reply.frame.end());
      flush(reply.conn, c);
    }
  }
}

void Loop::drop(ConnId id, Conn& c, const std::string& why) {
  if (c.hello_done)  // a rank of the job: always said
    GCOMM_WARN("store at ", address_, ": dropped the connection from ", who(id, c), ": ", why);
  else
    warnings_.warn(Clock::now(), cat("dropped the connection from ", who(id, c), ": ", why));
  c.dead = true;
  state_.leave(id, false, cat("was dropped by the store at ", address_, ": ", why));
}

size_t Loop::open_connections() const {
  return static_cast<size_t>(std::count_if(
      conns_.begin(), conns_.end(), [](const auto& kv) { return !kv.second.dead && !kv.second.closing; }));
}

size_t Loop::lingering() const {
  return static_cast<size_t>(std::count_if(
      conns_.begin(), conns_.end(), [](const auto& kv) { return !kv.second.dead && kv.second.closing; }));
}

Conn* Loop::oldest_without_hello() {
  for (auto& [id, c] : conns_)  // ids grow: the first match is the oldest
    if (!c.dead && !c.closing && !c.hello_done) return &c;
  return nullptr;
}

void Loop::refuse(Conn& c, uint64_t tag, const std::string& why, Deadline now, gcommStatus_t status) {
  if (status == gcommInvalidState)  // a rank early for the next communicator: normal, it retries
    GCOMM_INFO(STORE, "store at ", address_, ": turned away ", c.peer, ": ", why);
  else
    warnings_.warn(now, cat("refused ", c.peer, ": ", why));
  std::vector<uint8_t> frame =
      Writer().u32(static_cast<uint32_t>(status)).str(why).frame(MsgType::kError, tag);
  c.out.insert(c.out.end(), frame.begin(), frame.end());
  c.in.clear();
  c.closing = true;
  c.close_deadline = now + std::chrono::seconds(1);
  flush(0, c);
}

}  // namespace

StoreServer::StoreServer(const StoreServerOptions& options) : options_(options) {
  require(options.world_size >= 1, "the store needs a world size >= 1, not ", options.world_size);
  listener_ = listen_on(options.host, options.port, port_, loopback_);
  if (options_.address.empty()) options_.address = host_port(options.host, port_);
  int fds[2];
  if (::pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0)
    fail(gcommInternalError, "pipe2() failed: ", errno_text(errno));
  wake_read_ = Socket(fds[0]);
  wake_write_ = Socket(fds[1]);
  GCOMM_INFO(STORE, "store listening on port ", port_, " for ", options.world_size, " ranks (",
             options_.address, ")");
  thread_ = std::thread([this] { run(); });
}

StoreServer::~StoreServer() {
  stop();
}

void StoreServer::stop(double flush_s) noexcept {
  if (!thread_.joinable()) return;
  flush_s_.store(flush_s);
  stopping_.store(true, std::memory_order_release);
  char one = 1;
  (void)!::write(wake_write_.fd(), &one, 1);
  thread_.join();
  listener_.close();
}

void StoreServer::fail_job(const std::string& message) {
  {
    std::lock_guard<std::mutex> held(failure_lock_);
    failure_ = message.empty() ? std::string("the job failed") : message;
  }
  char one = 1;
  (void)!::write(wake_write_.fd(), &one, 1);
}

void StoreServer::run() noexcept {
  try {
    Loop loop(options_, listener_, wake_read_, stopping_, flush_s_, options_.address, failure_lock_,
              failure_);
    loop.run();
  } catch (const std::exception& e) {
    GCOMM_WARN("store at ", options_.address, " stopped on an internal error: ", e.what());
  } catch (...) {
    GCOMM_WARN("store at ", options_.address, " stopped on an unknown internal error");
  }
}

}  // namespace gradcomm::comm::bootstrap
