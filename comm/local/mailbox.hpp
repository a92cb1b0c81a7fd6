// Sends and receives between the local transport's ranks (threads of one
// process): a mailbox per ordered pair of ranks, first in, first out, so the
// k-th send from rank r to rank q meets q's k-th receive from r.
//
// A send posts a letter (the sender's buffer, its count and dtype; on a GPU, an
// event its stream records there) and the receiver copies straight out of the
// sender's buffer: host, memcpy; GPU, a device-to-device copy on the receiver's
// stream after the sender's event, whose own event the sender's stream then
// waits for, so neither stream runs ahead of the copy. A batch (one call, or a
// group's calls: comm/p2p_group.hpp) posts all its sends first, then takes its
// receives as their letters come (each peer's in order), then waits until its
// letters were taken: posting never waits, and no receive waits for another
// peer's, so the calls of a group cannot wait for each other.
//
// A receive whose count or dtype differs from the letter's refuses it: both
// ranks get gcommInvalidArgument naming both calls, the rest of both batches
// still runs, and the communicators stay usable (in a group too: comm/p2p_group.hpp). A send or receive not
// matched within the timeout fails the group as a collective's timeout does.
#pragma once

#include <memory>
#include <vector>

#include "comm/local/rendezvous.hpp"
#include "gradcomm/types.h"

namespace gradcomm::comm {

class Mailbox {
 public:
  Mailbox(Rendezvous& rv, gcommDevice_t device);
  ~Mailbox();
  Mailbox(const Mailbox&) = delete;
  Mailbox& operator=(const Mailbox&) = delete;

  // Rank `rank`'s sends and receives, in call order (`grouped`: a group's, for
  // messages). Host: complete on return. GPU: the copies are enqueued on the calls' streams.
  void run_batch(int rank, const std::vector<CollectiveArgs>& calls, bool grouped);

 private:
  struct Letter;
  using Channel = std::vector<std::shared_ptr<Letter>>;  // oldest first
  Channel& channel(int from, int to) { return channels_[static_cast<size_t>(from) * rv_.size() + to]; }
  std::shared_ptr<Letter> post(int rank, const CollectiveArgs& send);
  // Every receive of the batch: whenever a peer with a receive pending has a
  // letter waiting, its oldest pending receive takes it, so no receive waits on
  // another's peer. Returns the first refusal ("" if every count and dtype matched).
  std::string receive_all(int rank, const std::vector<const CollectiveArgs*>& recvs, Deadline deadline,
                          bool grouped);
  void copy(int rank, const CollectiveArgs& recv, Letter& letter);
  // Waits until `letter` was taken or refused; returns the refusal ("" if taken);
  // throws gcommRemoteError when the receiver's copy failed.
  std::string wait_taken(int rank, const CollectiveArgs& send, Letter& letter, Deadline deadline,
                         bool grouped);
  // After a failure part way: letters not yet taken are withdrawn, and copies
  // in progress out of this rank's buffers are waited for.
  void withdraw(const std::vector<std::shared_ptr<Letter>>& posted) noexcept;
  [[noreturn]] void time_out(int rank, const CollectiveArgs& call, const char* what_peer_did, bool grouped);

  Rendezvous& rv_;
  gcommDevice_t device_;
  std::vector<Channel> channels_;  // [from * size + to], guarded by rv_.lock()
};

}  // namespace gradcomm::comm
