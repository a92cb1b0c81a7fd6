// One rank of a cuda-ipc job, started by gradcomm_cuda_ipc_tests (or by hand under
// torchrun's variables): every process on GPU 0, meeting with gcommCommInitFromEnv
// and gcommTransportAuto, which must choose the cuda-ipc transport. Modes:
//   collectives  every collective, dtype and op; sizes 0, 1, 7, 4099, 65537; in place
//                and out of place; buffers one element past an allocation's start;
//                Inf and NaN; each rank's output against the host reference
//                (tests/comm/collective_reference.hpp), bit for bit, as the local
//                transport's conformance suite checks it; then sends and receives
//                (a ring in a group, to itself, a count mismatch refused on both ranks)
//   die          one all-reduce, then rank 1 exits without a word; the others'
//                next all-reduce must fail within the timeout
// Prints "cuda-ipc rank R: N checks passed" and exits 0, or prints the first
// failures and exits 1.
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "collective_reference.hpp"
#include "gradcomm/gradcomm.h"

namespace gradcomm::test {
namespace {

int g_rank = 0, g_size = 0, g_passed = 0, g_failed = 0;

void check(bool ok, const std::string& what) {
  if (ok) {
    ++g_passed;
  } else if (++g_failed <= 10) {
    std::printf("cuda-ipc rank %d: FAILED %s\n", g_rank, what.c_str());
  }
}

#define CUDA_OR_DIE(expr)                                                               \
  do {                                                                                  \
    cudaError_t e_ = (expr);                                                            \
    if (e_ != cudaSuccess) {                                                            \
      std::printf("cuda-ipc rank %d: %s: %s\n", g_rank, #expr, cudaGetErrorString(e_)); \
      std::exit(2);                                                                     \
    }                                                                                   \
  } while (0)

// A device buffer of `bytes` starting one element (`offset` bytes) past an allocation.
struct DeviceBuffer {
  explicit DeviceBuffer(size_t bytes, size_t start) : offset(start) {
    CUDA_OR_DIE(cudaMalloc(&base, bytes + offset + 16));
    CUDA_OR_DIE(cudaMemset(base, 0xA5, bytes + offset + 16));
  }
  ~DeviceBuffer() { cudaFree(base); }
  unsigned char* at() const { return static_cast<unsigned char*>(base) + offset; }
  void* base = nullptr;
  size_t offset;
};

void collective_case(gcommComm_t c, cudaStream_t s, Op op, gcommDataType_t d, gcommRedOp_t redop,
                     size_t count, bool in_place, bool specials, uint32_t seed) {
  const int n = g_size, r = g_rank, root = static_cast<int>((count + 1) % n);
  const size_t sends = send_elems(op, count, n), recvs = recv_elems(op, count, n), es = elem_size(d);
  std::vector<TypedBuffer> in(n);
  for (int q = 0; q < n; ++q) in[q] = input(d, sends, seed + 7919 * q, specials);
  const size_t span = std::max(sends, recvs);
  const size_t offset = seed % 2 == 0 ? es : 0;  // every other case one element past the allocation
  DeviceBuffer buf(span * es, offset), out(recvs * es, offset);
  const size_t at = in_place && op == Op::kAllGather ? r * count : 0;
  CUDA_OR_DIE(cudaMemcpy(buf.at() + at * es, in[r].bytes.data(), sends * es, cudaMemcpyHostToDevice));
  const void* send = buf.at() + at * es;
  void* recv = in_place ? buf.at() + (op == Op::kReduceScatter ? r * count * es : 0) : out.at();
  const std::string what = std::string(op_name(op)) + " dtype " + std::to_string(d) + " op " +
                           std::to_string(redop) + " count " + std::to_string(count) +
                           (in_place ? " in place" : "") + (specials ? " with Inf/NaN" : "");
  if (issue(op, c, send, recv, count, d, redop, root) != gcommSuccess) {
    check(false, what + ": " + gcommGetLastError());
    return;
  }
  CUDA_OR_DIE(cudaStreamSynchronize(s));
  std::vector<unsigned char> got_bytes(recvs * es + es);
  CUDA_OR_DIE(cudaMemcpy(got_bytes.data(), recv, recvs * es + (in_place ? 0 : es), cudaMemcpyDeviceToHost));
  if (op == Op::kReduce && r != root) return;  // only the root's output means anything
  TypedBuffer got{d, recvs, 0, got_bytes};
  const std::vector<float> want = expected(op, redop, d, count, root, r, in);
  size_t bad = recvs;
  for (size_t i = 0; i < recvs && bad == recvs; ++i)
    if (!same_float(got.get(i), want[i])) bad = i;
  check(bad == recvs,
        what + (bad == recvs ? std::string()
                             : ": element " + std::to_string(bad) + " is " + std::to_string(got.get(bad)) +
                                   ", the reference " + std::to_string(want[bad])));
  if (!in_place) check(got_bytes[recvs * es] == 0xA5, what + ": wrote past the output");
}

void collectives(gcommComm_t c, cudaStream_t s) {
  uint32_t seed = 1;
  for (Op op : kCollectives)
    for (gcommDataType_t d : kDtypes)
      for (gcommRedOp_t redop : {gcommSum, gcommAvg, gcommMax, gcommMin}) {
        if (!reduces(op) && redop != gcommSum) continue;
        for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{4099}, size_t{65537}})
          for (bool in_place : {false, true}) {
            if (in_place && op == Op::kAllToAll) continue;  // all-to-all is out of place only
            collective_case(c, s, op, d, redop, count, in_place, count == 4099, seed++);
          }
      }
  // A barrier orders the streams too.
  check(gcommBarrier(c, s) == gcommSuccess, std::string("barrier: ") + gcommGetLastError());
}

// A ring in a group (each rank sends to its right and receives from its left), a
// send to itself, and a count mismatch that both ranks refuse and survive.
void sends_and_receives(gcommComm_t c, cudaStream_t s) {
  const int n = g_size, r = g_rank, right = (r + 1) % n, left = (r + n - 1) % n;
  for (size_t count : {size_t{0}, size_t{5}, size_t{70001}}) {
    std::vector<float> mine(count), from_left(count);
    for (size_t i = 0; i < count; ++i) mine[i] = static_cast<float>(r * 1000003 + i) * 0.5f;
    DeviceBuffer a(count * 4, 0), b(count * 4, 4), self_in(count * 4, 0), self_out(count * 4, 0);
    CUDA_OR_DIE(cudaMemcpy(a.at(), mine.data(), count * 4, cudaMemcpyHostToDevice));
    CUDA_OR_DIE(cudaMemcpy(self_in.at(), mine.data(), count * 4, cudaMemcpyHostToDevice));
    gcommGroupStart();
    gcommSend(c, a.at(), count, gcommFloat32, right, s);
    gcommRecv(c, b.at(), count, gcommFloat32, left, s);
    gcommSend(c, self_in.at(), count, gcommFloat32, r, s);
    gcommRecv(c, self_out.at(), count, gcommFloat32, r, s);
    const bool ok = gcommGroupEnd() == gcommSuccess;
    check(ok, "ring of " + std::to_string(count) + ": " + (ok ? "" : gcommGetLastError()));
    if (!ok) continue;
    CUDA_OR_DIE(cudaStreamSynchronize(s));
    std::vector<float> self_back(count);
    CUDA_OR_DIE(cudaMemcpy(from_left.data(), b.at(), count * 4, cudaMemcpyDeviceToHost));
    CUDA_OR_DIE(cudaMemcpy(self_back.data(), self_out.at(), count * 4, cudaMemcpyDeviceToHost));
    bool right_values = true;
    for (size_t i = 0; i < count; ++i)
      right_values = right_values && from_left[i] == static_cast<float>(left * 1000003 + i) * 0.5f &&
                     self_back[i] == mine[i];
    check(right_values, "ring of " + std::to_string(count) + ": values");
  }
  if (n >= 2 && r <= 1) {  // rank 0 sends 5 floats, rank 1 expects 6: both refuse
    DeviceBuffer buf(64, 0);
    const gcommStatus_t st = r == 0 ? gcommSend(c, buf.at(), 5, gcommFloat32, 1, s)
                                    : gcommRecv(c, buf.at(), 6, gcommFloat32, 0, s);
    const std::string msg = gcommGetLastError();
    check(st == gcommInvalidArgument && msg.find("does not match") != std::string::npos,
          "mismatched send and receive: status " + std::to_string(st) + ": " + msg);
  }
  // Still usable after the refusal.
  collective_case(c, s, Op::kAllReduce, gcommFloat32, gcommSum, 1000, false, false, 4242);
}

}  // namespace
}  // namespace gradcomm::test

int main(int argc, char** argv) {
  using namespace gradcomm::test;
  const std::string mode = argc > 1 ? argv[1] : "collectives";
  gcommCommConfig_t cfg = GCOMM_COMM_CONFIG_INITIALIZER;
  cfg.device = gcommCudaDevice(0);
  gcommComm_t c = nullptr;
  if (gcommCommInitFromEnv(&cfg, &c) != gcommSuccess) {
    std::printf("cuda-ipc rank ?: init: %s\n", gcommGetLastError());
    return 1;
  }
  gcommCommRank(c, &g_rank);
  gcommCommSize(c, &g_size);
  gcommTransport_t kind = gcommTransportAuto;
  gcommCommTransport(c, &kind);
  check(kind == gcommTransportCudaIpc, std::string("the transport is ") + gcommGetTransportName(kind));
  cudaStream_t s = nullptr;
  CUDA_OR_DIE(cudaSetDevice(0));
  CUDA_OR_DIE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  if (mode == "die") {
    collective_case(c, s, Op::kAllReduce, gcommFloat32, gcommSum, 1000, false, false, 7);
    if (g_rank == 1) _exit(3);
    DeviceBuffer buf(4096, 0);
    const gcommStatus_t st = gcommAllReduce(c, buf.at(), buf.at(), 1024, gcommFloat32, gcommSum, s);
    // The message on a line of its own: the test looks for the dead rank's name in it.
    std::printf("cuda-ipc rank %d: all-reduce after the peer's exit: %s\nerror: %s\n", g_rank,
                gcommGetStatusString(st), gcommGetLastError());
    check(st != gcommSuccess, "an all-reduce with a dead rank failed");
    gcommCommAbort(c);
  } else {
    collectives(c, s);
    sends_and_receives(c, s);
  }
  const gcommStatus_t destroyed = gcommCommDestroy(c);
  if (mode != "die") check(destroyed == gcommSuccess, std::string("destroy: ") + gcommGetLastError());
  cudaStreamDestroy(s);
  std::printf("cuda-ipc rank %d: %d checks passed, %d failed\n", g_rank, g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
