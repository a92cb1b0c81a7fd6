#include "comm/transport.hpp"

#include <sstream>

#include "common/dtype.hpp"
#include "common/error.hpp"

namespace gradcomm::comm {

const char* collective_name(Collective op) noexcept {
  switch (op) {
    case Collective::kAllReduce:
      return "all-reduce";
    case Collective::kBroadcast:
      return "broadcast";
    case Collective::kReduce:
      return "reduce";
    case Collective::kAllGather:
      return "all-gather";
    case Collective::kReduceScatter:
      return "reduce-scatter";
    case Collective::kAllToAll:
      return "all-to-all";
    case Collective::kBarrier:
      return "barrier";
    case Collective::kSend:
      return "send";
    case Collective::kRecv:
      return "recv";
  }
  return "?";
}

bool is_reduction(Collective op) noexcept {
  return op == Collective::kAllReduce || op == Collective::kReduce || op == Collective::kReduceScatter;
}

std::string call_name(Collective op, uint64_t seq, size_t bytes) {
  return cat(CallId{op, seq, bytes});
}

CollectiveArgs collective_call(Collective op, const void* send, void* recv, size_t count,
                               gcommDataType_t dtype, gcommStream_t stream, gcommRedOp_t redop, int root) {
  CollectiveArgs a;
  a.op = op;
  a.send = send;
  a.recv = recv;
  a.count = count;
  a.dtype = dtype;
  a.redop = redop;
  a.root = root;
  a.stream = stream;
  return a;
}

CollectiveArgs p2p_call(Collective op, const void* buffer, size_t count, gcommDataType_t dtype, int peer,
                        gcommStream_t stream) {
  void* recv = op == Collective::kRecv ? const_cast<void*>(buffer) : nullptr;
  return collective_call(op, op == Collective::kSend ? buffer : nullptr, recv, count, dtype, stream, gcommSum,
                         peer);
}

CollectiveArgs owned_buffers_call(Collective op, const void* send, void* recv, size_t count,
                                  gcommDataType_t dtype, gcommStream_t stream, gcommRedOp_t redop, int root) {
  CollectiveArgs a = collective_call(op, send, recv, count, dtype, stream, redop, root);
  a.buffers_known = true;
  return a;
}

CallId call_id(const CollectiveArgs& a) noexcept {
  return CallId{a.op, a.seq, a.count * dtype_size(a.dtype), is_p2p(a.op) ? a.root : -1};
}

std::ostream& operator<<(std::ostream& os, const CallId& id) {
  os << collective_name(id.op) << " #" << id.seq << " of " << id.bytes << " bytes";
  if (id.peer >= 0) os << (id.op == Collective::kSend ? " to rank " : " from rank ") << id.peer;
  return os;
}

std::string describe(const CallSignature& s) {
  std::ostringstream os;
  os << collective_name(s.op);
  if (s.op != Collective::kBarrier) {
    os << "(count " << s.count << ", " << dtype_name(s.dtype);
    if (is_reduction(s.op)) os << ", " << gcommRedOpName(s.redop);
    if (s.op == Collective::kBroadcast || s.op == Collective::kReduce) os << ", root " << s.root;
    if (s.op == Collective::kSend) os << ", to rank " << s.root;
    if (s.op == Collective::kRecv) os << ", from rank " << s.root;
    os << ")";
  }
  return os.str();
}

}  // namespace gradcomm::comm
