// gradcomm-perf: a bandwidth checker whose table reads like nccl-tests'
// all_reduce_perf (same columns, busbw factors, core flags), on gradcomm's
// public C API. With GPUs: one NCCL rank per GPU (-g N, default all), each
// driven by its own thread; --local N: N ranks as threads on the local
// transport (on GPU 0, or on the host when there is no GPU, the default there).
// Under a launcher (a world size above 1 in the environment) each process is
// one rank (gcommCommInitFromEnv: NCCL, or the socket transport without a GPU);
// the ranks sum their #wrong counts and rank 0 prints.
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "common/launcher_env.hpp"
#include "gradcomm/gradcomm.h"
#include "half_bits.hpp"
#include "perf_options.hpp"

namespace {

struct Row {
  size_t bytes = 0, count = 0;
  std::vector<double> rank_us[2];  // per rank of the world (out of place, in place)
  double time_us[2] = {0, 0}, algbw[2] = {0, 0}, busbw[2] = {0, 0};  // -a's aggregate of rank_us
  long wrong[2] = {0, 0};
};

enum class Launch { kGpusOfThisProcess, kLocal, kProcessPerRank };

// Where a rank runs, for the header (gathered from every process under a launcher).
struct Placement {
  int rank = 0, pid = 0, device = -1;
};

struct Setup {
  PerfOptions o;
  Launch launch = Launch::kLocal;
  int nranks = 2;                          // the world
  gcommDevice_t device = gcommHostDevice();  // kLocal: where the local ranks run
  bool nccl = false;                       // the transport is NCCL
  std::vector<gcommComm_t> comms;          // this process's ranks
  std::vector<int> ranks;                  // their ranks in the world
  std::vector<Placement> placements;       // every rank of the world
  std::vector<Row> rows;
  std::atomic<bool> failed{false};
  std::mutex error_mutex;
  std::string error;
};

bool is(const Setup& s, const char* c) { return s.o.collective == c; }
size_t esize(gcommDataType_t d) { return d == gcommFloat32 ? 4 : 2; }

double bus_factor(const Setup& s) {
  double n = s.nranks;
  if (is(s, "all_reduce")) return 2.0 * (n - 1) / n;
  if (is(s, "all_gather") || is(s, "reduce_scatter")) return (n - 1) / n;
  return 1.0;
}

// Small integers: every sum over up to 64 ranks is exact in every dtype.
float value(int rank, size_t i) { return static_cast<float>(static_cast<int>((rank * 3 + i) % 11) - 5); }

float reduce_values(const Setup& s, size_t i) {
  float acc = value(0, i);
  for (int q = 1; q < s.nranks; ++q) {
    float v = value(q, i);
    acc = s.o.op == gcommMax ? std::max(acc, v) : s.o.op == gcommMin ? std::min(acc, v) : acc + v;
  }
  return s.o.op == gcommAvg ? acc / s.nranks : acc;
}

void fail_with(Setup& s, const std::string& what) {
  std::lock_guard<std::mutex> lock(s.error_mutex);
  if (s.error.empty()) s.error = what;
  s.failed = true;
}

#define PERF_CHECK(setup, call)                                                             \
  do {                                                                                     \
    gcommStatus_t st_ = (call);                                                            \
    if (st_ != gcommSuccess) {                                                             \
      fail_with(setup, std::string(#call " -> ") + gcommGetStatusName(st_) + ": " + gcommGetLastError()); \
      return;                                                                              \
    }                                                                                      \
  } while (0)

// One rank's buffers, on the rank's device; host staging for fill and check.
struct Buffers {
  bool gpu;
  void* send = nullptr;
  void* recv = nullptr;
  size_t bytes;
  Buffers(bool on_gpu, size_t b) : gpu(on_gpu), bytes(b) {
    if (gpu) {
      if (cudaMalloc(&send, bytes) != cudaSuccess || cudaMalloc(&recv, bytes) != cudaSuccess) send = recv = nullptr;
    } else {
      send = std::calloc(1, bytes);
      recv = std::calloc(1, bytes);
    }
  }
  ~Buffers() {
    if (gpu) {
      cudaFree(send);
      cudaFree(recv);
    } else {
      std::free(send);
      std::free(recv);
    }
  }
};

// Writes value(rank, i) for i < count at dst (device or host), in the dtype.
bool fill(const Setup& s, void* dst, int rank, size_t count, bool gpu) {
  const size_t es = esize(s.o.dtype);
  std::vector<unsigned char> typed(count * es + 1);
  for (size_t i = 0; i < count; ++i) {
    float v = value(rank, i);
    uint16_t h = s.o.dtype == gcommFloat16 ? perf::float_to_half(v) : perf::float_to_bf16(v);
    std::memcpy(typed.data() + i * es, s.o.dtype == gcommFloat32 ? static_cast<const void*>(&v) : &h, es);
  }
  if (gpu) return cudaMemcpy(dst, typed.data(), count * es, cudaMemcpyHostToDevice) == cudaSuccess;
  std::memcpy(dst, typed.data(), count * es);
  return true;
}

// Reads count elements of the dtype at src (device or host) as floats.
std::vector<float> fetch(const Setup& s, const void* src, size_t count, bool gpu) {
  const size_t es = esize(s.o.dtype);
  std::vector<unsigned char> typed(count * es + 1);
  if (gpu) cudaMemcpy(typed.data(), src, count * es, cudaMemcpyDeviceToHost);
  else std::memcpy(typed.data(), src, count * es);
  std::vector<float> f(count);
  for (size_t i = 0; i < count; ++i) {
    if (s.o.dtype == gcommFloat32) {
      std::memcpy(&f[i], typed.data() + i * 4, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, typed.data() + i * 2, 2);
      f[i] = s.o.dtype == gcommFloat16 ? perf::half_to_float(h) : perf::bf16_to_float(h);
    }
  }
  return f;
}

long count_wrong(const Setup& s, int rank, const std::vector<float>& got, size_t count) {
  double tol = s.o.op != gcommAvg ? 0.0 : s.o.dtype == gcommFloat32 ? 1e-6 : s.o.dtype == gcommFloat16 ? 2e-3 : 1e-2;
  long wrong = 0;
  auto bad = [&](float g, float e) { return !(std::fabs(g - e) <= tol * std::max(1.0f, std::fabs(e))); };
  if (is(s, "all_gather")) {
    for (int q = 0; q < s.nranks; ++q)
      for (size_t i = 0; i < count; ++i) wrong += bad(got[q * count + i], value(q, i));
  } else if (is(s, "reduce_scatter")) {
    for (size_t i = 0; i < count; ++i) wrong += bad(got[i], reduce_values(s, rank * count + i));
  } else if (is(s, "broadcast")) {
    for (size_t i = 0; i < count; ++i) wrong += bad(got[i], value(s.o.root, i));
  } else if (is(s, "reduce") && rank != s.o.root) {
    return 0;
  } else {
    for (size_t i = 0; i < count; ++i) wrong += bad(got[i], reduce_values(s, i));
  }
  return wrong;
}

gcommStatus_t issue(const Setup& s, gcommComm_t c, const void* send, void* recv, size_t count, cudaStream_t st) {
  auto stream = reinterpret_cast<gcommStream_t>(st);
  if (is(s, "all_gather")) return gcommAllGather(c, send, recv, count, s.o.dtype, stream);
  if (is(s, "reduce_scatter")) return gcommReduceScatter(c, send, recv, count, s.o.dtype, s.o.op, stream);
  if (is(s, "broadcast")) return gcommBroadcast(c, send, recv, count, s.o.dtype, s.o.root, stream);
  if (is(s, "reduce")) return gcommReduce(c, send, recv, count, s.o.dtype, s.o.op, s.o.root, stream);
  return gcommAllReduce(c, send, recv, count, s.o.dtype, s.o.op, stream);
}

void rank_main(Setup& s, int index, const std::vector<size_t>& sizes) {
  gcommComm_t c = s.comms[index];
  const int rank = s.ranks[index];
  gcommDevice_t dev = gcommHostDevice();
  gcommCommDevice(c, &dev);
  const bool gpu = dev.kind == gcommDeviceCuda;
  cudaStream_t stream = nullptr;
  if (gpu) {
    cudaSetDevice(dev.ordinal);
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  }
  Buffers buf(gpu, s.o.max_bytes + 64);
  if (buf.send == nullptr || buf.recv == nullptr) return fail_with(s, "cannot allocate the test buffers");
  const size_t es = esize(s.o.dtype);
  bool grouped = is(s, "all_gather") || is(s, "reduce_scatter");
  for (size_t k = 0; k < sizes.size() && !s.failed; ++k) {
    // count: elements per rank block for all-gather / reduce-scatter (nccl-tests' size is the whole buffer).
    size_t total = sizes[k] / es;
    size_t count = grouped ? total / s.nranks : total;
    for (int in_place = 0; in_place < 2; ++in_place) {
      char* send = static_cast<char*>(buf.send);
      char* recv = in_place ? send : static_cast<char*>(buf.recv);
      if (in_place && is(s, "all_gather")) send = recv + rank * count * es;
      if (in_place && is(s, "reduce_scatter")) recv = send + rank * count * es;
      size_t send_count = is(s, "reduce_scatter") ? count * s.nranks : count;
      if (!fill(s, send, rank, send_count, gpu)) return fail_with(s, "cannot fill the send buffer");
      for (int w = 0; w < s.o.warmup; ++w) PERF_CHECK(s, issue(s, c, send, recv, count, stream));
      PERF_CHECK(s, gcommBarrier(c, reinterpret_cast<gcommStream_t>(stream)));
      if (gpu) cudaStreamSynchronize(stream);
      PERF_CHECK(s, gcommBarrier(c, nullptr));
      auto t0 = std::chrono::steady_clock::now();
      for (int it = 0; it < s.o.iters; ++it) {
        PERF_CHECK(s, issue(s, c, send, recv, count, stream));
        // nccl-tests' -z 1: each collective completes before the next is issued.
        if (s.o.blocking && gpu) cudaStreamSynchronize(stream);
      }
      if (gpu) cudaStreamSynchronize(stream);
      // As nccl-tests: this rank's time ends when its own work is done; the barrier
      // that keeps the ranks in step is not timed (it cost an extra enqueue, ~5 us
      // on one GPU, per timed loop before 2026-11-23).
      double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / s.o.iters;
      PERF_CHECK(s, gcommBarrier(c, nullptr));
      long wrong = 0;
      if (s.o.check) {
        if (!fill(s, send, rank, send_count, gpu)) return fail_with(s, "cannot fill the send buffer");
        PERF_CHECK(s, issue(s, c, send, recv, count, stream));
        if (gpu) cudaStreamSynchronize(stream);
        size_t recv_count = is(s, "all_gather") ? count * s.nranks : count;
        const char* result = in_place && is(s, "all_gather") ? recv : recv;
        wrong = count_wrong(s, rank, fetch(s, result, recv_count, gpu), count);
      }
      PERF_CHECK(s, gcommBarrier(c, nullptr));
      Row& row = s.rows[k];
      row.rank_us[in_place][rank] = us;  // this rank's own slot
      if (rank == 0) {
        // Like nccl-tests, the size column is what moved: the request rounded down
        // to whole elements (and, for all-gather / reduce-scatter, whole rank blocks).
        row.count = grouped ? count * s.nranks : count;
        row.bytes = row.count * es;
      }
      static std::mutex wrong_mutex;
      std::lock_guard<std::mutex> lock(wrong_mutex);
      s.rows[k].wrong[in_place] += wrong;
    }
    if (rank == 0 && isatty(STDOUT_FILENO) && sizes.size() > 8)
      std::fprintf(stderr, "\r  [%zu/%zu] %zu bytes done   ", k + 1, sizes.size(), sizes[k]);
  }
  if (rank == 0 && isatty(STDOUT_FILENO) && sizes.size() > 8) std::fprintf(stderr, "\r%40s\r", "");
  if (gpu) cudaStreamDestroy(stream);
}

std::vector<size_t> size_list(const PerfOptions& o) {
  std::vector<size_t> sizes;
  for (size_t b = o.min_bytes; b <= o.max_bytes;) {
    sizes.push_back(b);
    // A factor in double (a big one must end the sweep, not wrap a size_t),
    // truncated as nccl-tests does, but at least one byte more (-f 1.1 from 8 B
    // would stay at 8); a step in integers.
    size_t next = 0;
    if (o.step_factor > 0) {
      double grown = std::floor(static_cast<double>(b) * o.step_factor);
      if (grown > static_cast<double>(o.max_bytes)) break;
      next = std::max(b + 1, static_cast<size_t>(grown));
    } else {
      if (o.step_bytes > o.max_bytes - b) break;
      next = b + o.step_bytes;
    }
    b = next;
  }
  return sizes;
}

void print_header(const Setup& s) {
  size_t need = 0;
  gcommGetEnvironmentReport(nullptr, 0, &need);
  std::vector<char> env(need + 1);
  gcommGetEnvironmentReport(env.data(), env.size(), nullptr);
  std::string report(env.data());
  size_t pos = 0;
  while ((pos = report.find('\n', pos)) != std::string::npos && pos + 1 < report.size()) report.replace(pos, 1, "\n# ", 0, 3), pos += 3;
  std::printf("# gradcomm-perf %s: %s\n# %s", gcommGetVersionString(), s.o.collective.c_str(), report.c_str());
  std::printf("# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %g(%s) warmup iters: %d iters: %d validation: %d blocking: %d time: %s\n",
              static_cast<int>(s.comms.size()), s.device.kind == gcommDeviceCuda ? 1 : 0, s.o.min_bytes, s.o.max_bytes,
              s.o.step_factor > 0 ? s.o.step_factor : static_cast<double>(s.o.step_bytes),
              s.o.step_factor > 0 ? "factor" : "bytes", s.o.warmup, s.o.iters, s.o.check ? 1 : 0, s.o.blocking ? 1 : 0,
              average_label(s.o.average));
  if (s.launch == Launch::kProcessPerRank)
    std::printf("#\n# Transport: %s (%d ranks, one per process)\n", s.nccl ? "nccl" : "socket", s.nranks);
  else if (s.nccl)
    std::printf("#\n# Transport: nccl (%d rank(s), one per GPU, threads of one process)\n", s.nranks);
  else
    std::printf("#\n# Transport: local (%d ranks as threads of one process) on %s\n", s.nranks,
                s.device.kind == gcommDeviceCuda ? ("cuda:" + std::to_string(s.device.ordinal)).c_str() : "the host");
  if (!s.nccl && s.device.kind != gcommDeviceCuda)
    std::printf("# (no GPU: the figures are host memory%s, not GPU bandwidth)\n",
                s.launch == Launch::kProcessPerRank ? " and TCP loopback or network" : " copies");
  for (const Placement& p : s.placements)
    std::printf("#  Rank %2d Group  0 Pid %6d on %10s device %2d\n", p.rank, p.pid, p.device >= 0 ? "cuda" : "host",
                p.device);
  std::printf("#\n%-62s%-42s%s\n", "#", "out-of-place", "in-place");
  std::printf("#%12s%14s%10s%8s%8s%11s%8s%8s%7s%11s%8s%8s%7s\n", "size", "count", "type", "redop", "root", "time",
              "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  std::printf("#%12s%14s%10s%8s%8s%11s%8s%8s%7s%11s%8s%8s%7s\n", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)",
              "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
}

// A small float collective on host data through a communicator of any device:
// all-gather (`gather`) or sum. Values are small integers, exact in float.
bool small_collective(gcommComm_t c, const std::vector<float>& mine, bool gather, int world, std::vector<float>& out,
                      std::string& error) {
  gcommDevice_t dev = gcommHostDevice();
  gcommCommDevice(c, &dev);
  const size_t n = mine.size(), total = gather ? n * world : n;
  out.assign(total, 0.0f);
  void* send = const_cast<float*>(mine.data());
  void* recv = out.data();
  const bool gpu = dev.kind == gcommDeviceCuda;
  if (gpu) {
    cudaSetDevice(dev.ordinal);
    if (cudaMalloc(&send, (n + total) * sizeof(float)) != cudaSuccess) {
      error = "cannot allocate " + std::to_string((n + total) * sizeof(float)) + " bytes on the GPU";
      return false;
    }
    recv = static_cast<float*>(send) + n;
    cudaMemcpy(send, mine.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  }
  gcommStatus_t st = gather ? gcommAllGather(c, send, recv, n, gcommFloat32, nullptr)
                            : gcommAllReduce(c, send, recv, n, gcommFloat32, gcommSum, nullptr);
  if (st == gcommSuccess) st = gcommCommSynchronize(c);
  if (st != gcommSuccess) error = gcommGetLastError();
  if (gpu) {
    cudaMemcpy(out.data(), recv, total * sizeof(float), cudaMemcpyDeviceToHost);
    cudaFree(send);
  }
  return st == gcommSuccess;
}

// Creates this process's communicators; false (with the message printed) on failure.
bool init(Setup& s, int gpus) {
  gcommCommConfig_t cfg = GCOMM_COMM_CONFIG_INITIALIZER;
  if (s.launch == Launch::kProcessPerRank) {
    if (gpus == 0) cfg.device = gcommHostDevice();  // the socket transport
    gcommComm_t c = nullptr;
    if (gcommCommInitFromEnv(&cfg, &c) != gcommSuccess) {
      std::fprintf(stderr, "gradcomm-perf: %s\n", gcommGetLastError());
      return false;
    }
    int rank = 0;
    gcommTransport_t kind = gcommTransportAuto;
    gcommCommRank(c, &rank);
    gcommCommSize(c, &s.nranks);
    gcommCommDevice(c, &s.device);
    gcommCommTransport(c, &kind);
    s.nccl = kind == gcommTransportNccl;
    s.comms = {c};
    s.ranks = {rank};
    std::vector<float> all;
    std::string error;
    const int device = s.device.kind == gcommDeviceCuda ? s.device.ordinal : -1;
    if (!small_collective(c, {float(rank), float(getpid()), float(device)}, true, s.nranks, all, error)) {
      std::fprintf(stderr, "gradcomm-perf: rank %d: %s\n", rank, error.c_str());
      gcommCommDestroy(c);
      return false;
    }
    for (int r = 0; r < s.nranks; ++r)
      s.placements.push_back(Placement{int(all[3 * r]), int(all[3 * r + 1]), int(all[3 * r + 2])});
    return true;
  }
  s.comms.assign(s.nranks, nullptr);
  gcommStatus_t st = s.nccl ? gcommCommInitAll(s.nranks, nullptr, s.comms.data())
                            : gcommCommInitLocal(s.nranks, s.device, &cfg, s.comms.data());
  if (st != gcommSuccess) {
    std::fprintf(stderr, "gradcomm-perf: %s\n", gcommGetLastError());
    return false;
  }
  for (int r = 0; r < s.nranks; ++r) {
    s.ranks.push_back(r);
    int dev = s.nccl ? r : s.device.kind == gcommDeviceCuda ? s.device.ordinal : -1;
    s.placements.push_back(Placement{r, static_cast<int>(getpid()), dev});
  }
  return true;
}

// Under a launcher: one all-gather tells every process each rank's #wrong counts
// (summed) and times. A count goes as two floats (count / 4096 and count % 4096),
// exact in float for any buffer this tool allocates; times to ~7 digits.
bool exchange_over_processes(Setup& s) {
  const int me = s.ranks[0];
  std::vector<float> mine;
  for (const Row& r : s.rows)
    for (int p = 0; p < 2; ++p) {
      mine.push_back(static_cast<float>(r.wrong[p] >> 12));
      mine.push_back(static_cast<float>(r.wrong[p] & 4095));
      mine.push_back(static_cast<float>(r.rank_us[p][me]));
    }
  std::vector<float> all;
  std::string error;
  if (!small_collective(s.comms[0], mine, true, s.nranks, all, error)) {
    fail_with(s, "gathering the ranks' #wrong and times: " + error);
    return false;
  }
  for (Row& r : s.rows) r.wrong[0] = r.wrong[1] = 0;
  for (int q = 0; q < s.nranks; ++q) {
    size_t k = q * mine.size();
    for (Row& r : s.rows)
      for (int p = 0; p < 2; ++p, k += 3) {
        r.wrong[p] += static_cast<long>(all[k]) * 4096 + static_cast<long>(all[k + 1]);
        r.rank_us[p][q] = all[k + 2];
      }
  }
  return true;
}

// The reported time (nccl-tests' -a: rank 0's, the mean, the min or the max over
// the ranks) and the bandwidths from it.
void aggregate_times(Setup& s) {
  for (Row& r : s.rows)
    for (int p = 0; p < 2; ++p) {
      const std::vector<double>& t = r.rank_us[p];
      double v = t[0];
      if (s.o.average == 1) v = std::accumulate(t.begin(), t.end(), 0.0) / t.size();
      if (s.o.average == 2) v = *std::min_element(t.begin(), t.end());
      if (s.o.average == 3) v = *std::max_element(t.begin(), t.end());
      r.time_us[p] = v;
      r.algbw[p] = static_cast<double>(r.bytes) / v / 1e3;
      r.busbw[p] = r.algbw[p] * bus_factor(s);
    }
}

}  // namespace

int main(int argc, char** argv) {
  Setup s;
  int exit_code = 0;
  if (!parse_perf_options(argc, argv, s.o, exit_code)) return exit_code;
  int gpus = 0;
  gcommGetCudaDeviceCount(&gpus);
  if (s.o.gpus > gpus) {
    std::fprintf(stderr, "gradcomm-perf: -g %d but only %d GPU(s) are visible\n", s.o.gpus, gpus);
    return 2;
  }
  // --local wins; else a launcher's world makes each process one rank; else
  // NCCL on the GPUs of this process, or 2 local host ranks without a GPU.
  int world = 0;
  if (!gradcomm::bench::launcher_world_size("gradcomm-perf", world)) return 2;
  if (s.o.local_ranks > 0) s.launch = Launch::kLocal;
  else if (world > 1) s.launch = Launch::kProcessPerRank;
  else s.launch = gpus > 0 ? Launch::kGpusOfThisProcess : Launch::kLocal;
  if (s.launch == Launch::kProcessPerRank && s.o.gpus > 1) {
    std::fprintf(stderr, "gradcomm-perf: -g %d under a launcher (world size %d): each process drives one GPU\n",
                 s.o.gpus, world);
    return 2;
  }
  s.nccl = s.launch == Launch::kGpusOfThisProcess;
  s.nranks = s.o.local_ranks > 0 ? s.o.local_ranks : s.nccl ? (s.o.gpus > 0 ? s.o.gpus : gpus) : 2;
  s.device = gpus > 0 ? gcommCudaDevice(0) : gcommHostDevice();
  if (gpus == 0 && !s.o.iters_given) {
    // Host runs copy through host memory on a few cores: keep the default sweep short.
    s.o.iters = 5;
    s.o.warmup = std::min(s.o.warmup, 1);
  }
  if (!init(s, gpus)) return 1;
  const bool printer = s.ranks[0] == 0;  // the process of rank 0 prints
  if (s.o.root >= s.nranks) {
    if (printer) std::fprintf(stderr, "gradcomm-perf: root %d is not a rank (0..%d)\n", s.o.root, s.nranks - 1);
    for (gcommComm_t c : s.comms) gcommCommDestroy(c);
    return 2;
  }
  std::vector<size_t> sizes = size_list(s.o);
  s.rows.resize(sizes.size());
  for (Row& r : s.rows)
    for (auto& t : r.rank_us) t.assign(s.nranks, 0.0);
  if (printer) print_header(s);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < s.comms.size(); ++i) threads.emplace_back([&, i] { rank_main(s, static_cast<int>(i), sizes); });
  for (auto& t : threads) t.join();
  if (!s.failed && s.launch == Launch::kProcessPerRank) exchange_over_processes(s);
  if (!s.failed) aggregate_times(s);
  for (gcommComm_t c : s.comms) gcommCommDestroy(c);
  if (s.failed) {
    std::fprintf(stderr, "gradcomm-perf: rank %d: %s\n", s.ranks[0], s.error.c_str());
    return 1;
  }
  const char* op = is(s, "all_gather") || is(s, "broadcast") ? "none" : gcommRedOpName(s.o.op);
  int root = is(s, "broadcast") || is(s, "reduce") ? s.o.root : -1;
  long wrong = 0;
  for (const Row& r : s.rows) wrong += r.wrong[0] + r.wrong[1];
  if (!printer) return wrong ? 1 : 0;  // the same exit status on every rank
  double bw_sum = 0;
  for (const Row& r : s.rows) {
    std::printf("%13zu%14zu%10s%8s%8d%11.2f%8.2f%8.2f%7ld%11.2f%8.2f%8.2f%7ld\n", r.bytes, r.count, dtype_label(s.o.dtype),
                op, root, r.time_us[0], r.algbw[0], r.busbw[0], r.wrong[0], r.time_us[1], r.algbw[1], r.busbw[1],
                r.wrong[1]);
    bw_sum += r.busbw[0] + r.busbw[1];
  }
  double avg = s.rows.empty() ? 0 : bw_sum / (2.0 * s.rows.size());
  std::printf("# Out of bounds values : %ld %s\n# Avg bus bandwidth    : %g \n#\n", wrong, wrong ? "FAILED" : "OK", avg);
  if (!s.o.json_path.empty()) {
    FILE* f = std::fopen(s.o.json_path.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "gradcomm-perf: cannot write %s\n", s.o.json_path.c_str());
      return 1;
    }
    std::fprintf(f, "{\"tool\": \"gradcomm-perf\", \"version\": \"%s\", \"collective\": \"%s\", \"dtype\": \"%s\", "
                    "\"op\": \"%s\", \"root\": %d, \"nranks\": %d, \"transport\": \"%s\", \"device\": \"%s\", "
                    "\"iters\": %d, \"blocking\": %d, \"average\": \"%s\", \"avg_busbw\": %g, \"results\": [",
                 gcommGetVersionString(), s.o.collective.c_str(), dtype_label(s.o.dtype), op, root, s.nranks,
                 s.nccl ? "nccl" : s.launch == Launch::kProcessPerRank ? "socket" : "local", s.device.kind == gcommDeviceCuda ? "cuda" : "host", s.o.iters, s.o.blocking ? 1 : 0,
                 average_label(s.o.average), avg);
    for (size_t k = 0; k < s.rows.size(); ++k) {
      const Row& r = s.rows[k];
      std::fprintf(f, "%s\n {\"bytes\": %zu, \"count\": %zu, \"time_out_us\": %g, \"algbw_out\": %g, \"busbw_out\": %g, "
                      "\"wrong_out\": %ld, \"time_in_us\": %g, \"algbw_in\": %g, \"busbw_in\": %g, \"wrong_in\": %ld",
                   k ? "," : "", r.bytes, r.count, r.time_us[0], r.algbw[0], r.busbw[0], r.wrong[0], r.time_us[1],
                   r.algbw[1], r.busbw[1], r.wrong[1]);
      for (int p = 0; p < 2; ++p) {
        std::fprintf(f, ", \"rank_time_%s_us\": [", p == 0 ? "out" : "in");
        for (size_t q = 0; q < r.rank_us[p].size(); ++q) std::fprintf(f, "%s%g", q ? ", " : "", r.rank_us[p][q]);
        std::fprintf(f, "]");
      }
      std::fprintf(f, "}");
    }
    std::fprintf(f, "\n]}\n");
    std::fclose(f);
  }
  return wrong ? 1 : 0;
}
