#include "comm/membership/frame_io.hpp"

#include <poll.h>

#include "common/error.hpp"

namespace gradcomm::comm::membership {

using namespace net;

std::string read_frame(const Socket& s, Deadline deadline, size_t max_payload, Frame& out, bool& closed) {
  closed = false;
  uint8_t head[bootstrap::kHeaderBytes];
  std::string error;
  IoResult r = recv_exact(s, head, sizeof(head), deadline, error);
  if (r == IoResult::kOk) {
    std::string bad = bootstrap::parse_header(head, max_payload, out.header);
    if (!bad.empty()) return bad;
    out.payload.resize(out.header.length);
    r = recv_exact(s, out.payload.data(), out.payload.size(), deadline, error);
  }
  if (r == IoResult::kOk) return "";
  closed = r == IoResult::kClosed;
  return r == IoResult::kTimeout ? cat("no message within the wait (", error, ")") : error;
}

std::string write_frame(const Socket& s, const std::vector<uint8_t>& frame, Deadline deadline) {
  std::string error;
  return send_all(s, frame.data(), frame.size(), deadline, error) == IoResult::kOk ? std::string() : error;
}

bool peer_hung_up(const Socket& s) {
  pollfd p{s.fd(), static_cast<short>(POLLRDHUP), 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

std::vector<uint8_t> error_frame(gcommStatus_t status, const std::string& message, uint64_t tag) {
  return bootstrap::Writer()
      .u32(static_cast<uint32_t>(status))
      .str(message.substr(0, bootstrap::kMaxPayloadBytes / 2))
      .frame(bootstrap::MsgType::kError, tag);
}

}  // namespace gradcomm::comm::membership
