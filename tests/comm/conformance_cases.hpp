// The transport conformance suite's cases, each checked by one rank alone: every
// rank makes every rank's input from the case's seed (as its peers do), runs the
// collective on its own buffers and compares what it got with the reference
// (collective_reference.hpp: ranks combined in rank order in float, rounded once),
// bit for bit, and that nothing was written past its output. So the same cases run
// with ranks as threads (conformance_test.cpp: local, socket, shm) and with ranks
// as processes under a launcher (mpi/mpi_transport_main.cpp: the MPI transport
// under mpirun), and every transport is held to one suite.
#pragma once

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "collective_calls.hpp"
#include "collective_reference.hpp"

namespace gradcomm::test {

struct ConformanceCase {
  Op op;
  gcommDataType_t dtype;
  gcommRedOp_t redop;
  size_t count;
  bool in_place;
  bool specials;  // Inf, -Inf and NaN among the inputs
  uint32_t seed;
  std::string name() const {
    return std::string(op_name(op)) + " dtype " + std::to_string(dtype) + " op " + std::to_string(redop) +
           " count " + std::to_string(count) + (in_place ? " in place" : "") +
           (specials ? " with Inf/NaN" : "");
  }
};

// Every collective, dtype and reduction op at counts 0, 1, 7 and 4099, in place and
// not (all-to-all has no in-place variant).
inline std::vector<ConformanceCase> every_collective_case() {
  std::vector<ConformanceCase> cases;
  uint32_t seed = 1;
  for (Op op : kCollectives)
    for (gcommDataType_t d : kDtypes)
      for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{4099}})
        for (gcommRedOp_t redop : {gcommSum, gcommAvg, gcommMax, gcommMin})
          for (bool in_place : {false, true}) {
            if (!reduces(op) && redop != gcommSum) continue;
            if (op == Op::kAllToAll && in_place) continue;
            cases.push_back(ConformanceCase{op, d, redop, count, in_place, false, seed++});
          }
  return cases;
}

// Inf and NaN among 4099 inputs, every collective, op and dtype.
inline std::vector<ConformanceCase> inf_and_nan_cases() {
  std::vector<ConformanceCase> cases;
  uint32_t seed = 1000;
  for (Op op : kCollectives)
    for (gcommRedOp_t redop : {gcommSum, gcommAvg, gcommMax, gcommMin}) {
      if (!reduces(op) && redop != gcommSum) continue;
      for (gcommDataType_t d : kDtypes)
        cases.push_back(ConformanceCase{op, d, redop, 4099, false, true, seed++});
    }
  return cases;
}

// One message past the 8 MiB piece of the socket and shm transports, every
// collective, f32 sum, in place and not, for `n` ranks.
inline std::vector<ConformanceCase> larger_than_a_piece_cases(int n) {
  std::vector<ConformanceCase> cases;
  const size_t elements = (size_t{8} << 20) / 4 + 12345;
  uint32_t seed = 99;
  for (Op op : kCollectives) {
    const bool blocked = op == Op::kAllGather || op == Op::kReduceScatter || op == Op::kAllToAll;
    for (bool in_place : {false, true}) {
      if (op == Op::kAllToAll && in_place) continue;
      cases.push_back(ConformanceCase{op, gcommFloat32, gcommSum, blocked ? elements / n : elements, in_place,
                                      false, seed++});
    }
  }
  return cases;
}

// Rank r of n runs case k on communicator c (host memory) and checks its own
// output; "" or what went wrong. Every rank of the communicator must run the same
// cases in the same order.
inline std::string check_on_rank(gcommComm_t c, int r, int n, const ConformanceCase& k) {
  const Op op = k.op;
  const gcommDataType_t d = k.dtype;
  const int root = static_cast<int>((k.count + 1) % n);
  const size_t send = send_elems(op, k.count, n), recv = recv_elems(op, k.count, n), es = elem_size(d);
  std::vector<TypedBuffer> in(n);
  for (int q = 0; q < n; ++q) in[q] = input(d, send, k.seed + 7919 * q, k.specials);
  // One buffer of the larger size (+ a guard element) holds the input where the
  // call reads it: at rank r's block for an in-place all-gather.
  const size_t larger = std::max(send, recv);
  std::vector<unsigned char> buf((larger + 1) * es, 0xA5), out((recv + 1) * es, 0x5A);
  const size_t at = k.in_place && op == Op::kAllGather ? r * k.count : 0;
  std::memcpy(buf.data() + at * es, in[r].bytes.data(), send * es);
  const void* send_at = buf.data() + at * es;
  void* recv_at = k.in_place ? buf.data() + (op == Op::kReduceScatter ? r * k.count * es : 0) : out.data();
  if (issue(op, c, send_at, recv_at, k.count, d, k.redop, root) != gcommSuccess)
    return k.name() + ": " + gcommGetLastError();
  if (k.in_place) std::memcpy(out.data(), recv_at, recv * es);
  if (op == Op::kReduce && r != root) return "";  // only the root's output means anything
  const TypedBuffer got{d, recv, 0, out};
  const std::vector<float> want = expected(op, k.redop, d, k.count, root, r, in);
  for (size_t i = 0; i < recv; ++i)
    if (!same_float(got.get(i), want[i]))
      return k.name() + ": rank " + std::to_string(r) + " element " + std::to_string(i) + " is " +
             std::to_string(got.get(i)) + ", the reference " + std::to_string(want[i]);
  if (!k.in_place && out[recv * es] != 0x5A) return k.name() + ": wrote past the output";
  return "";
}

}  // namespace gradcomm::test
