// The rendezvous store over real loopback sockets, ranks as threads: values,
// gathers and barriers, and the peers that must not disturb the job: garbage
// bytes, a wrong job key, oversized messages, a slow peer, a dead peer, a store
// that goes away. Each case is bounded by a short timeout; none may hang.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/bootstrap/bootstrap.hpp"
#include "comm/bootstrap/store_client.hpp"
#include "comm/bootstrap/store_protocol.hpp"
#include "comm/bootstrap/store_server.hpp"
#include "common/error.hpp"
#include "common/log.hpp"

namespace gradcomm::comm::bootstrap {
namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}
double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// WARN lines, captured for the duration of a test.
struct LogCapture {
  std::mutex mutex;
  std::vector<std::string> lines;
  LogCapture() { set_log_config(LogLevel::kWarn, &LogCapture::sink, this); }
  ~LogCapture() { reset_log_config(); }
  static void sink(gcommLogLevel_t, const char* line, void* self) {
    auto* c = static_cast<LogCapture*>(self);
    std::lock_guard<std::mutex> lock(c->mutex);
    c->lines.emplace_back(line);
  }
  bool has(const std::string& part) {
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& l : lines)
      if (contains(l, part)) return true;
    return false;
  }
};

StoreClientOptions client_options(int port, int rank, int world, const std::string& key = "job") {
  StoreClientOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  o.job_key = key;
  o.rank = rank;
  o.world_size = world;
  return o;
}

struct Store {
  std::unique_ptr<StoreServer> server;
  explicit Store(int world, double hello_timeout_s = 30, uint32_t generation = 0) {
    StoreServerOptions o;
    o.host = "127.0.0.1";
    o.job_key = "job";
    o.world_size = world;
    o.hello_timeout_s = hello_timeout_s;
    o.generation = generation;
    server = std::make_unique<StoreServer>(o);
  }
  int port() const { return server->port(); }
  std::unique_ptr<StoreClient> connect(int rank, int world, const std::string& key = "job",
                                       double timeout_s = 5) {
    return std::make_unique<StoreClient>(client_options(port(), rank, world, key), deadline_after(timeout_s));
  }
};

// Runs body(rank) on one thread per rank; returns "" or the error of each rank.
std::vector<std::string> on_threads(int n, const std::function<void(int)>& body) {
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (const Error& e) {
        errors[r] = std::string(status_name(e.status())) + ": " + e.message();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

// A raw TCP connection, for peers that do not follow the protocol.
Socket raw_connect(int port) {
  std::string error;
  bool fatal = false;
  Socket s = connect_until("127.0.0.1", port, deadline_after(5), error, fatal);
  EXPECT_TRUE(s.valid()) << error;
  return s;
}

void raw_send(const Socket& s, const std::vector<uint8_t>& bytes) {
  std::string error;
  ASSERT_EQ(send_all(s, bytes.data(), bytes.size(), deadline_after(5), error), IoResult::kOk) << error;
}

// Whether the other side closes the connection within `seconds` (what it sends is discarded).
bool closed_within(const Socket& s, double seconds) {
  Deadline d = deadline_after(seconds);
  char buf[4096];
  for (;;) {
    pollfd p{s.fd(), POLLIN, 0};
    if (::poll(&p, 1, poll_ms_until(d)) <= 0) return false;
    ssize_t n = ::recv(s.fd(), buf, sizeof(buf), 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return true;
  }
}

// Ranks 0..n-1 meet at a barrier and exchange a value: the job the misbehaving peers must not disturb.
void real_job(Store& store, int n) {
  auto errors = on_threads(n, [&](int r) {
    auto c = store.connect(r, n);
    if (r == 0) c->set("greeting", {7, 7}, deadline_after(5));
    EXPECT_EQ(c->get("greeting", deadline_after(5)), (std::vector<uint8_t>{7, 7}));
    c->barrier("done", deadline_after(5));
    c->bye();
  });
  for (int r = 0; r < n; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST(Store, SetGetGatherAndBarrierAcrossRanks) {
  Store store(3);
  auto errors = on_threads(3, [&](int r) {
    auto c = store.connect(r, 3);
    if (r == 1) c->set("k", {1, 2, 3}, deadline_after(5));
    EXPECT_EQ(c->get("k", deadline_after(5)), (std::vector<uint8_t>{1, 2, 3}));
    auto all = c->gather("g", {static_cast<uint8_t>(100 + r)}, deadline_after(5));
    ASSERT_EQ(all.size(), 3u);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(all[i], std::vector<uint8_t>{static_cast<uint8_t>(100 + i)});
    for (int i = 0; i < 3; ++i) c->barrier("again", deadline_after(5));  // a name can be reused
    c->bye();
  });
  for (auto& e : errors) EXPECT_EQ(e, "");
}

TEST(Store, GetTimesOutNamingTheKey) {
  Store store(1);
  auto c = store.connect(0, 1);
  auto start = Clock::now();
  try {
    (void)c->get("nccl/unique_id", deadline_after(0.3));
    FAIL() << "get returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), gcommTimeout);
    EXPECT_TRUE(contains(e.message(), "no rank set 'nccl/unique_id'")) << e.message();
  }
  EXPECT_LT(since(start), 2.0);
  c->set("x", {1}, deadline_after(5));  // the connection is still usable
}

TEST(Store, BarrierTimeoutNamesTheMissingRanks) {
  Store store(4);
  auto late = store.connect(3, 4);  // connects, never reaches the barrier; rank 2 never connects
  auto start = Clock::now();
  auto errors = on_threads(2, [&](int r) { store.connect(r, 4)->barrier("init", deadline_after(0.5)); });
  EXPECT_LT(since(start), 3.0);
  for (auto& e : errors) {
    EXPECT_TRUE(contains(e, "gcommTimeout: rank 2 of 4 never connected to 127.0.0.1:")) << e;
    EXPECT_TRUE(contains(e, "rank 3 of 4 connected but did not reach 'init'")) << e;
  }
  // The late rank learns the same at once instead of waiting.
  start = Clock::now();
  try {
    late->barrier("init", deadline_after(30));
    FAIL();
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.message(), "rank 2 of 4 never connected")) << e.message();
  }
  EXPECT_LT(since(start), 2.0);
}

TEST(Store, GarbageBytesAreDroppedAndLoggedAndTheJobGoesOn) {
  LogCapture log;
  Store store(2);
  Socket noise = raw_connect(store.port());
  std::vector<uint8_t> garbage(4096);
  for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<uint8_t>(i * 131 + 17);
  raw_send(noise, garbage);
  Socket http = raw_connect(store.port());
  std::string get = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  raw_send(http, std::vector<uint8_t>(get.begin(), get.end()));
  EXPECT_TRUE(closed_within(noise, 3.0));
  EXPECT_TRUE(closed_within(http, 3.0));
  real_job(store, 2);
  EXPECT_TRUE(log.has("dropped the connection from 127.0.0.1:")) << "the drop is logged";
  EXPECT_TRUE(log.has("not a gradcomm store message"));
}

// A round of garbage (a port scanner, a misconfigured client retrying) is said in a
// few lines and a count, not one WARN line per connection (302 lines before).
TEST(Store, ARoundOfGarbageConnectionsIsLoggedInAFewLinesAndACount) {
  LogCapture log;
  auto store = std::make_unique<Store>(2);
  const int port = store->port();
  for (int k = 0; k < 40; ++k) {
    Socket noise = raw_connect(port);
    raw_send(noise, std::vector<uint8_t>(64, static_cast<uint8_t>(0xA5 + k)));
    EXPECT_TRUE(closed_within(noise, 3.0)) << "connection " << k;
  }
  real_job(*store, 2);
  store.reset();  // the count of what was not shown is said when the store stops, at the latest
  size_t lines = 0;
  {
    std::lock_guard<std::mutex> lock(log.mutex);
    for (const std::string& l : log.lines) lines += contains(l, "store at") ? 1 : 0;
  }
  EXPECT_LE(lines, 6u) << "five lines and one count";
  EXPECT_TRUE(log.has("35 more connections dropped or refused")) << "the count of those not shown";
}

TEST(Store, AWrongJobKeyIsRefusedWithAClearErrorAndTheJobGoesOn) {
  LogCapture log;
  Store store(2);
  try {
    (void)store.connect(1, 2, "another-job");
    FAIL() << "a foreign rank was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), gcommInvalidArgument);
    EXPECT_TRUE(contains(e.message(), "refused rank 1")) << e.message();
    EXPECT_TRUE(contains(e.message(), "job key differs")) << e.message();
  }
  // A frame whose tag matches but whose hello names another key is refused too.
  Socket forged = raw_connect(store.port());
  raw_send(forged,
           Writer().str("other").i32(0).i32(2).str("x").u32(0).frame(MsgType::kHello, job_key_tag("job")));
  EXPECT_TRUE(closed_within(forged, 3.0));
  real_job(store, 2);
  EXPECT_TRUE(log.has("refused 127.0.0.1:"));
}

TEST(Store, OversizedMessagesAreDroppedWithoutReadingThem) {
  LogCapture log;
  Store store(2);
  // Before hello a peer may send at most kMaxHelloBytes.
  Socket big_hello = raw_connect(store.port());
  std::vector<uint8_t> frame =
      Writer().str(std::string(1000, 'k')).frame(MsgType::kHello, job_key_tag("job"));
  frame[16] = 0x00;
  frame[17] = 0x00;
  frame[18] = 0x40;  // claims 4 MiB
  raw_send(big_hello, std::vector<uint8_t>(frame.begin(), frame.begin() + kHeaderBytes));
  EXPECT_TRUE(closed_within(big_hello, 3.0));
  real_job(store, 2);
  EXPECT_TRUE(log.has("exceeds the limit of 4096 bytes")) << "logged with the reason";
  // The client refuses to send a value over the limit at all.
  Store other(1);
  auto c = other.connect(0, 1);
  EXPECT_THROW(c->set("big", std::vector<uint8_t>(kMaxPayloadBytes + 1), deadline_after(5)), Error);
}

TEST(Store, AJoinedRankSendingAnOversizedMessageIsDroppedAndItsPeersFailPromptly) {
  LogCapture log;
  Store store(2);
  Socket rogue = raw_connect(store.port());
  uint64_t tag = job_key_tag("job");
  raw_send(rogue, Writer().str("job").i32(1).i32(2).str("rogue").u32(0).frame(MsgType::kHello, tag));
  std::vector<uint8_t> header = Writer().frame(MsgType::kSet, tag);
  header[19] = 0x01;  // 16 MiB
  auto c = store.connect(0, 2);
  raw_send(rogue, header);
  auto start = Clock::now();
  try {
    c->barrier("init", deadline_after(30));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), gcommRemoteError);
    EXPECT_TRUE(contains(e.message(), "rank 1 (rogue at 127.0.0.1:")) << e.message();
    EXPECT_TRUE(contains(e.message(), "was dropped by the store")) << e.message();
  }
  EXPECT_LT(since(start), 3.0);
  EXPECT_TRUE(log.has("exceeds the limit of 1048576 bytes"));
}

TEST(Store, ASlowPeerBlocksNoOneAndIsDroppedAfterTheHelloTimeout) {
  LogCapture log;
  Store store(2, /*hello_timeout_s=*/0.5);
  Socket slow = raw_connect(store.port());
  std::vector<uint8_t> hello =
      Writer().str("job").i32(1).i32(2).str("slow").u32(0).frame(MsgType::kHello, job_key_tag("job"));
  raw_send(slow, std::vector<uint8_t>(hello.begin(), hello.begin() + 10));  // half a header, then silence
  auto start = Clock::now();
  real_job(store, 2);  // ranks 0 and 1 finish while it dawdles
  EXPECT_LT(since(start), 2.0);
  EXPECT_TRUE(closed_within(slow, 3.0));
  EXPECT_TRUE(log.has("did not say hello within 0.5 s"));
  // A real rank that is merely late is waited for.
  Store store2(2);
  auto errors = on_threads(2, [&](int r) {
    if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    store2.connect(r, 2)->barrier("init", deadline_after(5));
  });
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

// Issue 17 #6: with ranks 0 and 1 in, 200 idle connections held to the store
// filled it (70 connections for 3 ranks); rank 2's connection was accepted and
// closed, and rank 2 failed at once blaming rank 0. Idle connections now make
// room for newcomers (oldest first), so rank 2 joins and the job completes.
TEST(Store, IdleConnectionsThatFillTheStoreMakeRoomForTheJobsRanks) {
  LogCapture log;
  Store store(3);
  std::atomic<bool> flooded{false};
  std::vector<std::string> errors;
  std::thread late([&] {
    errors = on_threads(3, [&](int r) {
      if (r == 2)  // arrives once the flood is in
        while (!flooded) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      auto c = store.connect(r, 3, "job", 10);
      c->barrier("init", deadline_after(10));
      c->bye();
    });
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // ranks 0 and 1 said hello
  std::vector<Socket> idle;
  for (int k = 0; k < 200; ++k) idle.push_back(raw_connect(store.port()));
  flooded = true;
  late.join();
  for (int r = 0; r < 3; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  EXPECT_TRUE(log.has("the store is full")) << "the flood was not noticed";
}

// A rank the store turns away as full retries until its timeout, and then says
// that the store was full (it used to blame rank 0 at once).
TEST(Store, ARankTurnedAwayByAFullStoreRetriesThenSaysSo) {
  int port = 0;
  std::string loopback;
  Socket listener = listen_on("127.0.0.1", 0, port, loopback);
  std::atomic<bool> stop{false};
  std::atomic<int> turned_away{0};
  std::thread fake([&] {  // a store that is always full
    while (!stop) {
      pollfd p{listener.fd(), POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      std::string peer;
      Socket s = accept_one(listener, peer);
      if (!s.valid()) continue;
      std::vector<uint8_t> full = Writer()
                                      .u32(static_cast<uint32_t>(gcommOutOfMemory))
                                      .str("the store is full (70 connections); try again")
                                      .frame(MsgType::kError, job_key_tag("job"));
      std::string error;
      (void)send_all(s, full.data(), full.size(), deadline_after(1), error);
      ++turned_away;
      closed_within(s, 1.0);
    }
  });
  auto start = Clock::now();
  std::string message;
  try {
    StoreClient c(client_options(port, 2, 3), deadline_after(1.5));
  } catch (const Error& e) {
    message = std::string(status_name(e.status())) + ": " + e.message();
  }
  double took = since(start);
  stop = true;
  fake.join();
  EXPECT_TRUE(contains(message, "gcommTimeout: rank 2 of 3 could not join the store")) << message;
  EXPECT_TRUE(contains(message, "it was full")) << message;
  EXPECT_GT(turned_away.load(), 2) << "it did not retry";
  EXPECT_GT(took, 1.0) << "it gave up before its timeout";
  EXPECT_LT(took, 4.0);
}

TEST(Store, ADeadPeerFailsTheOthersPromptlyNamingIt) {
  Store store(3);
  auto dying = store.connect(2, 3);
  auto start = Clock::now();
  auto errors = on_threads(3, [&](int r) {
    if (r == 2) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      dying.reset();  // the process "dies": the socket closes without a goodbye
      return;
    }
    store.connect(r, 3)->barrier("init", deadline_after(30));
  });
  EXPECT_LT(since(start), 3.0);
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(contains(errors[r], "gcommRemoteError: rank 2")) << errors[r];
    EXPECT_TRUE(contains(errors[r], "lost its connection to the store")) << errors[r];
  }
}

TEST(Store, AnAbortReachesTheWaitingRanksWithItsReason) {
  Store store(2);
  auto errors = on_threads(2, [&](int r) {
    auto c = store.connect(r, 2);
    if (r == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      c->abort("cuda:1 is not visible");
      return;
    }
    (void)c->get("nccl/unique_id", deadline_after(30));
  });
  EXPECT_TRUE(contains(errors[0], "gcommRemoteError: rank 1 (")) << errors[0];
  EXPECT_TRUE(contains(errors[0], "failed: cuda:1 is not visible")) << errors[0];
}

TEST(Store, ClaimsOfATakenRankOrAnotherWorldSizeAreRefused) {
  Store store(2);
  auto first = store.connect(1, 2);
  try {
    (void)store.connect(1, 2);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), gcommInvalidArgument);
    EXPECT_TRUE(contains(e.message(), "claims rank 1, which")) << e.message();
  }
  try {
    (void)store.connect(0, 3);
    FAIL();
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.message(), "world size is 3 but this job's rank 0 says 2")) << e.message();
  }
}

TEST(Store, AStoreThatGoesAwayFailsItsClientsPromptly) {
  Store store(2);
  auto c = store.connect(0, 2);
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    store.server->stop();
  });
  auto start = Clock::now();
  try {
    c->barrier("init", deadline_after(30));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), gcommRemoteError);
    EXPECT_TRUE(contains(e.message(), "lost its connection to the store at 127.0.0.1:")) << e.message();
  }
  stopper.join();
  EXPECT_LT(since(start), 3.0);
  EXPECT_THROW(c->set("k", {}, deadline_after(1)), Error) << "a broken client refuses further requests";
}

TEST(Store, ConnectingWhereNoStoreListensTimesOutNamingTheAddress) {
  int port = 0;
  {
    Store gone(1);
    port = gone.port();
  }
  StoreClientOptions o = client_options(port, 1, 2);
  auto start = Clock::now();
  try {
    StoreClient c(o, deadline_after(0.3));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), gcommTimeout);
    EXPECT_TRUE(contains(e.message(),
                         "rank 1 of 2 could not connect to 127.0.0.1:" + std::to_string(port) + " within"))
        << e.message();
    EXPECT_TRUE(contains(e.message(), "Connection refused")) << e.message();
  }
  EXPECT_LT(since(start), 2.0);
  o.host = "no-such-host.invalid";
  EXPECT_THROW(StoreClient(o, deadline_after(1)), Error);
}

TEST(Store, APeerThatIsNotAStoreIsNamedAsSuch) {
  int port = 0;
  std::string loopback;
  Socket listener = listen_on("127.0.0.1", 0, port, loopback);
  std::thread fake([&] {
    pollfd p{listener.fd(), POLLIN, 0};
    if (::poll(&p, 1, 5000) <= 0) return;
    std::string peer;
    Socket s = accept_one(listener, peer);
    std::string reply = "HTTP/1.1 400 Bad Request\r\n\r\n";
    std::string error;
    (void)send_all(s, reply.data(), reply.size(), deadline_after(2), error);
    (void)closed_within(s, 2.0);
  });
  StoreClientOptions o;
  o.host = "127.0.0.1";
  o.port = port;
  o.job_key = "job";
  try {
    StoreClient c(o, deadline_after(3));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), gcommRemoteError);
    EXPECT_TRUE(contains(e.message(), "is it a gradcomm store")) << e.message();
  }
  fake.join();
}

TEST(Bootstrap, RanksMeetReportProblemsAndShutDownTogether) {
  RendezvousOptions o;
  o.world_size = 3;
  o.timeout_s = 5;
  o.rank = 0;
  auto boot0 = std::make_unique<Bootstrap>(o);  // rank 0 listens on a free port
  o.master_port = boot0->port();
  std::vector<std::unique_ptr<Bootstrap>> boots(3);
  boots[0] = std::move(boot0);
  auto errors = on_threads(3, [&](int r) {
    if (r > 0) {
      RendezvousOptions mine = o;
      mine.rank = r;
      boots[r] = std::make_unique<Bootstrap>(mine);
    }
    RankReport report;
    if (r == 1) report = {gcommInvalidArgument, "cuda:1 is not a visible CUDA device"};
    auto reports = boots[r]->meet(report);
    ASSERT_EQ(reports.size(), 3u);
    EXPECT_EQ(reports[1].status, gcommInvalidArgument);
    try {
      throw_if_any_failed(reports, r);
      ADD_FAILURE() << "rank " << r << " went on";
    } catch (const Error& e) {
      if (r == 1) {
        EXPECT_EQ(e.status(), gcommInvalidArgument);
      } else {
        EXPECT_EQ(e.status(), gcommRemoteError);
        EXPECT_TRUE(contains(e.message(), "rank 1 of 3 cannot take part; rank 1: cuda:1 is not"))
            << e.message();
      }
    }
    boots[r]->shutdown(5);
  });
  for (auto& e : errors) EXPECT_EQ(e, "");
}

// Issue 44 #13: two hand-set jobs on one port with one job key. The second job's
// rank 0 finds the port held by a store of its own job key: it fails with the
// clash named, and so does the job whose store it found (a rank of the second
// job may have joined it). Before, the second rank 0 failed with "Address already
// in use" alone, and the first job met whichever rank 1 came first, another job's
// included, and ran on.
TEST(Bootstrap, ASecondRankZeroOnThePortFailsBothJobsNamingTheClash) {
  RendezvousOptions o;
  o.world_size = 2;
  o.timeout_s = 5;
  o.job_key = "clash";
  auto first = std::make_unique<Bootstrap>(o);  // job A's rank 0, on a free port
  o.master_port = first->port();
  const auto start = Clock::now();
  try {
    Bootstrap second(o);  // job B's rank 0
    ADD_FAILURE() << "a second rank 0 started on a taken port";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.message(), "Address already in use")) << e.message();
    EXPECT_TRUE(contains(e.message(), "two jobs with the job key 'clash'")) << e.message();
  }
  // Job A's meeting (with a rank 1 of either job) fails, naming the clash.
  auto errors = on_threads(2, [&](int r) {
    std::unique_ptr<Bootstrap> one;
    if (r == 1) {
      RendezvousOptions mine = o;
      mine.rank = 1;
      one = std::make_unique<Bootstrap>(mine);
    }
    try {
      (void)(r == 0 ? first : one)->meet(RankReport{});
      ADD_FAILURE() << "rank " << r << " met";
    } catch (const Error& e) {
      EXPECT_TRUE(contains(e.message(), "a second rank 0")) << e.message();
      EXPECT_TRUE(contains(e.message(), "two jobs with the job key 'clash'")) << e.message();
    }
  });
  for (auto& e : errors) EXPECT_EQ(e, "");
  EXPECT_LT(since(start), 4.0) << "at once, not at the 5 s timeout";
}

}  // namespace

// A rank making the job's next communicator on this port may reach the previous
// one's store while it closes: that store turns it away to try again (the rank
// then meets the right one), and a rank still on an earlier communicator is refused.
TEST(Store, GenerationsKeepConsecutiveCommunicatorsOnOnePortApart) {
  Store closing(2, 30, /*generation=*/3);
  // Rank 1 with `generation` says hello; the error it gets ("" if it joined).
  auto hello = [&](uint32_t generation, double timeout_s) -> std::pair<gcommStatus_t, std::string> {
    StoreClientOptions o = client_options(closing.port(), 1, 2);
    o.generation = generation;
    try {
      StoreClient c(o, deadline_after(timeout_s));
      return {gcommSuccess, ""};
    } catch (const Error& e) {
      return {e.status(), e.message()};
    }
  };
  const auto start = Clock::now();
  auto [early, early_message] =
      hello(4, 0.5);  // already on the next communicator: retried until its deadline
  EXPECT_EQ(early, gcommTimeout) << early_message;
  EXPECT_TRUE(contains(early_message, "found only an earlier communicator's store")) << early_message;
  EXPECT_TRUE(contains(early_message, "generation 3, rank 1's is 4")) << early_message;
  EXPECT_LT(since(start), 3.0);
  auto [stale, stale_message] = hello(2, 5);  // still on an earlier communicator
  EXPECT_EQ(stale, gcommInvalidArgument) << stale_message;
  EXPECT_TRUE(contains(stale_message, "communicator #3 on this address, rank 0 its #4")) << stale_message;
  EXPECT_EQ(hello(3, 5).first, gcommSuccess);  // the same generation joins
}

// Issue 44 #4: a rank of the job that reached the store and was refused is named
// as such when the others time out waiting for it, with the reason it was given;
// before, they blamed it for never connecting.
TEST(Store, ARankThatWasRefusedIsNamedWithItsReasonNotAsNeverConnected) {
  Store store(2, 30, /*generation=*/1);
  StoreClientOptions zero = client_options(store.port(), 0, 2);
  zero.generation = 1;
  StoreClient rank0(zero, deadline_after(5));
  StoreClientOptions stale = client_options(store.port(), 1, 2);
  stale.generation = 0;  // one communicator behind rank 0 on this port
  try {
    StoreClient rank1(stale, deadline_after(5));
    ADD_FAILURE() << "a stale rank joined";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), gcommInvalidArgument) << e.message();
  }
  try {
    (void)rank0.gather("init", {}, deadline_after(0.5));
    ADD_FAILURE() << "met without rank 1";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), gcommTimeout) << e.message();
    EXPECT_FALSE(contains(e.message(), "never connected")) << e.message();
    EXPECT_TRUE(contains(e.message(), "rank 1 of 2 reached the store but was refused")) << e.message();
    EXPECT_TRUE(contains(e.message(), "communicator #1 on this address, rank 0 its #2")) << e.message();
  }
}

}  // namespace gradcomm::comm::bootstrap
