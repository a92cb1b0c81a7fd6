// The shared-memory segment of one shm-transport communicator: every rank of a job
// on one host maps it. It holds, per rank, a doorbell (a futex word a rank sleeps
// on and its peers ring after writing to it or reading from it), and, per ordered
// pair of ranks, a single-producer single-consumer byte ring: the pair's byte
// stream, as a TCP connection is the socket transport's.
//
// Rank 0 creates it as an anonymous memory file (memfd_create), never a name in
// /dev/shm, and seals its size (F_SEAL_SHRINK | F_SEAL_GROW): no process can cut
// it short under a mapping (which would kill the ranks with SIGBUS) or grow it.
// The others open it through rank 0's descriptor, /proc/<pid>/fd/<n> (which only
// processes of the same user, allowed to inspect rank 0, can open), check its
// seals and header (magic, job, world size, and a random nonce that only the
// job's store carries), and once every rank has mapped it rank 0 closes that
// descriptor: from then on no other process can attach, and the memory goes with
// the last rank's mapping whatever happens to the ranks. Nothing of it is ever
// left behind, not even when rank 0 is killed while the others attach (issue 44 #5).
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

  // Rank 0: creates, seals and maps a segment for `world` ranks; address() and
  // nonce() are what the others open. Throws naming the call that failed:
  // gcommOutOfMemory when the memory cannot be had, gcommNotSupported when
  // anonymous sealed files are not available (a kernel before 3.17).
  static Segment create(uint64_t job, int world);
  // The other ranks: opens and maps rank 0's segment, checking that it is sealed
  // and this job's, nonce's and world size's (gcommInvalidArgument otherwise;
  // gcommNotSupported when it cannot be opened at all: rank 0 gone, another user,
  // another PID namespace).
  static Segment open(const std::string& address, uint64_t nonce, uint64_t job, int world);
  // Closes the descriptor address() names (rank 0, once every rank has mapped
  // it): no process can open the segment from then on. Idempotent.
  void close_address() noexcept;

  // "/proc/<pid>/fd/<n>" (rank 0's, while its descriptor is open).
  const std::string& address() const { return address_; }
  uint64_t nonce() const { return nonce_; }
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
  void map(int fd, size_t bytes, const std::string& what);

  std::string address_;
  int fd_ = -1;  // rank 0: the descriptor address() names, until close_address()
  uint64_t nonce_ = 0;
  void* base_ = nullptr;
  size_t bytes_ = 0;
  int world_ = 0;
  size_t ring_bytes_ = 0;
};

}  // namespace gradcomm::comm::shm
