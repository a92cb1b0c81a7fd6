#include "comm/transport.hpp"

#include <sstream>

#include "common/dtype.hpp"
#include "common/error.hpp"

namespace gradcomm::comm {

const char* collective_name(Collective op) noexcept {
  switch (op) {
    case Collective::kAllReduce: return "all-reduce";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kReduce: return "reduce";
    case Collective::kAllGather: return "all-gather";
    case Collective::kReduceScatter: return "reduce-scatter";
    case Collective::kAllToAll: return "all-to-all";
    case Collective::kBarrier: return "barrier";
  }
  return "?";
}

bool is_reduction(Collective op) noexcept {
  return op == Collective::kAllReduce || op == Collective::kReduce || op == Collective::kReduceScatter;
}

std::string call_name(Collective op, uint64_t seq, size_t bytes) {
  return cat(CallId{op, seq, bytes});
}

CollectiveArgs collective_call(Collective op, const void* send, void* recv, size_t count, gcommDataType_t dtype,
                               gcommStream_t stream, gcommRedOp_t redop, int root) {
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

CollectiveArgs owned_buffers_call(Collective op, const void* send, void* recv, size_t count, gcommDataType_t dtype,
                                  gcommStream_t stream, gcommRedOp_t redop, int root) {
  CollectiveArgs a = collective_call(op, send, recv, count, dtype, stream, redop, root);
  a.buffers_known = true;
  return a;
}

CallId call_id(const CollectiveArgs& a) noexcept { return CallId{a.op, a.seq, a.count * dtype_size(a.dtype)}; }

std::ostream& operator<<(std::ostream& os, const CallId& id) {
  return os << collective_name(id.op) << " #" << id.seq << " of " << id.bytes << " bytes";
}

std::string describe(const CallSignature& s) {
  std::ostringstream os;
  os << collective_name(s.op);
  if (s.op != Collective::kBarrier) {
    os << "(count " << s.count << ", " << dtype_name(s.dtype);
    if (is_reduction(s.op)) os << ", " << gcommRedOpName(s.redop);
    if (s.op == Collective::kBroadcast || s.op == Collective::kReduce) os << ", root " << s.root;
    os << ")";
  }
  return os.str();
}

}  // namespace gradcomm::comm
