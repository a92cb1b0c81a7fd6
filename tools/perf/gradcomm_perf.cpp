// gradcomm-perf: a bandwidth checker with nccl-tests' options, header, table and
// JSON (perf_options.hpp, perf_json.hpp), on gradcomm's public C API. With GPUs:
// one NCCL rank per GPU (-t x -g, default all), each driven by its own thread;
// --local N: N ranks as threads on the local transport (on GPU 0, or on the host,
// the default without a GPU). Under a launcher (a world size above 1 in the
// environment) each process is one rank (gcommCommInitFromEnv: NCCL, cuda-ipc
// for processes sharing one GPU, or shm/socket without a GPU). After each size the ranks all-gather their
// times and #wrong, and rank 0 prints the row at once.
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "common/launcher_env.hpp"
#include "gradcomm/gradcomm.h"
#include "perf_format.hpp"
#include "perf_iterations.hpp"
#include "perf_json.hpp"
#include "perf_memory.hpp"
#include "perf_options.hpp"

namespace {

using Clock = std::chrono::steady_clock;

enum class Launch { kGpusOfThisProcess, kLocal, kProcessPerRank };

// One (datatype, op) of the sweep (-d all, -o all), and its sizes.
struct Case {
  gcommDataType_t dtype;
  gcommRedOp_t op;
};

// What one rank measured for one size and placement, all-gathered to every rank.
struct RankResult {
  double us = 0, cpu_us = 0;  // per call: to completion, and to issue (-C)
  long long wrong = 0;
  std::vector<double> iter_us;  // -I: each timed iteration (its -m calls), µs
};
constexpr int kResultFloats = 4;  // us, cpu_us, wrong / 4096, wrong % 4096 (exact in float)
constexpr int kLineChars = 160;   // a rank's device line, one float per character

struct Setup {
  PerfOptions o;
  Launch launch = Launch::kLocal;
  int nranks = 2;
  gcommDevice_t device = gcommHostDevice();  // kLocal: where the local ranks run
  bool nccl = false;
  std::string transport;           // one process per rank: "nccl", "socket" or "mpi" (GRADCOMM_TRANSPORT)
  std::vector<gcommComm_t> comms;  // this process's ranks
  std::vector<int> ranks;          // their ranks in the world
  std::vector<std::string> device_lines;  // every rank's "Rank .. Group .. Pid .. on .." line
  std::atomic<bool> failed{false};
  std::mutex error_mutex;
  std::string error;
  PerfJson json;
  // Rank 0's running totals for the footer.
  long long wrong_total = 0;
  double bw_sum = 0;
  // Every process: the #wrong of every row (all-gathered), for the same exit status everywhere.
  std::atomic<long long> wrong_seen{0};
  std::string json_error;         // rank 0: the -J file could not be created
  std::string start_error;        // a rank of this process could not start: its own reason
  std::atomic<int> exit_code{1};  // on failure: 2 when the ranks refused to start
  int bw_count = 0;
  // -M: memory in use at the last mark (perf_memory.hpp), and the report so far.
  int64_t memory_mark = 0;
  MemoryReport memory;
};

bool is(const Setup& s, const char* c) {
  return s.o.collective == c;
}
size_t esize(gcommDataType_t d) {
  return d == gcommFloat32 ? 4 : 2;
}

double bus_factor(const Setup& s) {
  double n = s.nranks;
  if (is(s, "all_reduce")) return 2.0 * (n - 1) / n;
  if (is(s, "all_gather") || is(s, "reduce_scatter") || is(s, "alltoall")) return (n - 1) / n;
  return 1.0;
}

// Small integers, different in each check round: every sum over up to 64 ranks
// is exact in every dtype.
float value(int rank, size_t i, int round) {
  return static_cast<float>(static_cast<int>((rank * 3 + i + round * 5) % 11) - 5);
}

float reduce_values(const Setup& s, const Case& c, size_t i, int round) {
  float acc = value(0, i, round);
  for (int q = 1; q < s.nranks; ++q) {
    float v = value(q, i, round);
    acc = c.op == gcommMax ? std::max(acc, v) : c.op == gcommMin ? std::min(acc, v) : acc + v;
  }
  return c.op == gcommAvg ? acc / s.nranks : acc;
}

// Records the first error (and, for a rank of this process that could not start,
// its own reason, which its process reports).
void record_failure(Setup& s, const std::string& what, const std::string& own_reason = "") {
  std::lock_guard<std::mutex> lock(s.error_mutex);
  if (s.error.empty()) s.error = what;
  if (!own_reason.empty()) s.start_error = own_reason;
  s.failed = true;
}

// A failure during the sweep: recorded, and this process's communicators aborted,
// so that the other ranks' next collective fails at once instead of at its timeout.
void fail_with(Setup& s, const std::string& what) {
  const bool first = !s.failed.load();
  record_failure(s, what);
  if (first)
    for (gcommComm_t c : s.comms) gcommCommAbort(c);
}

#define PERF_CHECK(setup, call)                                                                  \
  do {                                                                                           \
    gcommStatus_t st_ = (call);                                                                  \
    if (st_ != gcommSuccess) {                                                                   \
      fail_with(setup, std::string(gcommGetLastError()) + " (" + gcommGetStatusName(st_) + ")"); \
      return false;                                                                              \
    }                                                                                            \
  } while (0)

// One rank's buffers, on the rank's device.
struct Buffers {
  bool gpu;
  void* send = nullptr;
  void* recv = nullptr;
  Buffers(bool on_gpu, size_t bytes) : gpu(on_gpu) {
    if (gpu) {
      if (cudaMalloc(&send, bytes) != cudaSuccess || cudaMalloc(&recv, bytes) != cudaSuccess)
        send = recv = nullptr;
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

// Host bytes into device memory, landed on return. A pageable cudaMemcpy may return
// before its DMA lands, and the collectives run on a non-blocking stream, which is
// not ordered after it: on the H100 (2026-11-27) out-of-place 512 KiB rows read the
// previous round's data (#wrong in 5 of 13 runs; nccl-tests fills on its stream).
bool upload(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream) == cudaSuccess &&
         cudaStreamSynchronize(stream) == cudaSuccess;
}

// Host floats to the dtype's bits at dst (device or host) and back, through the
// library's own conversion (gcommCast on the host: round to nearest even).
bool fill(const Case& c, void* dst, int rank, size_t count, int round, bool gpu, cudaStream_t stream) {
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = value(rank, i, round);
  std::vector<unsigned char> typed(count * esize(c.dtype) + 1);
  if (gcommCast(values.data(), gcommFloat32, typed.data(), c.dtype, count, gcommHostDevice(), nullptr) !=
      gcommSuccess)
    return false;
  if (gpu) return upload(dst, typed.data(), count * esize(c.dtype), stream);
  std::memcpy(dst, typed.data(), count * esize(c.dtype));
  return true;
}

std::vector<float> fetch(const Case& c, const void* src, size_t count, bool gpu) {
  std::vector<unsigned char> typed(count * esize(c.dtype) + 1);
  if (gpu)
    cudaMemcpy(typed.data(), src, count * esize(c.dtype), cudaMemcpyDeviceToHost);
  else
    std::memcpy(typed.data(), src, count * esize(c.dtype));
  std::vector<float> f(count, std::nanf(""));  // NaN (counted wrong) if the conversion failed
  (void)gcommCast(typed.data(), c.dtype, f.data(), gcommFloat32, count, gcommHostDevice(), nullptr);
  return f;
}

long long count_wrong(const Setup& s, const Case& c, int rank, const std::vector<float>& got, size_t count,
                      int round) {
  double tol = c.op != gcommAvg          ? 0.0
               : c.dtype == gcommFloat32 ? 1e-6
               : c.dtype == gcommFloat16 ? 2e-3
                                         : 1e-2;
  long long wrong = 0;
  auto bad = [&](float g, float e) { return !(std::fabs(g - e) <= tol * std::max(1.0f, std::fabs(e))); };
  if (is(s, "all_gather")) {
    for (int q = 0; q < s.nranks; ++q)
      for (size_t i = 0; i < count; ++i) wrong += bad(got[q * count + i], value(q, i, round));
  } else if (is(s, "alltoall")) {
    // Block q came from rank q, which sent its block `rank`.
    for (int q = 0; q < s.nranks; ++q)
      for (size_t i = 0; i < count; ++i) wrong += bad(got[q * count + i], value(q, rank * count + i, round));
  } else if (is(s, "reduce_scatter")) {
    for (size_t i = 0; i < count; ++i) wrong += bad(got[i], reduce_values(s, c, rank * count + i, round));
  } else if (is(s, "sendrecv")) {
    const int left = (rank + s.nranks - 1) % s.nranks;
    for (size_t i = 0; i < count; ++i) wrong += bad(got[i], value(left, i, round));
  } else if (is(s, "broadcast")) {
    for (size_t i = 0; i < count; ++i) wrong += bad(got[i], value(s.o.root, i, round));
  } else if (is(s, "reduce") && rank != s.o.root) {
    return 0;
  } else {
    for (size_t i = 0; i < count; ++i) wrong += bad(got[i], reduce_values(s, c, i, round));
  }
  return wrong;
}

// sendrecv_perf's pattern: a send to the right and a receive from the left, in one group.
gcommStatus_t send_right_receive_left(const Setup& s, const Case& k, gcommComm_t c, int rank,
                                      const void* send, void* recv, size_t count, gcommStream_t stream) {
  gcommStatus_t st = gcommGroupStart();
  if (st != gcommSuccess) return st;
  st = gcommSend(c, send, count, k.dtype, (rank + 1) % s.nranks, stream);
  if (st == gcommSuccess) st = gcommRecv(c, recv, count, k.dtype, (rank + s.nranks - 1) % s.nranks, stream);
  const gcommStatus_t ended = gcommGroupEnd();  // closes the group whatever happened
  return st != gcommSuccess ? st : ended;
}

gcommStatus_t issue(const Setup& s, const Case& k, gcommComm_t c, int rank, const void* send, void* recv,
                    size_t count, cudaStream_t st) {
  auto stream = reinterpret_cast<gcommStream_t>(st);
  if (is(s, "sendrecv")) return send_right_receive_left(s, k, c, rank, send, recv, count, stream);
  if (is(s, "all_gather")) return gcommAllGather(c, send, recv, count, k.dtype, stream);
  if (is(s, "reduce_scatter")) return gcommReduceScatter(c, send, recv, count, k.dtype, k.op, stream);
  if (is(s, "alltoall")) return gcommAllToAll(c, send, recv, count, k.dtype, stream);
  if (is(s, "broadcast")) return gcommBroadcast(c, send, recv, count, k.dtype, s.o.root, stream);
  if (is(s, "reduce")) return gcommReduce(c, send, recv, count, k.dtype, k.op, s.o.root, stream);
  return gcommAllReduce(c, send, recv, count, k.dtype, k.op, stream);
}

// A small float all-gather of host data through a communicator of any device.
// Values are small integers or times, exact enough in float.
bool gather_floats(gcommComm_t c, const std::vector<float>& mine, int world, std::vector<float>& out,
                   std::string& error) {
  gcommDevice_t dev = gcommHostDevice();
  gcommCommDevice(c, &dev);
  const size_t n = mine.size(), total = n * world;
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
    if (!upload(send, mine.data(), n * sizeof(float), nullptr)) {
      cudaFree(send);
      error = "cannot copy " + std::to_string(n * sizeof(float)) + " bytes to the GPU";
      return false;
    }
  }
  gcommStatus_t st = gcommAllGather(c, send, recv, n, gcommFloat32, nullptr);
  if (st == gcommSuccess) st = gcommCommSynchronize(c);
  if (st != gcommSuccess) error = gcommGetLastError();
  if (gpu) {
    if (st == gcommSuccess &&
        cudaMemcpy(out.data(), recv, total * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess) {
      st = gcommCudaError;
      error = "cannot copy the gathered values back from the GPU";
    }
    cudaFree(send);
  }
  return st == gcommSuccess;
}

// The reported time over the ranks (nccl-tests' -a).
double aggregate(const std::vector<double>& t, int average) {
  if (average == 1) return std::accumulate(t.begin(), t.end(), 0.0) / t.size();
  if (average == 2) return *std::min_element(t.begin(), t.end());
  if (average == 3) return *std::max_element(t.begin(), t.end());
  return t[0];
}

// Rank 0: ends a table row (timestamp, newline) and writes it to the JSON.
void finish_row(Setup& s, nlohmann::json& row) {
  if (s.o.report_timestamps) {
    const std::string now = PerfJson::now();
    std::printf("%21s", now.c_str());
    row["timestamp"] = now;
  }
  std::printf("\n");
  std::fflush(stdout);
  row["actual_iterations"] = s.o.iters;
  row["experiment_name"] = "";
  s.json.add_result(row);
  s.json.flush();
}

// Rank 0: one half of a row (out of place, then in place) on stdout and in the JSON.
void print_half(Setup& s, const Case& c, size_t bytes, size_t count, bool in_place,
                const std::vector<RankResult>& all, nlohmann::json& row,
                const std::vector<std::vector<double>>& iter_rows) {
  std::vector<double> times;
  for (const RankResult& r : all) times.push_back(r.us);
  long long wrong = 0;
  for (const RankResult& r : all) wrong += r.wrong;
  // As nccl-tests: the bandwidths always come from the completion time (-a's
  // aggregate over the ranks); -C shows rank 0's own time to issue the calls.
  const double done_us = aggregate(times, s.o.average);
  const double us = s.o.report_cputime ? all[0].cpu_us : done_us;
  const double algbw = static_cast<double>(bytes) / done_us / 1e3, busbw = algbw * bus_factor(s);
  if (!in_place) {
    const bool rooted = is(s, "broadcast") || is(s, "reduce");
    const char* op = is(s, "all_gather") || is(s, "broadcast") || is(s, "alltoall") || is(s, "sendrecv")
                         ? "none"
                         : op_label(c.op);
    char root[16];
    std::snprintf(root, sizeof(root), "%6i", rooted ? s.o.root : -1);
    std::printf("%12zu  %12zu  %8s  %6s  %6s", bytes, count, dtype_label(c.dtype), op, root);
    row = {{"size", bytes}, {"count", count}, {"type", dtype_label(c.dtype)}, {"redop", op}, {"root", root}};
  }
  if (s.o.check > 0)
    std::printf("  %7s  %6s  %6s  %6g", fit(us, 7).c_str(), fit(algbw, 6).c_str(), fit(busbw, 6).c_str(),
                static_cast<double>(wrong));
  else
    std::printf("  %7s  %6s  %6s    N/A", fit(us, 7).c_str(), fit(algbw, 6).c_str(), fit(busbw, 6).c_str());
  nlohmann::json half = {
      {s.o.report_cputime ? "cpu_time" : "time", us},
      {"alg_bw", algbw},
      {"bus_bw", busbw},
      {"nwrong", s.o.check > 0 ? nlohmann::json(static_cast<double>(wrong)) : nlohmann::json()}};
  row[in_place ? "in_place" : "out_of_place"] = half;
  if (s.o.per_iter) {  // the maximum over the ranks per iteration, as nccl-tests' process rows
    const std::vector<double> worst = max_over_ranks(iter_rows);
    const IterStats st = iteration_stats(worst, s.o.per_iter_skip);
    std::printf("%s", iteration_columns(st).c_str());
    row[in_place ? "in_place_per_iter" : "out_of_place_per_iter"] =
        iteration_json(st, worst, s.o.per_iter_skip, iter_rows);
  }
  row["gradcomm_rank_times_us"][in_place ? "in_place" : "out_of_place"] = times;
  s.wrong_total += wrong;
  s.bw_sum += busbw;
  ++s.bw_count;
  if (in_place) finish_row(s, row);
}

// Why a collective has no in-place half here, or null.
const char* no_in_place(const Setup& s) {
  if (is(s, "alltoall")) return "all-to-all has no in-place variant";
  if (is(s, "sendrecv")) return "a buffer sent must not be received into in the same group";
  return nullptr;
}

// Rank 0: an in-place half that cannot run: nccl-tests' N/A in every column.
void print_unavailable_half(Setup& s, nlohmann::json& row) {
  std::printf("  %7s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A");
  if (s.o.per_iter) std::printf("  %7s  %7s  %7s  %7s", "N/A", "N/A", "N/A", "N/A");
  row["in_place"] = nullptr;
  row["gradcomm_note"] = no_in_place(s);
  finish_row(s, row);
}

struct RankState {
  gcommComm_t comm;
  int rank;
  bool gpu;
  cudaStream_t stream;
  Buffers* buf;
};

// Every rank's host waits until every rank got here: on a GPU the barrier goes on
// the rank's stream (behind its collectives) and the host waits for it.
bool barrier(Setup& s, RankState& r) {
  PERF_CHECK(s, gcommBarrier(r.comm, reinterpret_cast<gcommStream_t>(r.stream)));
  if (r.gpu && cudaStreamSynchronize(r.stream) != cudaSuccess)
    return fail_with(s, "cudaStreamSynchronize failed"), false;
  return true;
}

// -I: each iteration's time. Host: the steady clock around the iteration's calls
// (which complete before they return). GPU: a CUDA event pair around them on the
// rank's stream, read once the stream is synchronized, as nccl-tests does.
class IterationClock {
 public:
  IterationClock(bool on, bool gpu, cudaStream_t stream, int iters)
      : on_(on),
        gpu_(on && gpu),
        stream_(stream),
        host_(on && !gpu ? iters : 0),
        events_(gpu_ ? 2 * iters : 0) {
    for (cudaEvent_t& e : events_)
      if (cudaEventCreate(&e) != cudaSuccess) e = nullptr;
  }
  ~IterationClock() {
    for (cudaEvent_t e : events_)
      if (e != nullptr) cudaEventDestroy(e);
  }
  IterationClock(const IterationClock&) = delete;
  IterationClock& operator=(const IterationClock&) = delete;
  void start(int it) {
    if (gpu_)
      cudaEventRecord(events_[2 * it], stream_);
    else if (on_)
      started_ = Clock::now();
  }
  void stop(int it) {
    if (gpu_)
      cudaEventRecord(events_[2 * it + 1], stream_);
    else if (on_)
      host_[it] = std::chrono::duration<double, std::micro>(Clock::now() - started_).count();
  }
  // After the stream is synchronized: every iteration's µs.
  bool read(std::vector<double>& out) const {
    if (!gpu_) {
      out = host_;
      return true;
    }
    out.assign(events_.size() / 2, 0.0);
    for (size_t it = 0; it < out.size(); ++it) {
      float ms = 0;
      if (events_[2 * it] == nullptr || events_[2 * it + 1] == nullptr ||
          cudaEventElapsedTime(&ms, events_[2 * it], events_[2 * it + 1]) != cudaSuccess)
        return false;
      out[it] = ms * 1e3;
    }
    return true;
  }

 private:
  bool on_, gpu_;
  cudaStream_t stream_;
  std::vector<double> host_;
  std::vector<cudaEvent_t> events_;
  Clock::time_point started_{};
};

// Times -n iterations of -m calls each, as -z asks; fills us and cpu_us (and -I's iter_us).
bool time_calls(Setup& s, const Case& k, RankState& r, const void* send, void* recv, size_t count,
                RankResult& out) {
  auto sync = [&] { return !r.gpu || cudaStreamSynchronize(r.stream) == cudaSuccess; };
  const double calls = static_cast<double>(s.o.iters) * s.o.agg_iters;
  double coll_only_s = 0;
  IterationClock clock(s.o.per_iter, r.gpu, r.stream, s.o.iters);
  const auto t0 = Clock::now();
  for (int it = 0; it < s.o.iters; ++it) {
    const auto i0 = Clock::now();
    clock.start(it);
    if (s.o.agg_iters > 1) PERF_CHECK(s, gcommGroupStart());
    for (int a = 0; a < s.o.agg_iters; ++a)
      PERF_CHECK(s, issue(s, k, r.comm, r.rank, send, recv, count, r.stream));
    if (s.o.agg_iters > 1) PERF_CHECK(s, gcommGroupEnd());
    if (s.o.blocking != 0 && !sync()) return fail_with(s, "cudaStreamSynchronize failed"), false;
    clock.stop(it);
    if (s.o.blocking == 1 && !barrier(s, r)) return false;
    if (s.o.blocking == 3) {
      coll_only_s += std::chrono::duration<double>(Clock::now() - i0).count();
      if (!barrier(s, r)) return false;  // not timed (nccl-tests' -z 3)
    }
  }
  const double issued_s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!sync()) return fail_with(s, "cudaStreamSynchronize failed"), false;
  const double done_s = std::chrono::duration<double>(Clock::now() - t0).count();
  out.cpu_us = (s.o.blocking == 3 ? coll_only_s : issued_s) * 1e6 / calls;
  out.us = (s.o.blocking == 3 ? coll_only_s : done_s) * 1e6 / calls;
  if (s.o.per_iter && !clock.read(out.iter_us))
    return fail_with(s, "reading the per-iteration CUDA events failed"), false;
  return true;
}

// One size, out of place then in place, on one rank; rank 0 prints the row.
bool run_size(Setup& s, const Case& k, RankState& r, size_t size, nlohmann::json& row) {
  const size_t es = esize(k.dtype);
  const bool blocks = is(s, "all_gather") || is(s, "reduce_scatter") || is(s, "alltoall");
  // count: elements per rank block for all-gather / reduce-scatter, rounded down
  // to a multiple of 16 bytes, and shown as the count column, as nccl-tests does;
  // the size column is the whole buffer.
  const size_t total = size / es, count = blocks ? (total / s.nranks) & ~(16 / es - 1) : total;
  const size_t row_bytes = (blocks ? count * s.nranks : count) * es;
  for (int in_place = 0; in_place < 2; ++in_place) {
    if (in_place && no_in_place(s) != nullptr) {  // all-to-all: refused by gradcomm (NCCL has none either)
      if (r.rank == 0) print_unavailable_half(s, row);
      continue;
    }
    char* send = static_cast<char*>(r.buf->send) + s.o.unalign * es;
    char* recv = in_place ? send : static_cast<char*>(r.buf->recv) + s.o.unalign * es;
    if (in_place && is(s, "all_gather")) send = recv + r.rank * count * es;
    if (in_place && is(s, "reduce_scatter")) recv = send + r.rank * count * es;
    const size_t send_count = is(s, "reduce_scatter") || is(s, "alltoall") ? count * s.nranks : count;
    if (!fill(k, send, r.rank, send_count, 0, r.gpu, r.stream))
      return fail_with(s, "cannot fill the send buffer"), false;
    for (int w = 0; w < s.o.warmup; ++w)
      PERF_CHECK(s, issue(s, k, r.comm, r.rank, send, recv, count, r.stream));
    if (!barrier(s, r)) return false;
    RankResult mine;
    if (!time_calls(s, k, r, send, recv, count, mine)) return false;
    if (!barrier(s, r)) return false;
    // -c N: N rounds on fresh data, every one checked (the same calls on every rank).
    for (int round = 1; round <= s.o.check; ++round) {
      if (!fill(k, send, r.rank, send_count, round, r.gpu, r.stream))
        return fail_with(s, "cannot fill the send buffer"), false;
      PERF_CHECK(s, issue(s, k, r.comm, r.rank, send, recv, count, r.stream));
      if (r.gpu) cudaStreamSynchronize(r.stream);
      const size_t recv_count = is(s, "all_gather") || is(s, "alltoall") ? count * s.nranks : count;
      mine.wrong += count_wrong(s, k, r.rank, fetch(k, recv, recv_count, r.gpu), count, round);
    }
    std::vector<float> packed = {static_cast<float>(mine.us), static_cast<float>(mine.cpu_us),
                                 static_cast<float>(mine.wrong >> 12), static_cast<float>(mine.wrong & 4095)};
    std::vector<float> gathered;
    std::string error;
    if (!gather_floats(r.comm, packed, s.nranks, gathered, error))
      return fail_with(s, "gathering the ranks' times and #wrong: " + error), false;
    std::vector<RankResult> all(s.nranks);
    for (int q = 0; q < s.nranks; ++q) {
      const float* g = gathered.data() + q * kResultFloats;
      all[q] = RankResult{g[0], g[1], static_cast<long long>(g[2]) * 4096 + static_cast<long long>(g[3]), {}};
    }
    if (r.rank == s.ranks[0])
      for (const RankResult& q : all) s.wrong_seen += q.wrong;
    std::vector<std::vector<double>> iter_rows;  // -I: every rank's per-iteration times
    if (s.o.per_iter) {
      const std::vector<float> iters(mine.iter_us.begin(), mine.iter_us.end());
      std::vector<float> every;
      if (!gather_floats(r.comm, iters, s.nranks, every, error))
        return fail_with(s, "gathering the ranks' per-iteration times: " + error), false;
      for (int q = 0; q < s.nranks; ++q)
        iter_rows.emplace_back(every.begin() + q * s.o.iters, every.begin() + (q + 1) * s.o.iters);
    }
    if (r.rank == 0) print_half(s, k, row_bytes, count, in_place == 1, all, row, iter_rows);
  }
  return true;
}

std::vector<size_t> size_list(const PerfOptions& o) {
  std::vector<size_t> sizes;
  for (size_t b = o.min_bytes; b <= o.max_bytes;) {
    sizes.push_back(b);
    // A factor in double (a big one must end the sweep, not wrap a size_t),
    // truncated as nccl-tests does, but at least one byte more; a step in integers.
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

void print_table_header(const Setup& s) {
  const char* t = s.o.report_cputime ? "cputime" : "time";
  const char* ts = s.o.report_timestamps ? "timestamp" : "";
  const char* tsf = s.o.report_timestamps ? "%Y-%m-%d %H:%M:%S" : "";
  const int pad = s.o.report_timestamps ? 19 : 0;
  if (s.o.per_iter) {  // nccl-tests' -I header: four more columns per half
    std::printf(
        "#\n# %10s  %12s  %8s  %6s  %6s              out-of-place (+ per-iteration)                          "
        "      "
        "in-place (+ per-iteration)\n",
        "", "", "", "", "");
    std::printf(
        "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s  %7s  %6s  %6s  %6s  %7s  %7s  "
        "%7s  "
        "%7s %*s\n",
        "size", "count", "type", "redop", "root", t, "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99",
        "i_cv%", t, "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%", pad, ts);
    std::printf(
        "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s  %7s  %6s  %6s  %6s  %7s  %7s  "
        "%7s  "
        "%7s %*s\n",
        "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)",
        "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)", pad, tsf);
    return;
  }
  std::printf(
      "#\n# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "",
      "", "", "", "");
  std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "size", "count",
              "type", "redop", "root", t, "algbw", "busbw", "#wrong", t, "algbw", "busbw", "#wrong", pad, ts);
  std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "(B)",
              "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", pad,
              tsf);
}

// Rank 0: the header lines nccl-tests prints, and the JSON's top and config.
void print_header(Setup& s, int nthreads, int ngpus) {
  int built = 0, loaded = 0;
  if (gcommGetNcclVersion(&built, &loaded) != gcommSuccess) built = loaded = 0;  // no NCCL: host transports
  const PerfOptions& o = s.o;
  std::printf("# gradcomm-perf version %s nccl-headers=%d nccl-library=%d\n", gcommGetVersionString(), built,
              loaded);
  std::printf("# Collective test starting: gradcomm-perf --collective %s\n", o.collective.c_str());
  std::printf(
      "# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %g(%s) warmup iters: %d iters: %d agg iters: %d "
      "validation: %d graph: 0 unalign: %d\n",
      nthreads, ngpus, o.min_bytes, o.max_bytes,
      o.step_factor > 0 ? o.step_factor : static_cast<double>(o.step_bytes),
      o.step_factor > 0 ? "factor" : "bytes", o.warmup, o.iters, o.agg_iters, o.check, o.unalign);
  if (o.blocking == 1) std::printf("# Blocking Enabled: wait and barrier after each inner iteration (-m) \n");
  if (o.blocking == 2) std::printf("# Blocking Enabled: wait after each inner iteration (-m), no barrier \n");
  if (o.blocking == 3)
    std::printf(
        "# Blocking Enabled: wait and barrier after each outer iteration (-n); time excludes barrier \n");
  if (o.per_iter) {
    std::printf("# Per-Iteration Report: %s timing; i_* uses max over process rows",
                s.device.kind == gcommDeviceCuda ? "CUDA event" : "host clock");
    if (o.per_iter_skip > 0) std::printf("; summary skips first %d iterations", o.per_iter_skip);
    std::printf(" \n");
  }
  std::printf("#\n");
  if (s.launch == Launch::kProcessPerRank)
    std::printf("# Transport: %s (%d ranks, one per process)\n", s.transport.c_str(), s.nranks);
  else if (s.nccl)
    std::printf("# Transport: nccl (%d rank(s), one per GPU, threads of one process)\n", s.nranks);
  else
    std::printf(
        "# Transport: local (%d ranks as threads of one process) on %s\n", s.nranks,
        s.device.kind == gcommDeviceCuda ? ("cuda:" + std::to_string(s.device.ordinal)).c_str() : "the host");
  if (!s.nccl && s.device.kind != gcommDeviceCuda)
    std::printf("# (no GPU: the figures are host memory%s, not GPU bandwidth)\n",
                s.launch != Launch::kProcessPerRank ? " copies"
                : s.transport == "mpi"              ? " and MPI's wire"
                                                    : " and TCP loopback or network");
  std::printf("# Time reported: %s over the ranks (-a %d)\n", average_label(o.average), o.average);
  std::printf("# Using devices\n");
  for (const std::string& line : s.device_lines) std::printf("%s\n", line.c_str());
  print_table_header(s);
  std::fflush(stdout);

  if (!s.json.active()) return;
  using nlohmann::json;
  json& d = s.json.doc();
  d["version"] = 3;
  d["start_time"] = PerfJson::now();
  d["args"] = o.args;
  d["env"] = json::array();
  for (char** e = environ; *e != nullptr; ++e) d["env"].push_back(*e);
  d["nccl_version"] = loaded;
  json c = {{"nthreads", nthreads},
            {"ngpus", ngpus},
            {"minimum_bytes", o.min_bytes},
            {"maximum_bytes", o.max_bytes}};
  if (o.step_factor > 0)
    c["step_factor"] = o.step_factor;
  else
    c["step_bytes"] = o.step_bytes;
  c["warmup_iters"] = o.warmup;
  c["iterations"] = o.iters;
  c["aggregated_iterations"] = o.agg_iters;
  c["validation"] = o.check;
  c["graph"] = 0;
  c["blocking_collectives"] = PerfJson::flag(o.blocking != 0);
  c["per_iter_timing"] = PerfJson::flag(o.per_iter);
  c["per_iter_skip"] = o.per_iter_skip;
  c["parallel_init"] = PerfJson::flag(false);
  c["devices"] = json::array();
  for (const std::string& line : s.device_lines) {
    json dev;
    int rank = 0, group = 0, pid = 0, device = 0, end = 0;
    char host[128] = {}, hex[64] = {};
    if (std::sscanf(line.c_str(), "#  Rank %d Group %d Pid %d on %127s device %d [%63[^]]] %n", &rank, &group,
                    &pid, host, &device, hex, &end) >= 6)
      dev = {{"rank", rank},
             {"group", group},
             {"pid", pid},
             {"hostname", host},
             {"device", device},
             {"device_hex", hex},
             {"device_info", line.substr(end)}};
    c["devices"].push_back(dev);
  }
  d["config"] = c;
  d["gradcomm"] = {{"collective", o.collective},
                   {"transport", s.launch == Launch::kProcessPerRank ? s.transport
                                 : s.nccl                            ? "nccl"
                                                                     : "local"},
                   {"nranks", s.nranks},
                   {"device", s.device.kind == gcommDeviceCuda ? "cuda" : "host"},
                   {"blocking", o.blocking},
                   {"average", average_label(o.average)},
                   {"report_cputime", o.report_cputime}};
  d["results"] = json::array();
  s.json.flush();
}

// This rank's line for "# Using devices", as nccl-tests prints it.
std::string device_line(int rank, gcommDevice_t dev) {
  char host[64] = {};
  gethostname(host, sizeof(host) - 1);
  char line[kLineChars + 64];
  if (dev.kind == gcommDeviceCuda) {
    char bus[32] = "?";
    cudaDeviceProp prop{};
    (void)cudaDeviceGetPCIBusId(bus, sizeof(bus), dev.ordinal);
    if (cudaGetDeviceProperties(&prop, dev.ordinal) != cudaSuccess) std::strcpy(prop.name, "?");
    (void)cudaGetLastError();
    std::string b = bus;
    if (b.size() > 2 && b[b.size() - 2] == '.') b.resize(b.size() - 2);  // "0000:01:00.0" -> nccl-tests' form
    std::snprintf(line, sizeof(line), "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %.96s", rank, 0,
                  static_cast<int>(getpid()), host, dev.ordinal, b.c_str(), prop.name);
  } else {
    std::snprintf(line, sizeof(line), "#  Rank %2d Group %2d Pid %6d on %10s device %2d [host] host memory",
                  rank, 0, static_cast<int>(getpid()), host, -1);
  }
  std::string out(line);
  if (out.size() > kLineChars) out.resize(kLineChars);
  return out;
}

// What fixes the sequence of collectives a rank issues (FNV-1a): ranks given
// different options would disagree on a collective part way through the sweep,
// or one would finish early and exit 0; they are refused before the sweep.
uint32_t sweep_hash(const PerfOptions& o, const std::vector<size_t>& sizes) {
  std::string text = o.collective;
  for (size_t b : sizes) text += "," + std::to_string(b);
  for (gcommDataType_t d : o.dtypes) text += "d" + std::to_string(static_cast<int>(d));
  for (gcommRedOp_t op : o.ops) text += "o" + std::to_string(static_cast<int>(op));
  for (int v :
       {o.iters, o.agg_iters, o.warmup, o.cycles, o.check, o.blocking, o.root, o.unalign, o.per_iter ? 1 : 0})
    text += ";" + std::to_string(v);
  uint32_t h = 2166136261u;
  for (unsigned char c : text) h = (h ^ c) * 16777619u;
  return h;
}

// The ranks meet before the sweep (one all-gather per rank, each on its own
// thread): every rank's device line for the header, a hash of its sweep options,
// and whether it can run (its buffers, rank 0's -J file). Every rank computes the
// same verdict, so all stop together, at once, when one cannot run or was given
// other options; rank 0's thread then prints the header.
bool meet(Setup& s, RankState& r, uint32_t hash, const std::string& why_not) {
  gcommDevice_t dev = gcommHostDevice();
  gcommCommDevice(r.comm, &dev);
  const std::string line = device_line(r.rank, dev);
  const int stride = kLineChars + 3;
  std::vector<float> mine(stride, 0.0f);
  for (size_t c = 0; c < line.size(); ++c) mine[c] = static_cast<unsigned char>(line[c]);
  mine[kLineChars] = static_cast<float>(hash >> 16);  // 16 bits each: exact in float
  mine[kLineChars + 1] = static_cast<float>(hash & 0xffff);
  mine[kLineChars + 2] = why_not.empty() ? 1.0f : 0.0f;
  std::vector<float> all;
  std::string error;
  if (!gather_floats(r.comm, mine, s.nranks, all, error))
    return fail_with(s, "meeting the other ranks: " + error), false;
  auto hash_of = [&](int q) {
    const float* g = all.data() + q * stride;
    return (static_cast<uint32_t>(g[kLineChars]) << 16) | static_cast<uint32_t>(g[kLineChars + 1]);
  };
  std::string differ, cannot;
  std::vector<std::string> lines;
  for (int q = 0; q < s.nranks; ++q) {
    const float* g = all.data() + q * stride;
    std::string text;
    for (int c = 0; c < kLineChars && g[c] != 0.0f; ++c) text += static_cast<char>(static_cast<int>(g[c]));
    lines.push_back(text);
    if (hash_of(q) != hash_of(0)) differ += (differ.empty() ? "" : ", ") + std::to_string(q);
    if (g[kLineChars + 2] == 0.0f) cannot += (cannot.empty() ? "" : ", ") + std::to_string(q);
  }
  // The verdicts are the same on every rank and no rank waits in a collective any
  // more: recorded without aborting (an abort could reach another thread of this
  // process still finishing the all-gather).
  if (!cannot.empty()) {
    s.exit_code = 2;
    record_failure(s, "rank " + cannot + " could not start (its own message says why)", why_not);
    return false;
  }
  if (!differ.empty()) {
    s.exit_code = 2;
    record_failure(s, "rank " + differ +
                          " was given other options than rank 0 (sizes, -n, -w, -m, -c, -z, -r, -u, "
                          "-d, -o, -N or --collective): every rank must run the same sweep");
    return false;
  }
  if (r.rank == 0) {
    s.device_lines = lines;
    print_header(s, static_cast<int>(s.comms.size()), s.device.kind == gcommDeviceCuda ? 1 : 0);
    if (s.json.active()) std::printf("# Writing JSON output to %s\n", s.json.path().c_str());
    std::fflush(stdout);
  }
  return true;
}

// Creates this process's communicators; false (with the message printed) on failure.
bool init(Setup& s, int gpus) {
  gcommCommConfig_t cfg = GCOMM_COMM_CONFIG_INITIALIZER;
  if (s.o.timeout_s > 0) cfg.timeout_s = s.o.timeout_s;
  if (s.launch == Launch::kProcessPerRank) {
    // Without a GPU host ranks (shm or socket); with one, the GPU of the local rank,
    // modulo the visible GPUs: more processes than GPUs share them (cuda-ipc).
    cfg.device =
        gpus == 0 ? gcommHostDevice() : gcommCudaDevice(gradcomm::bench::launcher_local_rank() % gpus);
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
    s.transport = gcommGetTransportName(kind);
    s.comms = {c};
    s.ranks = {rank};
    return true;
  }
  s.comms.assign(s.nranks, nullptr);
  gcommStatus_t st = s.nccl ? gcommCommInitAll(s.nranks, nullptr, s.comms.data())
                            : gcommCommInitLocal(s.nranks, s.device, &cfg, s.comms.data());
  if (st != gcommSuccess) {
    std::fprintf(stderr, "gradcomm-perf: %s\n", gcommGetLastError());
    return false;
  }
  for (int r = 0; r < s.nranks; ++r) s.ranks.push_back(r);
  return true;
}

// One rank's thread: every cycle, case and size.
void rank_main(Setup& s, size_t index, const std::vector<size_t>& sizes, const std::vector<Case>& cases,
               uint32_t hash) {
  RankState r{s.comms[index], s.ranks[index], false, nullptr, nullptr};
  gcommDevice_t dev = gcommHostDevice();
  gcommCommDevice(r.comm, &dev);
  r.gpu = dev.kind == gcommDeviceCuda;
  if (r.gpu) {
    cudaSetDevice(dev.ordinal);
    if (!s.o.stream_null) cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking);
  }
  const size_t bytes = s.o.max_bytes + (static_cast<size_t>(s.o.unalign) + 16) * 4;
  Buffers buf(r.gpu, bytes);
  // -M on the host: touched now, so that they are resident when measured (calloc's pages are not).
  if (s.o.memory_report && !r.gpu && buf.send != nullptr && buf.recv != nullptr) {
    std::memset(buf.send, 0, bytes);
    std::memset(buf.recv, 0, bytes);
  }
  std::string why_not;
  if (buf.send == nullptr || buf.recv == nullptr)
    why_not =
        "cannot allocate two buffers of " + std::to_string(bytes) + " bytes" + (r.gpu ? " on the GPU" : "");
  if (r.rank == 0 && !s.json_error.empty()) why_not = s.json_error;
  if (!meet(s, r, hash, why_not)) return;
  // -M: after the meeting every rank of this process has its buffers.
  const int memory_device = r.gpu ? dev.ordinal : -1;
  if (s.o.memory_report && index == 0) {
    const int64_t now = memory_in_use(memory_device);
    s.memory.buffers = std::max<int64_t>(0, now - s.memory_mark);
    s.memory_mark = now;
  }
  r.buf = &buf;
  const bool progress =
      r.rank == 0 && isatty(STDOUT_FILENO) == 0 && isatty(STDERR_FILENO) && sizes.size() > 8;
  for (int cycle = 0; (s.o.cycles == 0 || cycle < s.o.cycles) && !s.failed; ++cycle)
    for (const Case& k : cases)
      for (size_t i = 0; i < sizes.size() && !s.failed; ++i) {
        nlohmann::json row;
        if (!run_size(s, k, r, sizes[i], row)) break;
        // Rows go to stdout as they complete; when stdout is a file, show progress on the terminal.
        if (progress) std::fprintf(stderr, "\r  [%zu/%zu] %zu bytes done   ", i + 1, sizes.size(), sizes[i]);
      }
  if (progress) std::fprintf(stderr, "\r%40s\r", "");
  if (s.o.memory_report && index == 0)
    s.memory.collective = std::max<int64_t>(0, memory_in_use(memory_device) - s.memory_mark);
  if (r.gpu && r.stream != nullptr) cudaStreamDestroy(r.stream);
}

}  // namespace

int main(int argc, char** argv) {
  Setup s;
  int exit_code = 0;
  if (!parse_perf_options(argc, argv, s.o, exit_code)) return exit_code;
  int gpus = 0;
  gcommGetCudaDeviceCount(&gpus);
  const int want_gpus = s.o.gpus > 0 ? s.o.threads * s.o.gpus : 0;
  if (want_gpus > gpus && s.o.local_ranks == 0) {
    std::fprintf(stderr, "gradcomm-perf: -t %d -g %d asks for %d GPU(s) but %d are visible\n", s.o.threads,
                 s.o.gpus, want_gpus, gpus);
    return 2;
  }
  // --local wins; else a launcher's world makes each process one rank; else
  // NCCL on the GPUs of this process, or local host ranks without a GPU.
  int world = 0;
  if (!gradcomm::bench::launcher_world_size("gradcomm-perf", world)) return 2;
  if (s.o.local_ranks > 0)
    s.launch = Launch::kLocal;
  else if (world > 1)
    s.launch = Launch::kProcessPerRank;
  else
    s.launch = gpus > 0 ? Launch::kGpusOfThisProcess : Launch::kLocal;
  if (s.launch == Launch::kProcessPerRank && (want_gpus > 1 || s.o.threads > 1)) {
    std::fprintf(stderr,
                 "gradcomm-perf: -t %d -g %d under a launcher (world size %d): each process is one rank "
                 "and drives one GPU\n",
                 s.o.threads, std::max(s.o.gpus, 1), world);
    return 2;
  }
  s.nccl = s.launch == Launch::kGpusOfThisProcess;
  if (s.o.local_ranks > 0)
    s.nranks = s.o.local_ranks;
  else if (s.nccl)
    s.nranks = want_gpus > 0 ? want_gpus : gpus;
  else
    s.nranks = s.o.threads > 1 ? s.o.threads : 2;
  s.device = gpus > 0 ? gcommCudaDevice(0) : gcommHostDevice();
  if (gpus == 0) {
    // Host runs copy through host memory on a few cores: keep the default sweep short.
    if (!s.o.iters_given) s.o.iters = 5;
    if (!s.o.warmup_given) s.o.warmup = std::min(s.o.warmup, 1);
  }
  if (s.o.per_iter && s.o.per_iter_skip >= s.o.iters) {
    std::fprintf(stderr,
                 "gradcomm-perf: -K %d: the per-iteration skip must be below the iterations (-n %d)\n",
                 s.o.per_iter_skip, s.o.iters);
    return 2;
  }
  // -M: under a launcher the process's GPU is known only once its communicator exists.
  const bool gpu_unknown_before_init = s.launch == Launch::kProcessPerRank && gpus > 0;
  if (s.o.memory_report && !gpu_unknown_before_init) s.memory_mark = memory_in_use(gpus > 0 ? 0 : -1);
  if (!init(s, gpus)) return 1;
  if (s.o.memory_report) {
    gcommDevice_t first = gcommHostDevice();
    gcommCommDevice(s.comms[0], &first);
    s.memory.gpu = first.kind == gcommDeviceCuda;
    const int64_t now = memory_in_use(s.memory.gpu ? first.ordinal : -1);
    s.memory.init = std::max<int64_t>(0, now - s.memory_mark);
    s.memory_mark = now;
  }
  const bool printer = s.ranks[0] == 0;  // the process of rank 0 prints
  auto finish = [&](int code) {
    for (gcommComm_t c : s.comms) gcommCommDestroy(c);
    return code;
  };
  if (s.o.root >= s.nranks) {
    if (printer)
      std::fprintf(stderr, "gradcomm-perf: root %d is not a rank (0..%d)\n", s.o.root, s.nranks - 1);
    return finish(2);
  }
  // Rank 0's -J file is created before the sweep (a path that cannot be created
  // stops every rank at the meeting, not after the sweep).
  if (printer && !s.o.json_path.empty()) (void)s.json.create(s.o.json_path, s.json_error);
  const std::vector<size_t> sizes = size_list(s.o);
  const uint32_t hash = sweep_hash(s.o, sizes);
  std::vector<Case> cases;
  for (gcommDataType_t d : s.o.dtypes)
    for (gcommRedOp_t op : s.o.ops) cases.push_back({d, op});
  std::vector<std::thread> threads;
  for (size_t i = 0; i < s.comms.size(); ++i)
    threads.emplace_back([&, i] { rank_main(s, i, sizes, cases, hash); });
  for (auto& t : threads) t.join();
  // Every rank learned the #wrong of every row; the same exit status everywhere.
  if (s.failed) {
    std::fflush(stdout);
    std::fprintf(stderr, "gradcomm-perf: rank %d: %s\n", s.ranks[0],
                 (s.start_error.empty() ? s.error : s.start_error).c_str());
    if (printer && s.json.active()) {
      s.json.doc()["errors"] = {s.error};
      s.json.flush();
    }
    return finish(s.exit_code);
  }
  if (!printer) return finish(s.wrong_seen ? 1 : 0);
  const double avg = s.bw_count ? s.bw_sum / s.bw_count : 0;
  std::printf("# %-20s : %lld %s\n", "Out of bounds values", s.wrong_total, s.wrong_total ? "FAILED" : "OK");
  std::printf("# %-20s : %g \n#\n", "Avg bus bandwidth", avg);
  std::printf("# Collective test concluded: gradcomm-perf --collective %s\n", s.o.collective.c_str());
  if (s.o.memory_report) std::printf("%s", memory_report_line(s.memory).c_str());
  if (s.json.active()) {
    nlohmann::json& d = s.json.doc();
    d["out_of_bounds"] = {{"count", s.wrong_total}, {"okay", PerfJson::flag(s.wrong_total == 0)}};
    d["average_bus_bandwidth"] = {{"bandwidth", avg}, {"okay", "unchecked"}};
    d["errors"] = nlohmann::json::array();
    d["end_time"] = PerfJson::now();
    if (s.o.memory_report)
      d["gradcomm"]["memory"] = {{"device", s.memory.gpu ? "gpu" : "host"},
                                 {"initialization_bytes", s.memory.init},
                                 {"user_allocated_bytes", s.memory.buffers},
                                 {"collective_bytes", s.memory.collective}};
    s.json.flush();
  }
  return finish(s.wrong_total ? 1 : 0);
}
