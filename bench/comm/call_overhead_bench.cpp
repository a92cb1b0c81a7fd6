// Where a small collective's host time goes. gradcomm-perf is 5–6 us per call
// slower than nccl-tests below 8 MiB on one H100 (docs/benchmarks.md), where the
// GPU work is shorter than the host's enqueue and every host microsecond shows.
// This times, per call on the caller's thread, each piece gradcomm adds around
// ncclAllReduce — the pointer checks (runtime and driver queries), the
// watchdog's event — and the whole call through the C API, on one GPU (an NCCL
// communicator of size 1, wrapped by gradcomm so both paths use the same one).
// First, on any machine, the host part alone: a 1-rank local communicator on
// host memory (the C API, validation, sequence numbers, transport dispatch), and
// gradcomm's own share piece by piece over a transport that does no work (the
// API boundary and handle lookup, the communicator's checks, locks and flight
// record), with the flight recorder on and off. On a GPU, in rotating blocks: a
// communicator that asks the driver about both buffers on every call
// (GRADCOMM_CHECK_POINTERS=1), one that asks once per allocation (the default:
// comm/known_buffers.hpp), and one with the flight recorder off.
//
//   gradcomm-call-overhead-bench [--calls N] [--bytes B] [-J FILE]
//
// Without a GPU it prints the host rows and says the GPU rows were not measured.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "comm/api/publish.hpp"
#include "comm/communicator.hpp"
#include "common/bench_cli.hpp"
#include "common/device.hpp"
#include "gradcomm/gradcomm.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Row {
  const char* what;
  double host_us;  // on the calling thread, per call (median of 5 runs)
  double wall_us;  // including the stream's completion, per call; 0: not stream work
};

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "gradcomm-call-overhead-bench: %s\n", what.c_str());
  std::exit(1);
}
void cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) die(std::string(what) + ": " + cudaGetErrorString(e));
}
void gcomm(gcommStatus_t s, const char* what) {
  if (s != gcommSuccess) die(std::string(what) + ": " + gcommGetLastError());
}

// Median over 5 runs of `calls` calls: host time per call, and time until the
// stream is idle per call (when `stream` is set).
Row time_calls(const char* what, int calls, cudaStream_t stream, const std::function<void()>& call) {
  std::vector<double> host, wall;
  for (int run = 0; run < 6; ++run) {
    auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i) call();
    auto t1 = Clock::now();
    if (stream != nullptr) cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    auto t2 = Clock::now();
    if (run == 0) continue;  // warm-up
    host.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / calls);
    wall.push_back(std::chrono::duration<double, std::micro>(t2 - t0).count() / calls);
  }
  std::sort(host.begin(), host.end());
  std::sort(wall.begin(), wall.end());
  return Row{what, host[host.size() / 2], stream != nullptr ? wall[wall.size() / 2] : 0.0};
}

// A rank of one that does no work: what is left of a call is gradcomm's own.
class NullTransport final : public gradcomm::comm::Transport {
 public:
  int rank() const noexcept override { return 0; }
  int size() const noexcept override { return 1; }
  gcommDevice_t device() const noexcept override { return gcommHostDevice(); }
  gcommTransport_t kind() const noexcept override { return gcommTransportLocal; }
  void run(const gradcomm::comm::CollectiveArgs&) override {}
  gcommStatus_t poll_async_error(std::string&) noexcept override { return gcommSuccess; }
  void abort() noexcept override {}
};

// gradcomm's share of a host call, piece by piece, over the null transport.
void measure_pieces(std::vector<Row>& rows, int calls, size_t count) {
  using gradcomm::comm::Collective;
  using gradcomm::comm::Communicator;
  std::vector<float> a(count, 1.0f), b(count, 0.0f);
  std::mutex m;
  rows.push_back(time_calls("piece: std::mutex lock and unlock, uncontended", calls, nullptr,
                            [&] { std::lock_guard<std::mutex> lock(m); }));
  rows.push_back(time_calls("piece: steady_clock::now()", calls, nullptr, [&] { (void)Clock::now(); }));
  rows.push_back(time_calls("piece: pointer_info (a host buffer's driver query)", calls, nullptr,
                            [&] { (void)gradcomm::pointer_info(a.data()); }));
  // Communicators read GRADCOMM_FLIGHT_RECORDER_ENTRIES when they are made.
  const char* entries = std::getenv("GRADCOMM_FLIGHT_RECORDER_ENTRIES");
  const std::string saved = entries != nullptr ? entries : "";
  setenv("GRADCOMM_FLIGHT_RECORDER_ENTRIES", "0", 1);
  Communicator off(std::make_unique<NullTransport>(), 30.0);
  if (entries != nullptr)
    setenv("GRADCOMM_FLIGHT_RECORDER_ENTRIES", saved.c_str(), 1);
  else
    unsetenv("GRADCOMM_FLIGHT_RECORDER_ENTRIES");
  Communicator on(std::make_unique<NullTransport>(), 30.0);
  const auto call = [&](const void* send, void* recv) {
    return gradcomm::comm::collective_call(Collective::kAllReduce, send, recv, count, gcommFloat32, nullptr);
  };
  rows.push_back(time_calls("Communicator::collective, null transport, flight recorder off", calls, nullptr,
                            [&] { off.collective(call(a.data(), b.data())); }));
  rows.push_back(time_calls("Communicator::collective, null transport, flight recorder on", calls, nullptr,
                            [&] { on.collective(call(a.data(), b.data())); }));
  gcommComm_t handle = gradcomm::comm::publish_communicator(std::make_unique<NullTransport>(), 30.0);
  int rank = -1;
  rows.push_back(time_calls("gcommCommRank (the API boundary and the handle lookup)", calls, nullptr,
                            [&] { gcomm(gcommCommRank(handle, &rank), "gcommCommRank"); }));
  rows.push_back(time_calls(
      "gcommAllReduce, null transport, out of place (gradcomm's whole share)", calls, nullptr, [&] {
        gcomm(gcommAllReduce(handle, a.data(), b.data(), count, gcommFloat32, gcommSum, nullptr),
              "gcommAllReduce");
      }));
  rows.push_back(time_calls("gcommAllReduce, null transport, in place", calls, nullptr, [&] {
    gcomm(gcommAllReduce(handle, b.data(), b.data(), count, gcommFloat32, gcommSum, nullptr),
          "gcommAllReduce");
  }));
  gcomm(gcommCommDestroy(handle), "gcommCommDestroy");
}

// Each piece of a small collective on one GPU, and the whole call against raw NCCL.
void measure_gpu(std::vector<Row>& rows, int calls, size_t count) {
  cuda(cudaSetDevice(0), "cudaSetDevice");
  cudaStream_t stream = nullptr;
  cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  float *send = nullptr, *recv = nullptr;
  cuda(cudaMalloc(&send, count * sizeof(float)), "cudaMalloc");
  cuda(cudaMalloc(&recv, count * sizeof(float)), "cudaMalloc");
  cuda(cudaMemset(send, 0, count * sizeof(float)), "cudaMemset");
  ncclComm_t nccl = nullptr;
  int dev0 = 0;
  if (ncclCommInitAll(&nccl, 1, &dev0) != ncclSuccess) die("ncclCommInitAll failed");
  gcommComm_t comm = nullptr;
  gcomm(gcommCommWrapNccl(nccl, gcommCudaDevice(0), 0.0, &comm), "gcommCommWrapNccl");
  // The same NCCL communicator wrapped again, asking the driver about both buffers
  // on every call (GRADCOMM_CHECK_POINTERS=1): the path before comm/known_buffers.hpp.
  setenv("GRADCOMM_CHECK_POINTERS", "1", 1);
  gcommComm_t asking = nullptr;
  gcomm(gcommCommWrapNccl(nccl, gcommCudaDevice(0), 0.0, &asking), "gcommCommWrapNccl");
  unsetenv("GRADCOMM_CHECK_POINTERS");
  // And once more with the flight recorder off (its cost on the GPU path).
  const char* entries = std::getenv("GRADCOMM_FLIGHT_RECORDER_ENTRIES");
  const std::string saved = entries != nullptr ? entries : "";
  setenv("GRADCOMM_FLIGHT_RECORDER_ENTRIES", "0", 1);
  gcommComm_t unrecorded = nullptr;
  gcomm(gcommCommWrapNccl(nccl, gcommCudaDevice(0), 0.0, &unrecorded), "gcommCommWrapNccl");
  if (entries != nullptr)
    setenv("GRADCOMM_FLIGHT_RECORDER_ENTRIES", saved.c_str(), 1);
  else
    unsetenv("GRADCOMM_FLIGHT_RECORDER_ENTRIES");
  auto gs = reinterpret_cast<gcommStream_t>(stream);
  cudaEvent_t event = nullptr;
  cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");

  rows.push_back(time_calls("cudaPointerGetAttributes (gradcomm::pointer_info)", calls, nullptr,
                            [&] { (void)gradcomm::pointer_info(send); }));
  rows.push_back(time_calls("cuPointerGetAttributes, 5 attributes (gradcomm::pointer_range)", calls, nullptr,
                            [&] { (void)gradcomm::pointer_range(send); }));
  rows.push_back(
      time_calls("cudaEventRecord", calls, stream, [&] { cuda(cudaEventRecord(event, stream), "record"); }));
  // What a call's DeviceGuard costs when the device is already current (every call).
  rows.push_back(time_calls("piece: DeviceGuard on the current device (cudaGetDevice)", calls, nullptr,
                            [&] { gradcomm::DeviceGuard guard(0); }));
  // Rotating blocks, so that a drift of the machine falls on both paths alike; raw
  // NCCL in each block, out of place and in place, as the peer of the rows after it.
  for (int block = 0; block < 2; ++block) {
    rows.push_back(time_calls("ncclAllReduce, out of place (raw NCCL)", calls, stream, [&] {
      if (ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, nccl, stream) != ncclSuccess)
        die("ncclAllReduce");
    }));
    rows.push_back(time_calls("ncclAllReduce, in place (raw NCCL)", calls, stream, [&] {
      if (ncclAllReduce(recv, recv, count, ncclFloat32, ncclSum, nccl, stream) != ncclSuccess)
        die("ncclAllReduce");
    }));
    rows.push_back(time_calls(
        "gcommAllReduce, out of place, every call asks (2 pointer checks + event)", calls, stream, [&] {
          gcomm(gcommAllReduce(asking, send, recv, count, gcommFloat32, gcommSum, gs), "gcommAllReduce");
        }));
    rows.push_back(time_calls("gcommAllReduce, out of place, buffers known (event only)", calls, stream, [&] {
      gcomm(gcommAllReduce(comm, send, recv, count, gcommFloat32, gcommSum, gs), "gcommAllReduce");
    }));
    rows.push_back(
        time_calls("gcommAllReduce, in place, every call asks (1 pointer check + event)", calls, stream, [&] {
          gcomm(gcommAllReduce(asking, recv, recv, count, gcommFloat32, gcommSum, gs), "gcommAllReduce");
        }));
    rows.push_back(time_calls("gcommAllReduce, in place, buffers known (event only)", calls, stream, [&] {
      gcomm(gcommAllReduce(comm, recv, recv, count, gcommFloat32, gcommSum, gs), "gcommAllReduce");
    }));
    rows.push_back(
        time_calls("gcommAllReduce, in place, buffers known, flight recorder off", calls, stream, [&] {
          gcomm(gcommAllReduce(unrecorded, recv, recv, count, gcommFloat32, gcommSum, gs), "gcommAllReduce");
        }));
  }
  gcomm(gcommCommSynchronize(comm), "gcommCommSynchronize");
  gcomm(gcommCommSynchronize(asking), "gcommCommSynchronize");
  gcomm(gcommCommDestroy(asking), "gcommCommDestroy");
  gcomm(gcommCommSynchronize(unrecorded), "gcommCommSynchronize");
  gcomm(gcommCommDestroy(unrecorded), "gcommCommDestroy");
  cudaEventDestroy(event);
  gcomm(gcommCommDestroy(comm), "gcommCommDestroy");
  ncclCommDestroy(nccl);
  cudaFree(send);
  cudaFree(recv);
  cudaStreamDestroy(stream);
}

}  // namespace

int main(int argc, char** argv) {
  int calls = 2000;
  size_t bytes = 8;
  std::string json_path;
  const char* program = "gradcomm-call-overhead-bench";
  CLI::App app{
      "Where a small collective's host time goes: pointer checks, the watchdog's event, the whole C API "
      "call against raw NCCL on the same communicator (without a GPU: the host part only)."};
  app.add_option("--calls", calls, "calls per timed run")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000000));
  app.add_option("--bytes", bytes, "bytes per call (f32, at least 4)")
      ->capture_default_str()
      ->check(CLI::Range(size_t{4}, size_t{1} << 32));
  app.add_option("-J", json_path, "JSON lines file");
  if (auto code = gradcomm::bench::parse_command_line(app, argc, argv, program)) return *code;
  FILE* json = nullptr;
  if (!gradcomm::bench::open_json(json_path, program, json)) return 2;
  const size_t count = bytes / sizeof(float);
  std::vector<Row> rows;
  // The host part of a call, no GPU involved: the C API, the handle lookup,
  // validation, the sequence number and the local transport's dispatch (one rank,
  // so nothing waits for a peer).
  {
    gcommComm_t host = nullptr;
    gcomm(gcommCommInitLocal(1, gcommHostDevice(), nullptr, &host), "gcommCommInitLocal");
    std::vector<float> a(count, 1.0f), b(count, 0.0f);
    rows.push_back(time_calls("gcommAllReduce, out of place, 1 local rank on the host", calls, nullptr, [&] {
      gcomm(gcommAllReduce(host, a.data(), b.data(), count, gcommFloat32, gcommSum, nullptr),
            "gcommAllReduce");
    }));
    rows.push_back(time_calls("gcommAllReduce, in place, 1 local rank on the host", calls, nullptr, [&] {
      gcomm(gcommAllReduce(host, b.data(), b.data(), count, gcommFloat32, gcommSum, nullptr),
            "gcommAllReduce");
    }));
    gcomm(gcommCommDestroy(host), "gcommCommDestroy");
  }
  measure_pieces(rows, calls, count);
  const bool gpu = gradcomm::gpu_available();
  if (gpu) measure_gpu(rows, calls, count);
  std::printf("# %s, %zu-byte float all-reduce, %d calls per run, median of 5 runs\n",
              gpu ? "one GPU" : "no GPU (host rows only)", count * sizeof(float), calls);
  if (!gpu)
    std::printf("# no usable GPU (%s): the GPU rows were not measured\n", gradcomm::no_gpu_reason().c_str());
  std::printf("%-72s %10s %10s\n", "call", "host_us", "wall_us");
  for (const Row& r : rows) {
    std::printf("%-72s %10.3f %10.3f\n", r.what, r.host_us, r.wall_us);
    if (json != nullptr)
      std::fprintf(json,
                   "{\"bench\": \"call_overhead\", \"call\": \"%s\", \"bytes\": %zu, \"host_us\": %.4f, "
                   "\"wall_us\": %.4f, \"calls\": %d}\n",
                   r.what, count * sizeof(float), r.host_us, r.wall_us, calls);
  }
  if (json != nullptr) std::fclose(json);
  return 0;
}
