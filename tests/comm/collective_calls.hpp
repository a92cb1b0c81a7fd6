// The collectives as one enum and one call, for the comm tests that run every one
// of them (the conformance suite, the socket transport's byte counts, the MPI
// transport's run under mpirun): their names, buffer sizes and C API calls.
#pragma once

#include <cstddef>

#include "gradcomm/gradcomm.h"

namespace gradcomm::test {

enum class Op { kAllReduce, kReduceScatter, kReduce, kBroadcast, kAllGather, kAllToAll };
inline constexpr Op kCollectives[] = {Op::kAllReduce, Op::kReduceScatter, Op::kReduce,
                                      Op::kBroadcast, Op::kAllGather,     Op::kAllToAll};

inline const char* op_name(Op op) {
  const char* names[] = {"all-reduce", "reduce-scatter", "reduce", "broadcast", "all-gather", "all-to-all"};
  return names[static_cast<int>(op)];
}
inline bool reduces(Op op) {
  return op == Op::kAllReduce || op == Op::kReduceScatter || op == Op::kReduce;
}
// Elements each rank sends and receives for `count` (the per-rank block of an
// all-gather, a reduce-scatter and an all-to-all).
inline size_t send_elems(Op op, size_t count, int n) {
  return op == Op::kReduceScatter || op == Op::kAllToAll ? count * n : count;
}
inline size_t recv_elems(Op op, size_t count, int n) {
  return op == Op::kAllGather || op == Op::kAllToAll ? count * n : count;
}

// One call of `op` (root: the reduce's and the broadcast's).
inline gcommStatus_t issue(Op op, gcommComm_t c, const void* send, void* recv, size_t count,
                           gcommDataType_t d, gcommRedOp_t redop, int root) {
  switch (op) {
    case Op::kAllReduce:
      return gcommAllReduce(c, send, recv, count, d, redop, nullptr);
    case Op::kReduceScatter:
      return gcommReduceScatter(c, send, recv, count, d, redop, nullptr);
    case Op::kReduce:
      return gcommReduce(c, send, recv, count, d, redop, root, nullptr);
    case Op::kBroadcast:
      return gcommBroadcast(c, send, recv, count, d, root, nullptr);
    case Op::kAllGather:
      return gcommAllGather(c, send, recv, count, d, nullptr);
    case Op::kAllToAll:
      return gcommAllToAll(c, send, recv, count, d, nullptr);
  }
  return gcommInternalError;
}

}  // namespace gradcomm::test
