// The rendezvous store's wire format. Every message is a frame:
//
//   offset  bytes  field
//   0       4      magic "GCRS"
//   4       1      wire version (1)
//   5       1      message type (MsgType)
//   6       2      reserved, 0
//   8       8      job-key tag: FNV-1a 64 of the job key (every frame carries it)
//   16      4      payload length (bounded: kMaxPayloadBytes, kMaxHelloBytes before
//                  the peer said hello)
//   20      ...    payload: fields in order; integers little-endian, strings and
//                  byte blobs as a u32 length then the bytes
//
// Payloads (-> request, <- reply; every request gets kOk or kError, except kBye):
//   kHello   -> str job_key, i32 rank, i32 world_size, str who,
//               u32 generation                                     <- kOk
//   kSet     -> str key, blob value                                <- kOk
//   kGet     -> str key, u32 timeout_ms                            <- kOk: blob value
//   kGather  -> str name, u32 timeout_ms, blob contribution       <- kOk: u32 n, n blobs (rank order)
//   kAbort   -> str reason                                         <- kOk
//   kBye     -> (empty); the peer closes next
// The membership server (comm/membership/, the gradcomm-store program) speaks the
// same frames with three more requests, a member's first being kJoinJob:
//   kJoinJob -> str job_key, str who, u32 min_ranks, u32 quorum_timeout_ms,
//               u32 commit_timeout_ms                             <- kOk: u32 member id
//   kQuorum  -> u32 timeout_ms          <- kOk: u32 generation, i32 rank, i32 world,
//               i32 holders, u32 rendezvous port, u64 committed steps, str members,
//               str change
//   kCommit  -> u32 generation, u32 ok, str why   <- kOk: u32 committed, u32 reconfigure,
//               u64 committed steps, str reason
//   kError   <- u32 status (gcommStatus_t), str message; gcommOutOfMemory, sent
//               to a connection before its hello is answered, means "the store
//               is full, try again" (StoreClient retries until its deadline);
//               gcommInvalidState there means "this store belongs to an earlier
//               communicator of the job (a lower generation), try again"
// The generation counts the communicators a rank made before on this store's
// address and job key (next_generation): a rank that closed a communicator and
// makes the next one cannot meet the earlier one's store, still shutting down.
// The job-key tag and the key in the hello guard against mix-ups (two jobs on one
// port, a stale process), not against attackers: nothing is authenticated or
// encrypted, as in torchrun's store.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gradcomm::comm::bootstrap {

constexpr uint32_t kWireMagic = 0x53524347u;  // the bytes "GCRS" read little-endian
constexpr uint8_t kWireVersion = 1;
constexpr size_t kHeaderBytes = 20;
constexpr size_t kMaxPayloadBytes = size_t(1) << 20;  // 1 MiB: any message
constexpr size_t kMaxHelloBytes = 4096;               // before the peer proved its job key
constexpr size_t kMaxNameBytes = 1024;                // job keys, store keys, barrier names

enum class MsgType : uint8_t {
  kHello = 1,
  kSet = 2,
  kGet = 3,
  kGather = 4,
  kAbort = 5,
  kBye = 6,
  kJoinJob = 7,
  kQuorum = 8,
  kCommit = 9,
  kOk = 64,
  kError = 65,
};
const char* msg_type_name(MsgType t) noexcept;  // "?" for an unknown value

uint64_t job_key_tag(const std::string& job_key) noexcept;

struct Header {
  MsgType type = MsgType::kOk;
  uint64_t tag = 0;
  uint32_t length = 0;
};

// Parses the first kHeaderBytes of `bytes`. Returns "" if the header is valid
// and its payload fits in `max_payload`, else what is wrong with it (for the log).
// The tag is not checked here (the server decides what a wrong key means).
std::string parse_header(const uint8_t* bytes, size_t max_payload, Header& out);

// Builds one frame.
class Writer {
 public:
  Writer& u32(uint32_t v);
  Writer& i32(int32_t v) { return u32(static_cast<uint32_t>(v)); }
  Writer& u64(uint64_t v);
  Writer& str(const std::string& s) { return blob(s.data(), s.size()); }
  Writer& blob(const void* data, size_t n);
  Writer& blob(const std::vector<uint8_t>& v) { return blob(v.data(), v.size()); }
  const std::vector<uint8_t>& payload() const { return payload_; }
  // The frame: header then payload. Throws gcommInvalidArgument if the payload
  // exceeds kMaxPayloadBytes.
  std::vector<uint8_t> frame(MsgType type, uint64_t tag) const;

 private:
  std::vector<uint8_t> payload_;
};

// Reads the fields of one payload. Any read past the end, a string longer than
// its bound, or bytes left over throw gcommRemoteError("malformed <what>: ...").
class Reader {
 public:
  Reader(const uint8_t* data, size_t n, const char* what) : p_(data), n_(n), what_(what) {}
  uint32_t u32();
  int32_t i32() { return static_cast<int32_t>(u32()); }
  uint64_t u64();
  std::string str(size_t max_bytes = kMaxNameBytes);
  std::vector<uint8_t> blob();
  void finish() const;  // every byte consumed

 private:
  void need(size_t bytes) const;
  const uint8_t* p_;
  size_t n_;
  const char* what_;
};

}  // namespace gradcomm::comm::bootstrap
