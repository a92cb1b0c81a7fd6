// One store frame (comm/bootstrap/store_protocol.hpp) over a blocking exchange
// on a non-blocking socket, bounded by a deadline: what the membership server's
// connection threads and the members' client share.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/bootstrap/store_protocol.hpp"
#include "comm/net/tcp_socket.hpp"
#include "gradcomm/types.h"

namespace gradcomm::comm::membership {

struct Frame {
  bootstrap::Header header;
  std::vector<uint8_t> payload;
};

// Reads one frame whose payload fits `max_payload`. Returns "" or what went wrong
// ("the peer closed the connection", "no reply within ...", a malformed header);
// `closed` says whether the peer closed or reset the connection.
std::string read_frame(const net::Socket& s, Deadline deadline, size_t max_payload, Frame& out, bool& closed);
// Sends one frame; "" or what went wrong.
std::string write_frame(const net::Socket& s, const std::vector<uint8_t>& frame, Deadline deadline);

// Whether the peer closed its end (or the connection broke), without blocking.
bool peer_hung_up(const net::Socket& s);

// An error reply: kError with a status and a message.
std::vector<uint8_t> error_frame(gcommStatus_t status, const std::string& message, uint64_t tag);

}  // namespace gradcomm::comm::membership
