#include "comm/bootstrap/store_protocol.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace gradcomm::comm::bootstrap {

namespace {

void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void put_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t get_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}
uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

bool known_type(uint8_t t) {
  return (t >= static_cast<uint8_t>(MsgType::kHello) && t <= static_cast<uint8_t>(MsgType::kCommit)) ||
         t == static_cast<uint8_t>(MsgType::kOk) || t == static_cast<uint8_t>(MsgType::kError);
}

}  // namespace

const char* msg_type_name(MsgType t) noexcept {
  switch (t) {
    case MsgType::kHello:
      return "hello";
    case MsgType::kSet:
      return "set";
    case MsgType::kGet:
      return "get";
    case MsgType::kGather:
      return "gather";
    case MsgType::kAbort:
      return "abort";
    case MsgType::kBye:
      return "bye";
    case MsgType::kJoinJob:
      return "join-job";
    case MsgType::kQuorum:
      return "quorum";
    case MsgType::kCommit:
      return "commit";
    case MsgType::kOk:
      return "ok";
    case MsgType::kError:
      return "error";
  }
  return "?";
}

uint64_t job_key_tag(const std::string& job_key) noexcept {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : job_key) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string parse_header(const uint8_t* bytes, size_t max_payload, Header& out) {
  uint32_t magic = get_u32(bytes);
  if (magic != kWireMagic) return cat("not a gradcomm store message (magic 0x", std::hex, magic, ")");
  if (bytes[4] != kWireVersion)
    return cat("wire version ", static_cast<int>(bytes[4]), " (this gradcomm speaks ",
               static_cast<int>(kWireVersion), ")");
  if (!known_type(bytes[5])) return cat("unknown message type ", static_cast<int>(bytes[5]));
  if (bytes[6] != 0 || bytes[7] != 0) return "reserved header bytes are not zero";
  out.type = static_cast<MsgType>(bytes[5]);
  out.tag = get_u64(bytes + 8);
  out.length = get_u32(bytes + 16);
  if (out.length > max_payload)
    return cat(msg_type_name(out.type), " message of ", out.length, " bytes exceeds the limit of ",
               max_payload, " bytes");
  return "";
}

Writer& Writer::u32(uint32_t v) {
  uint8_t b[4];
  put_u32(b, v);
  payload_.insert(payload_.end(), b, b + 4);
  return *this;
}

Writer& Writer::u64(uint64_t v) {
  uint8_t b[8];
  put_u64(b, v);
  payload_.insert(payload_.end(), b, b + 8);
  return *this;
}

Writer& Writer::blob(const void* data, size_t n) {
  require(n <= kMaxPayloadBytes, "a store value of ", n, " bytes exceeds the limit of ", kMaxPayloadBytes,
          " bytes");
  u32(static_cast<uint32_t>(n));
  const uint8_t* p = static_cast<const uint8_t*>(data);
  payload_.insert(payload_.end(), p, p + n);
  return *this;
}

std::vector<uint8_t> Writer::frame(MsgType type, uint64_t tag) const {
  require(payload_.size() <= kMaxPayloadBytes, "a store message of ", payload_.size(),
          " bytes exceeds the limit of ", kMaxPayloadBytes, " bytes");
  std::vector<uint8_t> f(kHeaderBytes + payload_.size());
  put_u32(f.data(), kWireMagic);
  f[4] = kWireVersion;
  f[5] = static_cast<uint8_t>(type);
  f[6] = f[7] = 0;
  put_u64(f.data() + 8, tag);
  put_u32(f.data() + 16, static_cast<uint32_t>(payload_.size()));
  std::copy(payload_.begin(), payload_.end(), f.begin() + kHeaderBytes);
  return f;
}

void Reader::need(size_t bytes) const {
  if (bytes > n_) fail(gcommRemoteError, "malformed ", what_, ": it ends ", bytes - n_, " bytes too early");
}

uint32_t Reader::u32() {
  need(4);
  uint32_t v = get_u32(p_);
  p_ += 4;
  n_ -= 4;
  return v;
}

uint64_t Reader::u64() {
  need(8);
  uint64_t v = get_u64(p_);
  p_ += 8;
  n_ -= 8;
  return v;
}

std::string Reader::str(size_t max_bytes) {
  uint32_t len = u32();
  if (len > max_bytes)
    fail(gcommRemoteError, "malformed ", what_, ": a name of ", len, " bytes (limit ", max_bytes, ")");
  need(len);
  std::string s(reinterpret_cast<const char*>(p_), len);
  p_ += len;
  n_ -= len;
  return s;
}

std::vector<uint8_t> Reader::blob() {
  uint32_t len = u32();
  need(len);
  std::vector<uint8_t> v(p_, p_ + len);
  p_ += len;
  n_ -= len;
  return v;
}

void Reader::finish() const {
  if (n_ != 0) fail(gcommRemoteError, "malformed ", what_, ": ", n_, " unexpected bytes at the end");
}

}  // namespace gradcomm::comm::bootstrap
