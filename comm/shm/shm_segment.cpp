#include "comm/shm/shm_segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <new>

#include "comm/net/tcp_socket.hpp"
#include "common/error.hpp"

namespace gradcomm::comm::shm {

namespace {

constexpr uint64_t kMagic = 0x31304D4853434721ull;  // "!GCSHM01"
// Every ring together: small enough for a container's default 64 MiB /dev/shm to
// hold two communicators of 4 ranks (a GAN's two models).
constexpr size_t kRingBudget = size_t{32} << 20;
constexpr size_t kMinRingBytes = size_t{16} << 10;

struct Header {
  uint64_t magic;
  uint64_t job;
  uint32_t world;
  uint32_t reserved;
  uint64_t ring_bytes;
};

size_t align_up(size_t v, size_t a) {
  return (v + a - 1) / a * a;
}

// The layout: header, the ranks' words, the rings' words, the rings' data.
size_t rank_words_offset() {
  return align_up(sizeof(Header), kCacheLine);
}
size_t ring_words_offset(int world) {
  return rank_words_offset() + static_cast<size_t>(world) * sizeof(RankWords);
}
size_t ring_data_offset(int world) {
  return align_up(ring_words_offset(world) + static_cast<size_t>(world) * world * sizeof(RingWords), 4096);
}
size_t segment_bytes(int world, size_t ring_bytes) {
  return ring_data_offset(world) + static_cast<size_t>(world) * world * ring_bytes;
}

[[noreturn]] void system_failed(const char* call, const std::string& name, int err) {
  fail(err == ENOMEM || err == ENOSPC ? gcommOutOfMemory : gcommNotSupported, "shm transport: ", call, "('",
       name, "') failed: ", net::errno_text(err),
       err == ENOMEM || err == ENOSPC
           ? " (/dev/shm is full)"
           : " (is /dev/shm mounted and shared by the ranks? GRADCOMM_TRANSPORT=socket "
             "talks over TCP instead)");
}

}  // namespace

size_t Segment::ring_bytes_for(int world) {
  const size_t rings = std::max<size_t>(1, static_cast<size_t>(world) * (world - 1));
  size_t bytes = size_t{4} << 20;
  while (bytes > kMinRingBytes && bytes * rings > kRingBudget) bytes /= 2;
  return bytes;
}

Segment::~Segment() {
  if (owner_) unlink();
  if (base_ != nullptr) ::munmap(base_, bytes_);
}

Segment::Segment(Segment&& o) noexcept
    : name_(std::move(o.name_)),
      owner_(o.owner_),
      base_(o.base_),
      bytes_(o.bytes_),
      world_(o.world_),
      ring_bytes_(o.ring_bytes_) {
  o.owner_ = false;
  o.base_ = nullptr;
}

Segment& Segment::operator=(Segment&& o) noexcept {
  if (this != &o) {
    this->~Segment();
    new (this) Segment(std::move(o));
  }
  return *this;
}

void Segment::map(int fd, size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  ::close(fd);
  if (p == MAP_FAILED) system_failed("mmap", name_, err);
  base_ = p;
  bytes_ = bytes;
}

Segment Segment::create(const std::string& name, uint64_t job, int world) {
  Segment s;
  s.name_ = name;
  s.world_ = world;
  s.ring_bytes_ = ring_bytes_for(world);
  const size_t bytes = segment_bytes(world, s.ring_bytes_);
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) system_failed("shm_open", name, errno);
  s.owner_ = true;  // from here on the name goes with s
  // Reserve the pages now: a /dev/shm too full for them fails here (ENOSPC, and
  // the automatic choice falls back to TCP), not as a SIGBUS at a ring's first use.
  if (const int err = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)); err != 0) {
    ::close(fd);
    system_failed("posix_fallocate", name, err);
  }
  s.map(fd, bytes);
  // A fresh tmpfs file reads as zeros: every atomic starts at 0. Construct them
  // in place all the same, then publish the header last.
  auto* base = static_cast<uint8_t*>(s.base_);
  for (int r = 0; r < world; ++r) new (base + rank_words_offset() + r * sizeof(RankWords)) RankWords();
  for (int r = 0; r < world * world; ++r)
    new (base + ring_words_offset(world) + r * sizeof(RingWords)) RingWords();
  auto* h = reinterpret_cast<Header*>(base);
  h->job = job;
  h->world = static_cast<uint32_t>(world);
  h->ring_bytes = s.ring_bytes_;
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kMagic;
  return s;
}

Segment Segment::open(const std::string& name, uint64_t job, int world) {
  Segment s;
  s.name_ = name;
  s.world_ = world;
  s.ring_bytes_ = ring_bytes_for(world);
  const int fd = ::shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) system_failed("shm_open", name, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    system_failed("fstat", name, err);
  }
  const size_t bytes = segment_bytes(world, s.ring_bytes_);
  if (static_cast<size_t>(st.st_size) != bytes) {
    ::close(fd);
    fail(gcommInvalidArgument, "shm transport: segment '", name, "' has ", st.st_size, " bytes, not the ",
         bytes, " of a ", world, "-rank job: ranks with different world sizes");
  }
  s.map(fd, bytes);
  const auto* h = static_cast<const Header*>(s.base_);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (h->magic != kMagic) fail(gcommInvalidArgument, "shm transport: '", name, "' is not a gradcomm segment");
  if (h->job != job) fail(gcommInvalidArgument, "shm transport: segment '", name, "' belongs to another job");
  if (h->world != static_cast<uint32_t>(world) || h->ring_bytes != s.ring_bytes_)
    fail(gcommInvalidArgument, "shm transport: segment '", name, "' is for ", h->world, " ranks, not ",
         world);
  return s;
}

void Segment::unlink() noexcept {
  if (owner_ && !name_.empty()) (void)::shm_unlink(name_.c_str());
  owner_ = false;
}

RankWords& Segment::rank_words(int r) const {
  return *reinterpret_cast<RankWords*>(static_cast<uint8_t*>(base_) + rank_words_offset() +
                                       r * sizeof(RankWords));
}

RingWords& Segment::ring(int from, int to) const {
  return *reinterpret_cast<RingWords*>(static_cast<uint8_t*>(base_) + ring_words_offset(world_) +
                                       (static_cast<size_t>(from) * world_ + to) * sizeof(RingWords));
}

uint8_t* Segment::ring_data(int from, int to) const {
  return static_cast<uint8_t*>(base_) + ring_data_offset(world_) +
         (static_cast<size_t>(from) * world_ + to) * ring_bytes_;
}

}  // namespace gradcomm::comm::shm
