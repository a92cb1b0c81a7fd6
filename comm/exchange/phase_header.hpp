// The 40-byte header in front of every message of comm/exchange/ (little
// endian): magic "GCSP", phase, sequence number, collective, dtype, operator,
// root (or a send's receiver), count, payload bytes. A failure notice is the
// magic "GCSF" with the reason's length, followed by the reason: a rank that
// fails tells its peers why.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "comm/exchange/peer_exchange.hpp"

namespace gradcomm::comm {

constexpr size_t kPhaseHeaderBytes = 40;
constexpr size_t kMaxReasonBytes = 2048;  // of a failure notice

void encode_phase_header(const PhaseTag& tag, uint64_t payload_bytes, uint8_t* out);
std::vector<uint8_t> encode_failure_notice(const std::string& reason);

bool is_failure_notice(const uint8_t* header);
// A failure notice's reason length (capped at kMaxReasonBytes).
size_t failure_reason_bytes(const uint8_t* header);

// gcommSuccess when the peer's header belongs to the same phase of the same
// collective (or is the send a receive expects); else gcommInvalidArgument
// (ranks called different collectives, or a send and its receive differ: the
// caller's mistake) or gcommRemoteError (bytes that are not this protocol, or a
// peer out of step), with `why` set.
gcommStatus_t check_phase_header(const uint8_t* header, const PhaseTag& mine, uint64_t expected_payload,
                                 int peer, int me, std::string& why);

}  // namespace gradcomm::comm
