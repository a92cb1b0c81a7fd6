#include "comm/shm/shm_segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <new>
#include <random>

#include "comm/net/tcp_socket.hpp"
#include "common/error.hpp"

namespace gradcomm::comm::shm {

namespace {

constexpr uint64_t kMagic = 0x32304D4853434721ull;  // "!GCSHM02" (02: sealed, with a nonce)
// Every ring together: two communicators of 4 ranks stay within 64 MiB.
constexpr size_t kRingBudget = size_t{32} << 20;
constexpr size_t kMinRingBytes = size_t{16} << 10;
// The seals every segment carries: its size is fixed for good.
constexpr int kSizeSeals = F_SEAL_SHRINK | F_SEAL_GROW;

struct Header {
  uint64_t magic;
  uint64_t job;
  uint32_t world;
  uint32_t reserved;
  uint64_t ring_bytes;
  uint64_t nonce;
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

[[noreturn]] void system_failed(const char* call, const std::string& what, int err) {
  const bool memory = err == ENOMEM || err == ENOSPC;
  fail(memory ? gcommOutOfMemory : gcommNotSupported, "shm transport: ", call, "(", what,
       ") failed: ", net::errno_text(err),
       memory ? " (no memory for the segment's rings)"
              : " (GRADCOMM_TRANSPORT=socket talks over TCP instead)");
}

// Why a rank could not open rank 0's segment, in words.
std::string open_failure(const std::string& address, int err) {
  if (err == ENOENT)
    return cat(
        "rank 0's segment (", address,
        ") is gone: rank 0's process ended, or it is in another PID namespace (a container of its own)");
  if (err == EACCES || err == EPERM)
    return cat("this process may not open rank 0's segment (", address, "): ", net::errno_text(err),
               " (the ranks run as different users, or rank 0 is not inspectable: the shm transport needs "
               "processes of one user on one host)");
  return cat("open(", address, ") failed: ", net::errno_text(err));
}

}  // namespace

size_t Segment::ring_bytes_for(int world) {
  if (world <= 1) return kMinRingBytes;  // a rank alone: no ring is ever used
  const size_t rings = static_cast<size_t>(world) * (world - 1);
  size_t bytes = size_t{4} << 20;
  while (bytes > kMinRingBytes && bytes * rings > kRingBudget) bytes /= 2;
  return bytes;
}

Segment::~Segment() {
  close_address();
  if (base_ != nullptr) ::munmap(base_, bytes_);
}

Segment::Segment(Segment&& o) noexcept
    : address_(std::move(o.address_)),
      fd_(o.fd_),
      nonce_(o.nonce_),
      base_(o.base_),
      bytes_(o.bytes_),
      world_(o.world_),
      ring_bytes_(o.ring_bytes_) {
  o.fd_ = -1;
  o.base_ = nullptr;
}

Segment& Segment::operator=(Segment&& o) noexcept {
  if (this != &o) {
    this->~Segment();
    new (this) Segment(std::move(o));
  }
  return *this;
}

void Segment::map(int fd, size_t bytes, const std::string& what) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) system_failed("mmap", what, errno);
  base_ = p;
  bytes_ = bytes;
}

Segment Segment::create(uint64_t job, int world) {
  Segment s;
  s.world_ = world;
  s.ring_bytes_ = ring_bytes_for(world);
  const size_t bytes = segment_bytes(world, s.ring_bytes_);
  s.fd_ = ::memfd_create("gradcomm-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (s.fd_ < 0) system_failed("memfd_create", "gradcomm-shm", errno);
  s.address_ = cat("/proc/", ::getpid(), "/fd/", s.fd_);
  // Reserve the pages now: memory too short for them fails here (and the
  // automatic choice falls back to TCP), not as a SIGBUS at a ring's first use.
  if (const int err = ::posix_fallocate(s.fd_, 0, static_cast<off_t>(bytes)); err != 0)
    system_failed("posix_fallocate", s.address_, err);
  if (::fcntl(s.fd_, F_ADD_SEALS, kSizeSeals | F_SEAL_SEAL) != 0)
    system_failed("fcntl(F_ADD_SEALS)", s.address_, errno);
  s.map(s.fd_, bytes, s.address_);
  std::random_device random;
  s.nonce_ = (uint64_t{random()} << 32) ^ random();
  // A fresh memory file reads as zeros: every atomic starts at 0. Construct them
  // in place all the same, then publish the header last.
  auto* base = static_cast<uint8_t*>(s.base_);
  for (int r = 0; r < world; ++r) new (base + rank_words_offset() + r * sizeof(RankWords)) RankWords();
  for (int r = 0; r < world * world; ++r)
    new (base + ring_words_offset(world) + r * sizeof(RingWords)) RingWords();
  auto* h = reinterpret_cast<Header*>(base);
  h->job = job;
  h->world = static_cast<uint32_t>(world);
  h->ring_bytes = s.ring_bytes_;
  h->nonce = s.nonce_;
  // The header's magic is published last (a release store: ThreadSanitizer knows
  // these builtins, not a fence beside a plain store).
  __atomic_store_n(&h->magic, kMagic, __ATOMIC_RELEASE);
  return s;
}

Segment Segment::open(const std::string& address, uint64_t nonce, uint64_t job, int world) {
  Segment s;
  s.address_ = address;
  s.world_ = world;
  s.ring_bytes_ = ring_bytes_for(world);
  const int fd = ::open(address.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) fail(gcommNotSupported, "shm transport: ", open_failure(address, errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  // Only a sealed file can be mapped without the risk of a SIGBUS.
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & kSizeSeals) != kSizeSeals)
    fail(gcommInvalidArgument, "shm transport: '", address,
         "' is not a gradcomm segment (its size is not sealed)");
  struct stat st {};
  if (::fstat(fd, &st) != 0) system_failed("fstat", address, errno);
  const size_t bytes = segment_bytes(world, s.ring_bytes_);
  if (static_cast<size_t>(st.st_size) != bytes)
    fail(gcommInvalidArgument, "shm transport: segment '", address, "' has ", st.st_size, " bytes, not the ",
         bytes, " of a ", world, "-rank job: ranks with different world sizes");
  s.map(fd, bytes, address);
  const auto* h = static_cast<const Header*>(s.base_);
  if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != kMagic)
    fail(gcommInvalidArgument, "shm transport: '", address, "' is not a gradcomm segment");
  if (h->job != job || h->nonce != nonce)
    fail(gcommInvalidArgument, "shm transport: segment '", address, "' belongs to another job");
  if (h->world != static_cast<uint32_t>(world) || h->ring_bytes != s.ring_bytes_)
    fail(gcommInvalidArgument, "shm transport: segment '", address, "' is for ", h->world, " ranks, not ",
         world);
  s.nonce_ = nonce;
  return s;
}

void Segment::close_address() noexcept {
  if (fd_ >= 0) (void)::close(fd_);
  fd_ = -1;
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
