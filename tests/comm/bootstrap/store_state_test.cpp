// The store's rules without sockets: joins, gathers (rank order, reuse of a name,
// timeouts naming the missing ranks), departures and failures.
#include "comm/bootstrap/store_state.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "comm/bootstrap/store_protocol.hpp"

namespace gradcomm::comm::bootstrap {
namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

struct Parsed {
  ConnId conn;
  MsgType type;
  std::vector<uint8_t> payload;
};

std::vector<Parsed> take(StoreState& s) {
  std::vector<Parsed> out;
  for (auto& r : s.take_replies()) {
    Header h;
    EXPECT_EQ(parse_header(r.frame.data(), kMaxPayloadBytes, h), "");
    out.push_back({r.conn, h.type, std::vector<uint8_t>(r.frame.begin() + kHeaderBytes, r.frame.end())});
  }
  return out;
}

std::string error_text(const Parsed& p) {
  Reader r(p.payload.data(), p.payload.size(), "error");
  uint32_t status = r.u32();
  return std::string(status == gcommTimeout ? "timeout: " : "error: ") + r.str(kMaxPayloadBytes);
}

TEST(StoreState, RankList) {
  EXPECT_EQ(rank_list({2}), "rank 2");
  EXPECT_EQ(rank_list({2, 3}), "ranks 2, 3");
  std::vector<int> many;
  for (int i = 0; i < 20; ++i) many.push_back(i);
  EXPECT_EQ(rank_list(many), "ranks 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 (and 4 more)");
}

TEST(StoreState, JoinRefusesConflicts) {
  StoreState s(2, 7, "h:1");
  EXPECT_EQ(s.join(1, 0, 2, "a"), "");
  EXPECT_TRUE(contains(s.join(2, 0, 2, "b"), "already holds")) << "second claim of rank 0";
  EXPECT_TRUE(contains(s.join(3, 2, 2, "c"), "outside 0..1"));
  EXPECT_TRUE(contains(s.join(4, 1, 3, "d"), "world size is 3 but this job's rank 0 says 2"));
  EXPECT_EQ(s.join(5, 1, 2, "e"), "");
  s.leave(5, true);
  EXPECT_TRUE(contains(s.join(6, 1, 2, "f"), "already joined and left"));
}

TEST(StoreState, GatherGivesEveryoneEveryContributionInRankOrderAndTheNameCanBeReused) {
  StoreState s(3, 7, "h:1");
  for (int r = 0; r < 3; ++r) ASSERT_EQ(s.join(10 + r, r, 3, "x"), "");
  (void)take(s);
  auto now = Clock::now();
  for (int round = 0; round < 2; ++round) {
    for (int r : {2, 0, 1}) s.gather(10 + r, "g", {static_cast<uint8_t>(r + 10 * round)}, 5.0, now);
    auto replies = take(s);
    ASSERT_EQ(replies.size(), 3u);
    for (auto& p : replies) {
      ASSERT_EQ(p.type, MsgType::kOk);
      Reader rd(p.payload.data(), p.payload.size(), "gather");
      ASSERT_EQ(rd.u32(), 3u);
      for (int r = 0; r < 3; ++r)
        EXPECT_EQ(rd.blob(), std::vector<uint8_t>{static_cast<uint8_t>(r + 10 * round)});
    }
  }
  EXPECT_EQ(s.next_deadline(), Deadline::max());
}

TEST(StoreState, GatherTimeoutNamesNeverConnectedAndAbsentRanks) {
  auto t0 = Clock::now();
  StoreState s(4, 7, "10.0.0.1:29500", t0);
  ASSERT_EQ(s.join(1, 0, 4, "a"), "");
  ASSERT_EQ(s.join(2, 1, 4, "b"), "");
  ASSERT_EQ(s.join(4, 3, 4, "d"), "");
  (void)take(s);
  s.gather(1, "init", {}, 5.0, t0);
  s.gather(2, "init", {}, 5.0, t0);
  EXPECT_TRUE(take(s).empty());
  s.expire(t0 + std::chrono::seconds(4));
  EXPECT_TRUE(take(s).empty()) << "not yet";
  s.expire(t0 + std::chrono::seconds(5));
  auto replies = take(s);
  ASSERT_EQ(replies.size(), 2u);
  std::string m = error_text(replies[0]);
  EXPECT_TRUE(contains(m, "timeout: rank 2 of 4 never connected to 10.0.0.1:29500 within 5 s")) << m;
  EXPECT_TRUE(contains(m, "rank 3 of 4 connected but did not reach 'init' within 5 s")) << m;
  EXPECT_TRUE(contains(m, "present: 0, 1")) << m;
  EXPECT_EQ(error_text(replies[1]), m);
  // A late arrival gets the same failure at once.
  s.gather(4, "init", {}, 5.0, t0 + std::chrono::seconds(6));
  replies = take(s);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(error_text(replies[0]), m);
}

TEST(StoreState, GetWaitsForSetAndTimesOutNamingTheKey) {
  auto t0 = Clock::now();
  StoreState s(2, 7, "h:1", t0);
  ASSERT_EQ(s.join(1, 0, 2, "a"), "");
  ASSERT_EQ(s.join(2, 1, 2, "b"), "");
  (void)take(s);
  s.get(2, "id", 1.0, t0);
  s.get(2, "other", 1.0, t0);
  EXPECT_TRUE(take(s).empty());
  s.set(1, "id", {42});
  auto replies = take(s);
  ASSERT_EQ(replies.size(), 2u);  // the waiter's value and the setter's ok
  s.expire(t0 + std::chrono::seconds(2));
  replies = take(s);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_TRUE(contains(error_text(replies[0]), "timeout: no rank set 'other'")) << error_text(replies[0]);
}

TEST(StoreState, ADroppedRankOrAnAbortFailsEveryWaitAtOnce) {
  StoreState s(3, 7, "h:1");
  for (int r = 0; r < 3; ++r) ASSERT_EQ(s.join(10 + r, r, 3, "host" + std::to_string(r)), "");
  (void)take(s);
  auto now = Clock::now();
  s.gather(10, "init", {}, 100.0, now);
  s.get(11, "id", 100.0, now);
  s.leave(12, false, "lost its connection to the store");
  auto replies = take(s);
  ASSERT_EQ(replies.size(), 2u);
  for (auto& p : replies) {
    EXPECT_TRUE(contains(error_text(p), "rank 2 (host2) lost its connection to the store")) << error_text(p);
  }
  s.gather(11, "later", {}, 100.0, now);
  replies = take(s);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_TRUE(contains(error_text(replies[0]), "lost its connection"));
}

TEST(StoreState, AnAbortIsRelayedWithItsReasonAndAGoodbyeFailsOnlyGathersThatNeedTheRank) {
  StoreState s(3, 7, "h:1");
  for (int r = 0; r < 3; ++r) ASSERT_EQ(s.join(10 + r, r, 3, "host" + std::to_string(r)), "");
  (void)take(s);
  auto now = Clock::now();
  s.gather(10, "shutdown", {}, 100.0, now);
  s.gather(11, "shutdown", {}, 100.0, now);
  s.leave(12, true);  // said goodbye without reaching 'shutdown'
  auto replies = take(s);
  ASSERT_EQ(replies.size(), 2u);
  EXPECT_TRUE(contains(error_text(replies[0]), "rank 2 already left the job (it said goodbye)"))
      << error_text(replies[0]);
  // Values still work: a goodbye is not a failure of the job.
  s.set(10, "k", {1});
  replies = take(s);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].type, MsgType::kOk);
  s.get(10, "never", 100.0, now);
  s.abort(11, "cuda:1 ran out of memory");
  replies = take(s);
  ASSERT_EQ(replies.size(), 2u);  // the waiter's failure, the aborter's ok
  EXPECT_TRUE(contains(error_text(replies[0]), "rank 1 (host1) failed: cuda:1 ran out of memory"))
      << error_text(replies[0]);
  EXPECT_EQ(replies[1].type, MsgType::kOk);
}

}  // namespace
}  // namespace gradcomm::comm::bootstrap
