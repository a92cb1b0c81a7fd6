// What the membership server knows of one fault-tolerant job: its members, the
// current generation (the live set, in rank order) and the votes of the step in
// flight. No sockets and no clock reads here: the server (membership_server.cpp)
// feeds it requests and the time, and reads the outcomes, so every rule is
// testable alone (tests/comm/membership/membership_state_test.cpp).
//
// Rules (docs/fault-tolerance.md):
//  - A generation is a numbered live set. The first forms once min_ranks members
//    ask for a quorum. A later one forms when every live member of the last
//    generation asks (they do at a step boundary, after a failed step or when
//    told that someone waits to join), together with every newcomer asking; a
//    member of the last generation that has not asked quorum_timeout after the
//    first one did is excluded (a frozen or partitioned rank). Survivors that hold
//    the job's state keep their relative order (the oldest is rank 0); the others
//    follow: survivors whose catch-up never finished (no step of their generation
//    committed), then newcomers. Ranks 0..holders-1 send the state to the rest.
//  - An excluded member, or one whose generation is over, is refused (it can
//    never vote in a later generation): it must leave and join as a new member.
//  - A step commits when every member of the generation votes ok; one vote that
//    is not ok, a member lost (its connection closed) or leaving, a member asking
//    for a new quorum, or a vote missing commit_timeout after the first, ends the
//    generation: every member's answer for that step is "not committed". Every
//    member gets the same answer, so a step is applied everywhere or nowhere.
//  - A member's connection that closes without a goodbye is a lost member (a
//    kill is seen at once); a goodbye is a member that left.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/deadline.hpp"
#include "gradcomm/types.h"

namespace gradcomm::comm::membership {

using MemberId = uint32_t;

struct JobSettings {
  int min_ranks = 1;
  double quorum_timeout_s = 1.0;
  double commit_timeout_s = 300.0;
};

// The answer to a quorum request: this member's place in the new generation.
struct QuorumOutcome {
  gcommStatus_t status = gcommSuccess;  // anything else: `change` says why
  uint32_t generation = 0;
  int rank = -1;
  int world = 0;
  int holders = 0;          // ranks 0..holders-1 hold the job's state; the rest are newcomers
  int rendezvous_port = 0;  // where this generation's communicator meets
  uint64_t committed_steps = 0;
  std::string members;  // "rank 0: name, rank 1: name"
  std::string change;   // who left or joined since the last generation, and why
};

// The answer to a vote.
struct CommitOutcome {
  gcommStatus_t status = gcommSuccess;  // anything else: refused, `reason` says why
  bool committed = false;
  bool reconfigure = false;  // the next step needs a new quorum (someone left or waits to join)
  uint64_t committed_steps = 0;
  std::string reason;
};

// What the state needs from the server: a rendezvous store for a new
// generation's communicator (returns its port), and failing one whose member was
// lost (so that the others' init fails at once instead of at its timeout).
struct RendezvousHooks {
  std::function<int(uint32_t generation, int world)> open;
  std::function<void(uint32_t generation, const std::string& why)> fail;
};

class MembershipState {
 public:
  MembershipState(std::string job_key, JobSettings settings, RendezvousHooks hooks);

  const JobSettings& settings() const { return settings_; }
  // A new member. Its id is never reused.
  MemberId add(const std::string& who);
  // Its connection closed: `graceful` after a goodbye.
  void lose(MemberId id, bool graceful, Deadline now);

  void ask_quorum(MemberId id, Deadline now);
  void vote(MemberId id, uint32_t generation, bool ok, const std::string& why, Deadline now);
  // Applies the timeouts that passed by `now`.
  void tick(Deadline now);
  // A member that asked a quorum and waited until `now` without one forming is
  // answered with gcommTimeout (the server calls this at the member's own deadline).
  void give_up_quorum(MemberId id);

  // Outcomes, once decided (taking one clears it).
  std::optional<QuorumOutcome> take_quorum(MemberId id);
  std::optional<CommitOutcome> take_commit(MemberId id);

  uint32_t generation() const { return generation_; }
  bool anyone_alive() const {
    for (const auto& [id, m] : members_)
      if (m.alive) return true;
    return false;
  }
  bool generation_over() const { return over_; }
  uint64_t committed_steps() const { return committed_steps_; }
  // Every message of the membership's changes, in order, for the server's log.
  std::vector<std::string> take_log();

 private:
  struct Member {
    std::string who;
    bool alive = true;
    uint32_t generation = 0;  // the last generation it belonged to (0: none yet)
    bool asking = false;
    Deadline asked_at{};
    bool voted = false;
    bool vote_ok = false;
    std::string excluded;  // why it was excluded ("" while it may take part)
    // It holds the job's state: a member of the first generation (its own), or of a
    // generation in which a step committed (so its catch-up, if it was new, finished).
    bool holds_state = false;
    std::optional<QuorumOutcome> quorum;
    std::optional<CommitOutcome> commit;
  };

  bool in_generation(const Member& m) const {
    return m.alive && m.excluded.empty() && m.generation == generation_ && generation_ > 0;
  }
  std::string name(MemberId id) const;  // "rank 2 (host:pid)" or "host:pid"
  void end_generation(const std::string& why);
  void try_form(Deadline now);
  void form(const std::vector<MemberId>& members);
  void decide_votes();
  bool joiner_waiting() const;

  const std::string job_key_;
  const JobSettings settings_;
  RendezvousHooks hooks_;
  std::map<MemberId, Member> members_;
  MemberId next_id_ = 1;
  uint32_t generation_ = 0;
  std::vector<MemberId> roster_;  // the generation's members, in rank order
  bool over_ = false;             // the generation ended (a new quorum is needed)
  std::string over_why_;
  std::vector<std::string> left_since_;  // who left since the generation formed, and why
  uint64_t committed_steps_ = 0;
  Deadline first_vote_ = Deadline::max();
  std::vector<std::string> log_;
};

}  // namespace gradcomm::comm::membership
