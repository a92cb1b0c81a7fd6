#include "comm/exchange/phase_header.hpp"

#include <algorithm>
#include <cstring>

#include "comm/exchange/little_endian.hpp"
#include "common/dtype.hpp"
#include "common/error.hpp"

namespace gradcomm::comm {

namespace {

constexpr uint32_t kPhaseMagic = 0x50534347;    // "GCSP"
constexpr uint32_t kFailureMagic = 0x46534347;  // "GCSF": a failure notice; the payload is the reason
constexpr size_t kHeaderBytes = kPhaseHeaderBytes;

}  // namespace

void encode_phase_header(const PhaseTag& t, uint64_t payload, uint8_t* h) {
  put_u32(h, kPhaseMagic);
  put_u32(h + 4, t.phase);
  put_u64(h + 8, t.seq);
  h[16] = static_cast<uint8_t>(t.sig.op);
  h[17] = static_cast<uint8_t>(t.sig.dtype);
  h[18] = static_cast<uint8_t>(t.sig.redop);
  h[19] = 0;
  put_u32(h + 20, static_cast<uint32_t>(t.sig.root));
  put_u64(h + 24, t.sig.count);
  put_u64(h + 32, payload);
}

std::vector<uint8_t> encode_failure_notice(const std::string& reason) {
  const std::string text = reason.substr(0, kMaxReasonBytes);
  std::vector<uint8_t> notice(kHeaderBytes + text.size(), 0);
  put_u32(notice.data(), kFailureMagic);
  put_u64(notice.data() + 32, text.size());
  std::memcpy(notice.data() + kHeaderBytes, text.data(), text.size());
  return notice;
}

namespace {

// A send's header names the send (count, dtype, receiver) and how many messages
// the pair exchanged before it; a receive expects the same.
std::string describe_message(const PhaseTag& t, int sender) {
  return cat("rank ", sender, "'s send number ", t.seq + 1, " to rank ", t.sig.root, " (", t.sig.count,
             " elements of ", dtype_name(t.sig.dtype), ")");
}

std::string mismatch(const PhaseTag& mine, const PhaseTag& theirs, int peer, int me) {
  const bool p2p_mine = mine.sig.op == Collective::kSend, p2p_theirs = theirs.sig.op == Collective::kSend;
  if (p2p_mine && p2p_theirs)
    return cat("a send and its receive differ: rank ", me, " expected ", describe_message(mine, peer),
               ", it sent ", theirs.sig.count, " elements of ", dtype_name(theirs.sig.dtype),
               " (the k-th send from a rank to another meets the other's k-th receive from it)");
  if (p2p_mine)
    return cat("rank ", me, " expected ", describe_message(mine, peer), ", but rank ", peer, " called ",
               describe(theirs.sig), " as collective #", theirs.seq);
  if (p2p_theirs)
    return cat("rank ", me, " called ", describe(mine.sig), " as collective #", mine.seq, ", but rank ", peer,
               " sent it a message (", describe_message(theirs, peer), ") this rank has not received");
  return cat("ranks called different collectives: rank ", me, " called ", describe(mine.sig),
             " as collective #", mine.seq, ", rank ", peer, " called ", describe(theirs.sig),
             " as collective #", theirs.seq);
}

}  // namespace

bool is_failure_notice(const uint8_t* h) {
  return get_u32(h) == kFailureMagic;
}

size_t failure_reason_bytes(const uint8_t* h) {
  return std::min<size_t>(get_u64(h + 32), kMaxReasonBytes);
}

gcommStatus_t check_phase_header(const uint8_t* h, const PhaseTag& mine, uint64_t expected_payload, int peer,
                                 int me, std::string& why) {
  if (get_u32(h) != kPhaseMagic) {
    why = cat("rank ", peer, " sent bytes that are not a gradcomm message (a foreign or corrupted stream)");
    return gcommRemoteError;
  }
  // The enum fields are compared as bytes and turned into enums only when valid.
  if (h[16] > static_cast<uint8_t>(kLastCall) || h[17] >= gcommNumDataTypes || h[18] >= gcommNumRedOps) {
    why = cat("rank ", peer,
              " sent a header with an unknown collective, dtype or operator (a corrupted stream?)");
    return gcommRemoteError;
  }
  PhaseTag theirs;
  theirs.phase = get_u32(h + 4);
  theirs.seq = get_u64(h + 8);
  theirs.sig.op = static_cast<Collective>(h[16]);
  theirs.sig.dtype = static_cast<gcommDataType_t>(h[17]);
  theirs.sig.redop = static_cast<gcommRedOp_t>(h[18]);
  theirs.sig.root = static_cast<int>(get_u32(h + 20));
  theirs.sig.count = get_u64(h + 24);
  if (!(theirs.sig == mine.sig) || theirs.seq != mine.seq) {
    why = mismatch(mine, theirs, peer, me);
    return gcommInvalidArgument;
  }
  if (theirs.phase != mine.phase || get_u64(h + 32) != expected_payload) {
    why = cat("rank ", peer, " is out of step (phase ", theirs.phase, " with ", get_u64(h + 32),
              " bytes; expected phase ", mine.phase, " with ", expected_payload, ")");
    return gcommRemoteError;
  }
  return gcommSuccess;
}

}  // namespace gradcomm::comm
