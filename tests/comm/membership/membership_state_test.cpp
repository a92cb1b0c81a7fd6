// The membership server's rules alone (comm/membership/membership_state.hpp): no
// sockets, the time passed in. The processes that use them are tested in
// membership_process_test.cpp.
#include "comm/membership/membership_state.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using namespace gradcomm;
using namespace gradcomm::comm::membership;

Deadline at(double s) {
  return Deadline{} + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

struct Job {
  explicit Job(int min_ranks, double quorum_timeout = 1.0, double commit_timeout = 10.0)
      : state("job", JobSettings{min_ranks, quorum_timeout, commit_timeout},
              RendezvousHooks{[this](uint32_t g, int world) {
                                opened.push_back({g, world});
                                return 40000 + static_cast<int>(g);
                              },
                              [this](uint32_t g, const std::string& why) {
                                failed.push_back({g, why});
                              }}) {}
  MembershipState state;
  std::vector<std::pair<uint32_t, int>> opened;
  std::vector<std::pair<uint32_t, std::string>> failed;

  // Members `ids` ask at time t; returns their outcomes (asserting each has one).
  std::vector<QuorumOutcome> quorum(const std::vector<MemberId>& ids, double t) {
    for (MemberId id : ids) state.ask_quorum(id, at(t));
    std::vector<QuorumOutcome> out;
    for (MemberId id : ids) {
      auto q = state.take_quorum(id);
      EXPECT_TRUE(q.has_value()) << "member " << id << " has no quorum at t=" << t;
      out.push_back(q.value_or(QuorumOutcome{}));
    }
    return out;
  }
  std::vector<CommitOutcome> vote(const std::vector<MemberId>& ids, bool ok, double t) {
    for (MemberId id : ids) state.vote(id, state.generation(), ok, "why", at(t));
    std::vector<CommitOutcome> out;
    for (MemberId id : ids) {
      auto c = state.take_commit(id);
      EXPECT_TRUE(c.has_value()) << "member " << id << " has no answer at t=" << t;
      out.push_back(c.value_or(CommitOutcome{}));
    }
    return out;
  }
};

TEST(MembershipState, TheFirstGenerationFormsOnceMinRanksAsk) {
  Job job(3);
  MemberId a = job.state.add("a"), b = job.state.add("b"), c = job.state.add("c");
  job.state.ask_quorum(a, at(0));
  job.state.ask_quorum(b, at(0));
  job.state.tick(at(100));
  EXPECT_FALSE(job.state.take_quorum(a).has_value()) << "two of three: no generation yet, however long";
  auto q = job.quorum({c}, 100);
  ASSERT_EQ(q[0].status, gcommSuccess);
  EXPECT_EQ(q[0].generation, 1u);
  EXPECT_EQ(q[0].world, 3);
  EXPECT_EQ(q[0].rank, 2);
  EXPECT_EQ(q[0].rendezvous_port, 40001);
  EXPECT_EQ(q[0].holders, 3) << "in the first generation every member starts from its own state";
  auto qa = job.state.take_quorum(a);
  ASSERT_TRUE(qa.has_value());
  EXPECT_EQ(qa->rank, 0);
  EXPECT_EQ(job.opened.size(), 1u);
}

TEST(MembershipState, AStepCommitsOnEveryMemberOrOnNone) {
  Job job(3);
  std::vector<MemberId> all = {job.state.add("a"), job.state.add("b"), job.state.add("c")};
  job.quorum(all, 0);
  for (const auto& c : job.vote(all, true, 1)) {
    EXPECT_TRUE(c.committed);
    EXPECT_FALSE(c.reconfigure);
    EXPECT_EQ(c.committed_steps, 1u);
  }
  // One member could not finish the step: none applies it.
  job.state.vote(all[0], 1, true, "", at(2));
  EXPECT_FALSE(job.state.take_commit(all[0]).has_value()) << "waits for the others";
  job.state.vote(all[1], 1, false, "rank 2 died in the all-reduce", at(2));
  job.state.vote(all[2], 1, true, "", at(2));
  for (MemberId id : all) {
    auto c = job.state.take_commit(id);
    ASSERT_TRUE(c.has_value());
    EXPECT_FALSE(c->committed);
    EXPECT_TRUE(c->reconfigure);
    EXPECT_EQ(c->committed_steps, 1u);
    EXPECT_TRUE(has(c->reason, "rank 1 (b) could not finish step 2: rank 2 died in the all-reduce"))
        << c->reason;
  }
}

TEST(MembershipState, ALostMemberEndsTheGenerationAndTheSurvivorsGoOnWithoutItInTheirOrder) {
  Job job(4);
  std::vector<MemberId> all = {job.state.add("a"), job.state.add("b"), job.state.add("c"),
                               job.state.add("d")};
  job.quorum(all, 0);
  job.state.vote(all[0], 1, true, "", at(1));
  job.state.lose(all[1], false, at(1));  // killed mid-step
  auto c0 = job.state.take_commit(all[0]);
  ASSERT_TRUE(c0.has_value()) << "a vote waiting on the lost member is answered at once";
  EXPECT_FALSE(c0->committed);
  EXPECT_TRUE(has(c0->reason, "rank 1 (b) lost its connection to the store")) << c0->reason;
  ASSERT_EQ(job.failed.size(), 1u) << "the generation's rendezvous is failed too";
  EXPECT_EQ(job.failed[0].first, 1u);
  auto q = job.quorum({all[3], all[0], all[2]}, 1.1);
  EXPECT_EQ(q[0].generation, 2u);
  EXPECT_EQ(q[0].world, 3);
  EXPECT_EQ(q[1].rank, 0);
  EXPECT_EQ(q[2].rank, 1);
  EXPECT_EQ(q[0].rank, 2) << "survivors keep their order: d was after a and c";
  EXPECT_TRUE(has(q[0].change, "rank 1 (b) lost its connection to the store: did its process die?"))
      << q[0].change;
  EXPECT_EQ(q[0].rendezvous_port, 40002);
}

TEST(MembershipState, AFrozenMemberIsExcludedAtTheQuorumTimeoutAndRefusedForever) {
  Job job(3, /*quorum_timeout=*/2.0);
  std::vector<MemberId> all = {job.state.add("a"), job.state.add("b"), job.state.add("frozen")};
  job.quorum(all, 0);
  job.state.vote(all[0], 1, false, "timed out waiting for rank 2", at(30));
  job.state.vote(all[1], 1, false, "timed out waiting for rank 2", at(30));
  job.state.ask_quorum(all[0], at(30.1));
  job.state.ask_quorum(all[1], at(30.2));
  job.state.tick(at(32.0));
  EXPECT_FALSE(job.state.take_quorum(all[0]).has_value()) << "not before the quorum timeout";
  job.state.tick(at(32.2));
  auto q = job.state.take_quorum(all[1]);
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(q->generation, 2u);
  EXPECT_EQ(q->world, 2);
  EXPECT_TRUE(has(q->change, "rank 2 (frozen) was excluded")) << q->change;
  // It wakes up: its vote and its quorum are refused, never counted.
  job.state.vote(all[2], 1, true, "", at(40));
  auto v = job.state.take_commit(all[2]);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->status, gcommInvalidState);
  EXPECT_TRUE(has(v->reason, "cannot take part in a later step")) << v->reason;
  job.state.vote(all[2], 2, true, "", at(40));
  EXPECT_EQ(job.state.take_commit(all[2])->status, gcommInvalidState);
  job.state.ask_quorum(all[2], at(40));
  EXPECT_EQ(job.state.take_quorum(all[2])->status, gcommInvalidState);
  auto take = job.state.take_quorum(all[0]);
  ASSERT_TRUE(take.has_value());
  for (const auto& c : job.vote({all[0], all[1]}, true, 41))
    EXPECT_TRUE(c.committed) << "the survivors go on";
}

TEST(MembershipState, ANewcomerJoinsAtTheNextStepBoundary) {
  Job job(2);
  std::vector<MemberId> all = {job.state.add("a"), job.state.add("b")};
  job.quorum(all, 0);
  MemberId late = job.state.add("late");
  job.state.ask_quorum(late, at(1));
  job.state.tick(at(50));
  EXPECT_FALSE(job.state.take_quorum(late).has_value()) << "a healthy generation is never cut short";
  for (const auto& c : job.vote(all, true, 51)) {
    EXPECT_TRUE(c.committed) << "the step in flight commits";
    EXPECT_TRUE(c.reconfigure) << "and the members are told to stop for a quorum";
  }
  auto q = job.quorum(all, 52);
  auto ql = job.state.take_quorum(late);
  ASSERT_TRUE(ql.has_value());
  EXPECT_EQ(ql->generation, 2u);
  EXPECT_EQ(ql->rank, 2);
  EXPECT_EQ(ql->world, 3);
  EXPECT_EQ(ql->committed_steps, 1u) << "the newcomer learns the step counter";
  EXPECT_EQ(ql->holders, 2) << "ranks 0 and 1 hold the state; rank 2 is new";
  EXPECT_TRUE(has(ql->change, "late joined")) << ql->change;
  EXPECT_TRUE(job.failed.empty()) << "no failure, no failed rendezvous";
}

// A newcomer whose catch-up failed (a holder died as it sent the state) holds only
// part of the state: it must not be counted a holder in the next generation, or it
// would keep a partial state and send it to others. It holds the state once a step
// of its generation commits (every member voted ok, so its catch-up finished).
TEST(MembershipState, ANewcomerHoldsTheStateOnlyOnceAStepOfItsGenerationCommits) {
  Job job(2);
  MemberId a = job.state.add("a"), b = job.state.add("b");
  job.quorum({a, b}, 0);
  MemberId late = job.state.add("late");
  job.state.ask_quorum(late, at(1));
  job.vote({a, b}, true, 2);
  job.quorum({a, b}, 3);
  ASSERT_EQ(job.state.take_quorum(late)->holders, 2);
  job.state.lose(b, false, at(4));  // b dies as it sends the state
  for (const auto& c : job.vote({a, late}, false, 5)) EXPECT_FALSE(c.committed);
  auto q = job.quorum({a, late}, 6);
  EXPECT_EQ(q[0].rank, 0);
  EXPECT_EQ(q[1].rank, 1);
  EXPECT_EQ(q[1].holders, 1) << "the newcomer's catch-up failed: it is still to be brought up to date";
  for (const auto& c : job.vote({a, late}, true, 7)) EXPECT_TRUE(c.committed);
  MemberId later = job.state.add("later");
  job.state.ask_quorum(later, at(8));
  job.vote({a, late}, true, 9);
  job.quorum({a, late}, 10);
  auto ql = job.state.take_quorum(later);
  ASSERT_TRUE(ql.has_value());
  EXPECT_EQ(ql->holders, 2) << "a committed step made the first newcomer a holder";
}

// Every holder lost while the only survivor is a newcomer that never caught up: the
// state starts again from the members' own, and the change says so.
TEST(MembershipState, NoHolderLeftStartsTheStateAgainFromTheMembersOwn) {
  Job job(1);
  MemberId a = job.state.add("a");
  job.quorum({a}, 0);
  MemberId late = job.state.add("late");
  job.state.ask_quorum(late, at(1));
  job.vote({a}, true, 2);
  job.quorum({a}, 3);
  job.state.take_quorum(late);
  job.state.lose(a, false, at(4));
  job.vote({late}, false, 5);
  auto q = job.quorum({late}, 6);
  EXPECT_EQ(q[0].holders, 1);
  EXPECT_TRUE(has(q[0].change, "no member holding the job's state is left")) << q[0].change;
}

TEST(MembershipState, AVoteMissingPastTheCommitTimeoutEndsTheGeneration) {
  Job job(2, 1.0, /*commit_timeout=*/5.0);
  std::vector<MemberId> all = {job.state.add("a"), job.state.add("slow")};
  job.quorum(all, 0);
  job.state.vote(all[0], 1, true, "", at(10));
  job.state.tick(at(14.9));
  EXPECT_FALSE(job.state.take_commit(all[0]).has_value());
  job.state.tick(at(15.0));
  auto c = job.state.take_commit(all[0]);
  ASSERT_TRUE(c.has_value());
  EXPECT_FALSE(c->committed);
  EXPECT_TRUE(has(c->reason, "rank 1 (slow) did not finish step 1 within 5 s")) << c->reason;
}

TEST(MembershipState, EveryMemberButOneDyingLeavesAGenerationOfOne) {
  Job job(3);
  std::vector<MemberId> all = {job.state.add("a"), job.state.add("b"), job.state.add("c")};
  job.quorum(all, 0);
  job.state.lose(all[0], false, at(1));
  job.state.lose(all[2], false, at(1));
  auto q = job.quorum({all[1]}, 1);
  EXPECT_EQ(q[0].world, 1);
  EXPECT_EQ(q[0].rank, 0);
  EXPECT_EQ(q[0].holders, 1);
  EXPECT_TRUE(has(q[0].change, "rank 0 (a) lost")) << q[0].change;
  EXPECT_TRUE(has(q[0].change, "rank 2 (c) lost")) << q[0].change;
  EXPECT_TRUE(job.vote({all[1]}, true, 2)[0].committed);
}

TEST(MembershipState, AMemberThatLeavesIsNamedAsLeavingNotLost) {
  Job job(2);
  std::vector<MemberId> all = {job.state.add("a"), job.state.add("b")};
  job.quorum(all, 0);
  job.state.lose(all[1], true, at(1));
  auto c = job.vote({all[0]}, true, 2);
  EXPECT_FALSE(c[0].committed);
  EXPECT_TRUE(has(c[0].reason, "rank 1 (b) left the job")) << c[0].reason;
}

TEST(MembershipState, AWaitThatGivesUpIsAnsweredWithATimeoutNamingWhatIsMissing) {
  Job job(3);
  MemberId a = job.state.add("a");
  job.state.ask_quorum(a, at(0));
  job.state.give_up_quorum(a);
  auto q = job.state.take_quorum(a);
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(q->status, gcommTimeout);
  EXPECT_TRUE(has(q->change, "needs 3 members (min_ranks); 1 asked")) << q->change;
}

}  // namespace
