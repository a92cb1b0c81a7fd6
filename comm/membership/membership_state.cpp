#include "comm/membership/membership_state.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace gradcomm::comm::membership {

namespace {

std::string seconds(double s) {
  return cat(s, " s");
}

std::string joined(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : sep) + p;
  return out;
}

}  // namespace

MembershipState::MembershipState(std::string job_key, JobSettings settings, RendezvousHooks hooks)
    : job_key_(std::move(job_key)), settings_(settings), hooks_(std::move(hooks)) {}

MemberId MembershipState::add(const std::string& who) {
  MemberId id = next_id_++;
  members_[id].who = who;
  return id;
}

std::string MembershipState::name(MemberId id) const {
  auto it = members_.find(id);
  if (it == members_.end()) return cat("member ", id);
  const Member& m = it->second;
  if (generation_ > 0 && m.generation == generation_) {
    auto pos = std::find(roster_.begin(), roster_.end(), id);
    if (pos != roster_.end()) return cat("rank ", pos - roster_.begin(), " (", m.who, ")");
  }
  return m.who;
}

void MembershipState::lose(MemberId id, bool graceful, Deadline now) {
  auto it = members_.find(id);
  if (it == members_.end() || !it->second.alive) return;
  Member& m = it->second;
  const bool was_member = in_generation(m);
  const std::string who = name(id);
  const std::string why =
      graceful ? "left the job" : "lost its connection to the store: did its process die?";
  m.alive = false;
  m.asking = false;
  m.voted = false;
  if (was_member) {
    left_since_.push_back(cat(who, " ", why));
    if (!over_) {
      end_generation(cat(who, " ", why));
      if (hooks_.fail) hooks_.fail(generation_, cat(who, " ", why));
    }
  } else {
    log_.push_back(cat(who, " ", why));
  }
  try_form(now);
}

void MembershipState::ask_quorum(MemberId id, Deadline now) {
  Member& m = members_.at(id);
  if (!m.excluded.empty()) {
    QuorumOutcome refused;
    refused.status = gcommInvalidState;
    refused.change = m.excluded;
    m.quorum = refused;
    return;
  }
  if (in_generation(m) && !over_)
    end_generation(joiner_waiting() ? "a new member waits to join"
                                    : cat(name(id), " asked for a new quorum"));
  m.asking = true;
  m.asked_at = now;
  try_form(now);
}

void MembershipState::vote(MemberId id, uint32_t generation, bool ok, const std::string& why, Deadline now) {
  Member& m = members_.at(id);
  CommitOutcome out;
  out.committed_steps = committed_steps_;
  if (!m.excluded.empty()) {
    out.status = gcommInvalidState;
    out.reason = m.excluded;
    m.commit = out;
    return;
  }
  if (generation == 0 || generation != generation_ || m.generation != generation_) {
    out.status = gcommInvalidState;
    out.reason = generation_ == 0 ? std::string("no generation has formed yet: ask for a quorum first")
                                  : cat("a vote for generation ", generation,
                                        " while the job is at generation ", generation_, " and this member ",
                                        m.generation == generation_ ? "belongs to it" : "does not");
    m.commit = out;
    return;
  }
  if (over_) {
    out.reconfigure = true;
    out.reason = over_why_;
    m.commit = out;
    return;
  }
  m.voted = true;
  m.vote_ok = ok;
  first_vote_ = std::min(first_vote_, now);
  if (!ok)
    end_generation(cat(name(id), " could not finish step ", committed_steps_ + 1, ": ", why));
  else
    decide_votes();
}

void MembershipState::decide_votes() {
  for (MemberId id : roster_) {
    const Member& m = members_.at(id);
    if (!in_generation(m) || !m.voted) return;
  }
  ++committed_steps_;
  const bool reconfigure = joiner_waiting();
  for (MemberId id : roster_) {
    Member& m = members_.at(id);
    m.holds_state = true;  // every member finished the step, a newcomer's catch-up included
    CommitOutcome out;
    out.committed = true;
    out.reconfigure = reconfigure;
    out.committed_steps = committed_steps_;
    if (reconfigure) out.reason = "a new member waits to join";
    m.commit = out;
    m.voted = false;
  }
  first_vote_ = Deadline::max();
}

void MembershipState::end_generation(const std::string& why) {
  if (over_ || generation_ == 0) return;
  over_ = true;
  over_why_ = why;
  log_.push_back(cat("generation ", generation_, " ends: ", why));
  for (MemberId id : roster_) {
    Member& m = members_.at(id);
    if (!m.voted) continue;
    CommitOutcome out;
    out.reconfigure = true;
    out.committed_steps = committed_steps_;
    out.reason = why;
    m.commit = out;
    m.voted = false;
  }
  first_vote_ = Deadline::max();
}

bool MembershipState::joiner_waiting() const {
  for (const auto& [id, m] : members_)
    if (m.alive && m.excluded.empty() && m.asking && !in_generation(m)) return true;
  return false;
}

void MembershipState::tick(Deadline now) {
  if (!over_ && first_vote_ != Deadline::max() &&
      now >= deadline_after(settings_.commit_timeout_s, first_vote_)) {
    std::vector<std::string> late;
    for (MemberId id : roster_)
      if (in_generation(members_.at(id)) && !members_.at(id).voted) late.push_back(name(id));
    end_generation(cat(joined(late, ", "), " did not finish step ", committed_steps_ + 1, " within ",
                       seconds(settings_.commit_timeout_s), " of the first vote (the commit timeout)"));
  }
  try_form(now);
}

void MembershipState::give_up_quorum(MemberId id) {
  Member& m = members_.at(id);
  if (!m.asking || m.quorum) return;
  m.asking = false;
  size_t asking = 0;
  for (const auto& [other, o] : members_) asking += o.alive && o.asking ? 1 : 0;
  QuorumOutcome out;
  out.status = gcommTimeout;
  out.change = generation_ == 0 ? cat("the first generation needs ", settings_.min_ranks,
                                      " members (min_ranks); ", asking + 1, " asked")
                                : cat("the job's generation ", generation_,
                                      over_ ? " ended but its members did not ask for the next"
                                            : " goes on and its members did not stop for a new quorum");
  m.quorum = out;
}

void MembershipState::try_form(Deadline now) {
  std::vector<MemberId> asking, expected;
  for (const auto& [id, m] : members_) {
    if (!m.alive || !m.excluded.empty()) continue;
    if (m.asking) asking.push_back(id);
    if (in_generation(m)) expected.push_back(id);
  }
  if (asking.empty()) return;
  if (expected.empty()) {  // the first generation, or every member of the last one is gone
    if (generation_ == 0 && asking.size() < static_cast<size_t>(settings_.min_ranks)) return;
    return form(asking);
  }
  if (!over_) return;  // a healthy generation: newcomers wait for its next step boundary
  Deadline first = Deadline::max();
  std::vector<MemberId> silent;
  for (MemberId id : expected) {
    const Member& m = members_.at(id);
    if (m.asking)
      first = std::min(first, m.asked_at);
    else
      silent.push_back(id);
  }
  if (silent.empty()) return form(asking);
  if (first == Deadline::max()) return;  // only newcomers ask: the members have not stopped yet
  if (now < deadline_after(settings_.quorum_timeout_s, first)) return;
  for (MemberId id : silent) {
    const std::string who = name(id);
    Member& m = members_.at(id);
    m.excluded = cat(who, " was excluded from the job at generation ", generation_ + 1,
                     ": it did not ask for the new quorum within ", seconds(settings_.quorum_timeout_s),
                     " of the first member that did (a frozen or partitioned process); it cannot take part "
                     "in a later step: restart it to join as a new member");
    left_since_.push_back(cat(who, " was excluded (it did not ask for the quorum within ",
                              seconds(settings_.quorum_timeout_s), ")"));
  }
  form(asking);
}

void MembershipState::form(const std::vector<MemberId>& asking) {
  // Survivors holding the state in their old rank order, then survivors whose
  // catch-up never finished, then newcomers by age.
  std::vector<MemberId> order;
  for (bool holding : {true, false})
    for (MemberId id : roster_)
      if (members_.at(id).holds_state == holding &&
          std::find(asking.begin(), asking.end(), id) != asking.end())
        order.push_back(id);
  std::vector<std::string> newcomers;
  for (MemberId id : asking)
    if (std::find(order.begin(), order.end(), id) == order.end()) {
      order.push_back(id);
      newcomers.push_back(members_.at(id).who);
    }
  const uint32_t next = generation_ + 1;
  const int world = static_cast<int>(order.size());
  int port = 0;
  try {
    port = hooks_.open ? hooks_.open(next, world) : 0;
  } catch (const std::exception& e) {
    for (MemberId id : asking) {
      Member& m = members_.at(id);
      QuorumOutcome failed;
      failed.status = gcommInternalError;
      failed.change = cat("the store could not open generation ", next, "'s rendezvous: ", e.what());
      m.quorum = failed;
      m.asking = false;
    }
    return;
  }
  // Who holds the job's state: the survivors of the last generation that hold it. In
  // the first generation, or when none is left, every member starts from its own
  // (the user's initial state or checkpoint).
  size_t survivors = 0;
  for (MemberId id : order)
    if (members_.at(id).holds_state) ++survivors;
  const int holders = survivors == 0 ? static_cast<int>(order.size()) : static_cast<int>(survivors);
  std::string change = generation_ == 0 ? std::string("the first generation") : joined(left_since_, "; ");
  if (generation_ > 0 && survivors == 0)
    change +=
        cat(change.empty() ? "" : "; ", "no member holding the job's state is left (generation ", generation_,
            "'s are gone, or never finished catching up): the state starts again from the "
            "members' own");
  if (survivors == 0)
    for (MemberId id : order) members_.at(id).holds_state = true;
  if (!newcomers.empty()) change += cat(change.empty() ? "" : "; ", joined(newcomers, ", "), " joined");
  generation_ = next;
  roster_ = order;
  over_ = false;
  over_why_.clear();
  left_since_.clear();
  first_vote_ = Deadline::max();
  std::string members;
  for (size_t r = 0; r < order.size(); ++r)
    members += cat(r == 0 ? "" : ", ", "rank ", r, ": ", members_.at(order[r]).who);
  log_.push_back(cat("generation ", generation_, " formed with ", world, world == 1 ? " rank" : " ranks",
                     " (", members, "): ", change));
  for (size_t r = 0; r < order.size(); ++r) {
    Member& m = members_.at(order[r]);
    m.generation = generation_;
    m.asking = false;
    m.voted = false;
    QuorumOutcome out;
    out.generation = generation_;
    out.rank = static_cast<int>(r);
    out.world = world;
    out.holders = holders;
    out.rendezvous_port = port;
    out.committed_steps = committed_steps_;
    out.members = members;
    out.change = change;
    m.quorum = out;
  }
}

std::optional<QuorumOutcome> MembershipState::take_quorum(MemberId id) {
  auto it = members_.find(id);
  if (it == members_.end()) return std::nullopt;
  std::optional<QuorumOutcome> out;
  out.swap(it->second.quorum);
  return out;
}

std::optional<CommitOutcome> MembershipState::take_commit(MemberId id) {
  auto it = members_.find(id);
  if (it == members_.end()) return std::nullopt;
  std::optional<CommitOutcome> out;
  out.swap(it->second.commit);
  return out;
}

std::vector<std::string> MembershipState::take_log() {
  std::vector<std::string> out;
  out.swap(log_);
  return out;
}

}  // namespace gradcomm::comm::membership
