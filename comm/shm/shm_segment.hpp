// The shared-memory segment of one shm-transport communicator: every rank of a job
// on one host maps it. It holds, per rank, a doorbell (a futex word a rank sleeps
// on and its peers ring after writing to it or reading from it), and, per ordered
// pair of ranks, a single-producer single-consumer byte ring: the pair's byte
// stream, as a TCP connection is the socket transport's.
//
// Rank 0 creates it (shm_open with O_EXCL, mode 0600, named from the job key and
// a random nonce that only the job's store carries), the others open it by that
// name and check its header (magic, job, world size), and once every rank has
// mapped it rank 0 unlinks the name: from then on nothing of it is left in
// /dev/shm, whatever happens to the ranks, and no other process can attach.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace gradcomm::comm::shm {

constexpr size_t kCacheLine = 64;

// One rank's words in the segment.
struct alignas(kCacheLine) RankWords {
  std::atomic<uint32_t> doorbell{0};  // bumped by a peer with news for this rank
  std::atomic<uint32_t> sleeping{0};  // 1 while this rank waits on the doorbell
  std::atomic<uint32_t> closed{0};    // 1 once the rank aborted, failed or left
  std::atomic<int32_t> pid{0};        // for telling a dead process from a slow one
  std::atomic<uint64_t> pid_ns{0};    // its pid namespace (0: unknown): pids compare only within one
};
static_assert(std::atomic<uint32_t>::is_always_lock_free && std::atomic<uint64_t>::is_always_lock_free,
              "the segment's words are shared between processes: lock-free atomics only");

// The counters of one ring; its data follows in the segment.
struct RingWords {
  alignas(kCacheLine) std::atomic<uint64_t> head{0};  // bytes ever written (the producer's)
  alignas(kCacheLine) std::atomic<uint64_t> tail{0};  // bytes ever read (the consumer's)
};

class Segment {
 public:
  Segment() = default;
  ~Segment();
  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&& other) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  // Rank 0: creates and maps a segment for `world` ranks; name() is what the
  // others open. Throws naming the call that failed: gcommOutOfMemory when
  // /dev/shm is full, gcommNotSupported when it cannot be used at all.
  static Segment create(const std::string& name, uint64_t job, int world);
  // The other ranks: opens and maps rank 0's segment, checking that it is this
  // job's and world size's (gcommInvalidArgument otherwise).
  static Segment open(const std::string& name, uint64_t job, int world);
  // Removes the name (rank 0, once every rank has mapped it). Idempotent.
  void unlink() noexcept;

  const std::string& name() const { return name_; }
  int world() const { return world_; }
  size_t ring_bytes() const { return ring_bytes_; }
  RankWords& rank_words(int r) const;
  RingWords& ring(int from, int to) const;
  uint8_t* ring_data(int from, int to) const;

  // The ring bytes for `world` ranks: a power of two, 16 KiB to 4 MiB, so that
  // every ring together stays within 32 MiB up to 45 ranks (the segment's pages
  // are reserved at creation).
  static size_t ring_bytes_for(int world);

 private:
  void map(int fd, size_t bytes);

  std::string name_;
  bool owner_ = false;  // rank 0: unlinks the name if nobody did
  void* base_ = nullptr;
  size_t bytes_ = 0;
  int world_ = 0;
  size_t ring_bytes_ = 0;
};

}  // namespace gradcomm::comm::shm
