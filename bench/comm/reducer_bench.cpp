// gradcomm-reducer-bench: one step's communication through the reducer (begin,
// mark every gradient ready in backward order, finalize) for model-shaped
// gradient sets, against a raw all-reduce of the same wire bytes on the same
// communicator: once as one flat buffer, once cut at the same bucket caps.
// Ranks are threads (local transport, or NCCL with one rank per GPU), or, under a
// launcher (torchrun, mpirun, srun: a world size above 1), one rank per process
// (gcommCommInitFromEnv: NCCL on the local rank's GPU, the socket transport
// without one), which is how the engine's overhead over a multi-GPU NCCL
// all-reduce is measured. A step is timed from a barrier to every rank's stream
// being idle. One table row and one JSON line (rank 0's) per configuration.
//
// --mode sharded: the reducer reduce-scatters (gcommReducerSharded) and a step
// also all-gathers the parameters (ZeRO-1's two phases; the optimizer's own
// update is not timed); gather_us is that all-gather's part. On the socket
// transport every row reports the payload bytes each rank sent per step, in all
// and in the gradient phase (grad_sent, MiB; gcommCommBytesSent), measured.
//
//   gradcomm-reducer-bench                       a sensible matrix for this machine
//   gradcomm-reducer-bench --set resnet50 --ranks 4 --device gpu --transport local --wire f16 --view
//   torchrun --nproc-per-node 8 --no-python gradcomm-reducer-bench --set gpt2_medium
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/bench_cli.hpp"
#include "common/bench_util.hpp"
#include "common/grad_sets.hpp"
#include "common/launcher_env.hpp"
#include "gradcomm/gradcomm.h"

namespace {

using Clock = std::chrono::steady_clock;
using gradcomm::bench::Barrier;
using gradcomm::bench::check;
using gradcomm::bench::check_cuda;
using gradcomm::bench::median;

struct Config {
  std::string set = "resnet50";
  std::string transport = "local";  // local | nccl (threads); under a launcher: what the processes use
  bool gpu = false;
  int ordinal = 0;  // the GPU
  int ranks = 2;
  int wire = GCOMM_WIRE_SAME_AS_GRAD;
  std::string compression;  // --compression SPEC (text form; --wire int8 is "int8"): f32 buckets compressed
  bool view = false;
  bool sharded = false;  // --mode sharded
  int iters = 20;
  int warmup = 3;
  FILE* json = nullptr;
};

struct Result {
  double step_us = 0, flat_us = 0, bucketed_us = 0, host_us = 0, gather_us = 0;
  double sent_bytes_per_step = -1;  // payload this rank sent, per step (-1: the transport does not count)
  double sent_grad_bytes_per_step = -1;  // of which in the gradient phase (begin .. finalize)
  gcommReducerStats_t stats{};
};

// Memory where the communicator wants it, filled with a non-zero pattern.
void* alloc_filled(size_t bytes, bool gpu) {
  std::vector<uint16_t> pattern(std::min<size_t>(bytes, size_t{1} << 20) / 2 + 1, 0x3c00);  // 1.0 in f16
  void* p = nullptr;
  if (gpu) {
    check_cuda(cudaMalloc(&p, std::max<size_t>(bytes, 1)), "cudaMalloc");
    for (size_t off = 0; off < bytes; off += pattern.size() * 2)
      check_cuda(cudaMemcpy(static_cast<char*>(p) + off, pattern.data(),
                            std::min(pattern.size() * 2, bytes - off), cudaMemcpyHostToDevice),
                 "cudaMemcpy");
    // Pageable copies may return before they land; the bench's streams are non-blocking.
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  } else {
    p = std::malloc(std::max<size_t>(bytes, 1));
    for (size_t off = 0; off < bytes; off += pattern.size() * 2)
      std::memcpy(static_cast<char*>(p) + off, pattern.data(), std::min(pattern.size() * 2, bytes - off));
  }
  return p;
}
void release(void* p, bool gpu) {
  gpu ? (void)cudaFree(p) : std::free(p);
}

// Every rank waits until all have arrived (a thread barrier, or a collective one
// between processes).
using WaitAll = std::function<void()>;

// One rank's whole run: the reducer steps, then the raw all-reduces.
void run_rank(const Config& c, int rank, gcommComm_t comm, const WaitAll& barrier, Result& out) {
  if (c.gpu) check_cuda(cudaSetDevice(c.ordinal), "cudaSetDevice");
  cudaStream_t stream = nullptr;
  if (c.gpu) check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  std::vector<size_t> sizes = gradcomm::bench::grad_set(c.set);
  // The gradients in one slab, each 256-byte aligned (as a caching allocator would place them).
  std::vector<size_t> offsets;
  size_t slab_bytes = 0;
  for (size_t n : sizes) {
    offsets.push_back(slab_bytes);
    slab_bytes += (n * 4 + 255) / 256 * 256;
  }
  void* slab = c.view ? nullptr : alloc_filled(slab_bytes, c.gpu);
  std::vector<gcommTensor_t> grads;
  for (size_t k = 0; k < sizes.size(); ++k)
    grads.push_back(
        gcommTensor_t{c.view ? nullptr : static_cast<char*>(slab) + offsets[k], sizes[k], gcommFloat32});
  gcommReducerConfig_t cfg = GCOMM_REDUCER_CONFIG_INITIALIZER;
  cfg.wire_dtype = c.wire;
  cfg.grad_as_bucket_view = c.view ? 1 : 0;
  cfg.mode = c.sharded ? gcommReducerSharded : gcommReducerAllReduce;
  gcommReducer_t reducer = nullptr;
  check(gcommReducerCreate(comm, grads.data(), grads.size(), &cfg, &reducer), "gcommReducerCreate");
  if (!c.compression.empty())
    check(gcommReducerEnableCompressionText(reducer, c.compression.c_str(), nullptr),
          ("gcommReducerEnableCompressionText(" + c.compression + ")").c_str());
  void* params = nullptr;  // sharded: the parameters the all-gather fills, laid out as the gradients
  if (c.sharded) {
    params = alloc_filled(slab_bytes, c.gpu);
    std::vector<gcommTensor_t> p;
    for (size_t k = 0; k < sizes.size(); ++k)
      p.push_back(gcommTensor_t{static_cast<char*>(params) + offsets[k], sizes[k], gcommFloat32});
    check(gcommReducerSetParams(reducer, p.data(), p.size()), "gcommReducerSetParams");
  }
  auto sync = [&] {
    if (c.gpu) check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  };
  uint64_t sent_before = 0, sent_after = 0;
  const bool counts = gcommCommBytesSent(comm, &sent_before) == gcommSuccess;
  uint64_t grad_phase_bytes = 0;
  std::vector<double> step, host, gather;
  for (int it = 0; it < c.warmup + c.iters; ++it) {
    barrier();
    if (it == c.warmup && counts) check(gcommCommBytesSent(comm, &sent_before), "gcommCommBytesSent");
    uint64_t at_begin = 0, at_finalize = 0;
    if (counts) check(gcommCommBytesSent(comm, &at_begin), "gcommCommBytesSent");
    auto t0 = Clock::now();
    check(gcommReducerBeginStep(reducer, 1), "gcommReducerBeginStep");
    for (size_t k = sizes.size(); k-- > 0;)
      check(gcommReducerMarkReady(reducer, k, stream), "gcommReducerMarkReady");
    check(gcommReducerFinalize(reducer, stream, nullptr), "gcommReducerFinalize");
    auto t1 = Clock::now();
    if (counts) check(gcommCommBytesSent(comm, &at_finalize), "gcommCommBytesSent");
    if (it >= c.warmup) grad_phase_bytes += at_finalize - at_begin;
    if (c.sharded)
      check(gcommReducerAllGatherParams(reducer, GCOMM_ALL_BUCKETS, stream), "gcommReducerAllGatherParams");
    auto tg = Clock::now();
    sync();
    barrier();
    auto t2 = Clock::now();
    if (it >= c.warmup) {
      step.push_back(std::chrono::duration<double, std::micro>(t2 - t0).count());
      host.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      gather.push_back(std::chrono::duration<double, std::micro>(tg - t1).count());
    }
  }
  if (counts) {
    check(gcommCommBytesSent(comm, &sent_after), "gcommCommBytesSent");
    out.sent_bytes_per_step = static_cast<double>(sent_after - sent_before) / c.iters;
    out.sent_grad_bytes_per_step = static_cast<double>(grad_phase_bytes) / c.iters;
  }
  if (params != nullptr) release(params, c.gpu);
  check(gcommReducerGetStats(reducer, &out.stats), "gcommReducerGetStats");
  check(gcommReducerDestroy(reducer), "gcommReducerDestroy");
  if (slab != nullptr) release(slab, c.gpu);

  // The raw collective on the same wire bytes: one flat buffer, then cut at the caps.
  gcommDataType_t wire =
      c.wire == GCOMM_WIRE_SAME_AS_GRAD ? gcommFloat32 : static_cast<gcommDataType_t>(c.wire);
  size_t elem = wire == gcommFloat32 ? 4 : 2;
  size_t count = out.stats.wire_bytes_per_step / elem;
  void* flat = alloc_filled(count * elem, c.gpu);
  std::vector<size_t> pieces;
  for (size_t done = 0, cap = cfg.first_bucket_bytes / elem; done < count;
       cap = cfg.bucket_cap_bytes / elem) {
    pieces.push_back(std::min(cap, count - done));
    done += pieces.back();
  }
  std::vector<double> flat_t, bucketed_t;
  for (int pass = 0; pass < 2; ++pass)
    for (int it = 0; it < c.warmup + c.iters; ++it) {
      barrier();
      auto t0 = Clock::now();
      if (pass == 0) {
        check(gcommAllReduce(comm, flat, flat, count, wire, gcommSum, stream), "gcommAllReduce");
      } else {
        size_t off = 0;
        for (size_t n : pieces) {
          check(gcommAllReduce(comm, static_cast<char*>(flat) + off * elem,
                               static_cast<char*>(flat) + off * elem, n, wire, gcommSum, stream),
                "gcommAllReduce");
          off += n;
        }
      }
      sync();
      barrier();
      double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
      if (it >= c.warmup) (pass == 0 ? flat_t : bucketed_t).push_back(us);
    }
  release(flat, c.gpu);
  if (stream != nullptr) cudaStreamDestroy(stream);
  if (rank == 0) {
    out.step_us = median(step);
    out.host_us = median(host);
    out.flat_us = median(flat_t);
    out.bucketed_us = median(bucketed_t);
    out.gather_us = median(gather);  // on the host transports the gather runs in the call
  }
}

Result run(const Config& c) {
  std::vector<gcommComm_t> comms(c.ranks, nullptr);
  gcommCommConfig_t cc = GCOMM_COMM_CONFIG_INITIALIZER;
  if (c.transport == "nccl") {
    std::vector<int> devices(c.ranks);
    for (int r = 0; r < c.ranks; ++r) devices[r] = r;
    check(gcommCommInitAll(c.ranks, devices.data(), comms.data()), "gcommCommInitAll");
  } else {
    check(gcommCommInitLocal(c.ranks, c.gpu ? gcommCudaDevice(0) : gcommHostDevice(), &cc, comms.data()),
          "gcommCommInitLocal");
  }
  Barrier barrier(c.ranks);
  std::vector<Result> results(c.ranks);
  gradcomm::bench::on_rank_threads(comms, [&](int r) {
    run_rank(
        c, r, comms[r], [&] { barrier.wait(); }, results[r]);
  });
  return results[0];
}

// This process's rank of a launcher's job: the communicator and the config's
// transport, device and rank count filled from it.
gcommComm_t join_job(Config& c, bool have_gpu) {
  gcommCommConfig_t cfg = GCOMM_COMM_CONFIG_INITIALIZER;
  if (!have_gpu) cfg.device = gcommHostDevice();  // the socket transport
  gcommComm_t comm = nullptr;
  check(gcommCommInitFromEnv(&cfg, &comm), "gcommCommInitFromEnv");
  gcommDevice_t device = gcommHostDevice();
  gcommTransport_t kind = gcommTransportAuto;
  check(gcommCommSize(comm, &c.ranks), "gcommCommSize");
  check(gcommCommDevice(comm, &device), "gcommCommDevice");
  check(gcommCommTransport(comm, &kind), "gcommCommTransport");
  c.gpu = device.kind == gcommDeviceCuda;
  c.ordinal = c.gpu ? device.ordinal : 0;
  c.transport = kind == gcommTransportNccl ? "nccl" : "socket";
  return comm;
}

// One configuration as this process's rank of the job.
Result run_process_rank(const Config& c, gcommComm_t comm, int rank) {
  // A barrier is a collective on the communicator's stream: wait for it to finish.
  WaitAll barrier = [&] {
    check(gcommBarrier(comm, nullptr), "gcommBarrier");
    check(gcommCommSynchronize(comm), "gcommCommSynchronize");
  };
  Result r;
  run_rank(c, rank, comm, barrier, r);
  return r;
}

const char* wire_name(int w) {
  return w == GCOMM_WIRE_SAME_AS_GRAD ? "same"
         : w == gcommFloat16          ? "f16"
         : w == gcommBfloat16         ? "bf16"
                                      : "f32";
}

// The wire column: the compression's text form, else the wire dtype.
const char* wire_label(const Config& c) {
  return c.compression.empty() ? wire_name(c.wire) : c.compression.c_str();
}

void report(const Config& c, const Result& r, bool header) {
  if (header)
    std::printf("%-12s %-9s %5s %-4s %-4s %5s %-8s %9s %9s %11s %11s %11s %11s %11s %9s\n", "set",
                "transport", "ranks", "dev", "wire", "view", "mode", "wire_MiB", "grad_sent", "step_us",
                "host_us", "gather_us", "flat_us", "bucket_us", "overhead");
  double overhead = r.bucketed_us > 0 ? (r.step_us / r.bucketed_us - 1.0) * 100.0 : 0.0;
  double mib = r.stats.wire_bytes_per_step / 1048576.0;
  // "-": the transport does not count its bytes (NCCL); -1 printed as MiB read as -0.0.
  char sent[16] = "-";
  if (r.sent_grad_bytes_per_step >= 0)
    std::snprintf(sent, sizeof sent, "%.1f", r.sent_grad_bytes_per_step / 1048576.0);
  std::printf("%-12s %-9s %5d %-4s %-4s %5d %-8s %9.1f %9s %11.1f %11.1f %11.1f %11.1f %11.1f %8.1f%%\n",
              c.set.c_str(), c.transport.c_str(), c.ranks, c.gpu ? "gpu" : "host", wire_label(c),
              c.view ? 1 : 0, c.sharded ? "sharded" : "allreduce", mib, sent, r.step_us, r.host_us,
              r.gather_us, r.flat_us, r.bucketed_us, overhead);
  std::fflush(stdout);
  if (c.json != nullptr) {
    std::fprintf(
        c.json,
        "{\"bench\": \"reducer_step\", \"set\": \"%s\", \"transport\": \"%s\", \"ranks\": %d, \"device\": "
        "\"%s\", \"wire\": \"%s\", \"view\": %d, \"mode\": \"%s\", \"buckets\": %zu, \"wire_bytes\": %zu, "
        "\"grad_bytes\": %zu, \"sent_bytes_per_step\": %.0f, \"sent_grad_bytes_per_step\": %.0f, "
        "\"step_us\": %.2f, \"host_us\": %.2f, "
        "\"gather_us\": %.2f, \"flat_allreduce_us\": %.2f, \"bucketed_allreduce_us\": %.2f, "
        "\"overhead_vs_bucketed_pct\": %.2f, \"iters\": %d}\n",
        c.set.c_str(), c.transport.c_str(), c.ranks, c.gpu ? "gpu" : "host", wire_label(c), c.view ? 1 : 0,
        c.sharded ? "sharded" : "allreduce", r.stats.num_buckets, r.stats.wire_bytes_per_step,
        r.stats.grad_bytes, r.sent_bytes_per_step, r.sent_grad_bytes_per_step, r.step_us, r.host_us,
        r.gather_us, r.flat_us, r.bucketed_us, overhead, c.iters);
    std::fflush(c.json);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int gpus = 0;
  bool have_gpu = cudaGetDeviceCount(&gpus) == cudaSuccess && gpus > 0;
  (void)cudaGetLastError();
  Config base;
  std::string json_path, device = "host", wire_name = "same", mode = "allreduce";
  const char* program = "gradcomm-reducer-bench";
  CLI::App app{
      "The reducer's step time against a flat all-reduce of the same bytes. With no option that picks "
      "a configuration (--set, --transport, --device, --ranks, --wire, --view, --mode): a matrix for "
      "this machine."};
  std::vector<CLI::Option*> picks = {
      app.add_option("--set", base.set, "gradient set")
          ->check(CLI::IsMember({"resnet50", "gpt2_medium", "tiny"})),
      app.add_option("--transport", base.transport, "ranks as threads on")
          ->check(CLI::IsMember({"local", "nccl"})),
      app.add_option("--device", device, "where the gradients live")->check(CLI::IsMember({"host", "gpu"})),
      app.add_option("--ranks", base.ranks, "ranks (threads)")->check(CLI::Range(1, 1024)),
      app.add_option("--wire", wire_name, "wire dtype")
          ->check(CLI::IsMember({"same", "f32", "f16", "bf16", "int8"})),
      app.add_option(
          "--compression", base.compression,
          "a compression's text form for the f32 buckets (int8, fp8:format=e5m2; docs/compression.md)"),
      app.add_flag("--view", base.view, "gradients as bucket views"),
      app.add_option("--mode", mode, "reducer mode")->check(CLI::IsMember({"allreduce", "sharded"}))};
  app.add_option("--iters", base.iters, "timed steps")->capture_default_str()->check(CLI::Range(1, 1000000));
  app.add_option("--warmup", base.warmup, "untimed steps first")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  app.add_option("-J", json_path, "JSON lines file");
  if (auto code = gradcomm::bench::parse_command_line(app, argc, argv, program)) return *code;
  bool matrix = true;
  for (CLI::Option* o : picks) matrix = matrix && o->count() == 0;
  base.gpu = device == "gpu";
  if (wire_name == "int8") base.compression = "int8";
  base.wire = wire_name == "f16"    ? gcommFloat16
              : wire_name == "bf16" ? gcommBfloat16
              : wire_name == "f32"  ? gcommFloat32
                                    : GCOMM_WIRE_SAME_AS_GRAD;
  base.sharded = mode == "sharded";
  if (base.gpu && !have_gpu)
    return gradcomm::bench::refuse(program, "--device gpu, but no usable GPU is present");
  gcommComm_t job = nullptr;
  int job_rank = 0;
  int world = 0;
  if (!gradcomm::bench::launcher_world_size("gradcomm-reducer-bench", world)) return 2;
  if (world > 1) {
    try {
      job = join_job(base, have_gpu);
      check(gcommCommRank(job, &job_rank), "gcommCommRank");
    } catch (const std::exception& e) {
      std::fprintf(stderr, "gradcomm-reducer-bench: %s\n", e.what());
      return 1;
    }
  }
  if (job_rank == 0 &&
      !gradcomm::bench::open_json(json_path, program, base.json)) {  // rank 0 reports for the job
    if (job != nullptr) gcommCommDestroy(job);
    return 2;
  }
  std::vector<Config> configs;
  if (!matrix) {
    configs.push_back(base);
  } else if (job != nullptr) {
    // One rank per process, on the job's transport; GPT-2 medium only on GPUs (its
    // 1.4 GB of gradients per process is too much for a host run).
    std::vector<const char*> sets = {"resnet50"};
    if (base.gpu) sets.push_back("gpt2_medium");
    for (const char* set : sets)
      for (int wire : {GCOMM_WIRE_SAME_AS_GRAD, static_cast<int>(gcommFloat16)})
        for (bool view : {false, true}) {
          if (view && wire != GCOMM_WIRE_SAME_AS_GRAD) continue;
          Config c = base;
          c.set = set, c.wire = wire, c.view = view;
          configs.push_back(c);
          if (view) continue;
          c.sharded = true;  // the same step reduce-scattered, plus the parameter all-gather
          configs.push_back(c);
        }
    for (const char* set : sets)  // the wires side by side: f32, f16 (above), int8, fp8, fp4
      for (const char* compression : {"int8", "fp8", "fp4"}) {
        Config c = base;
        c.set = set, c.compression = compression;
        configs.push_back(c);
      }
  } else if (have_gpu) {
    // One GPU: NCCL with one rank (the engine's own cost), and the local
    // transport with 4 ranks on it (a real reduction to compare against).
    for (const char* set : {"resnet50", "gpt2_medium"})
      for (auto [transport, ranks] : {std::pair<const char*, int>{"nccl", 1}, {"local", 4}})
        for (int wire : {GCOMM_WIRE_SAME_AS_GRAD, static_cast<int>(gcommFloat16)})
          for (bool view : {false, true}) {
            if (view && wire != GCOMM_WIRE_SAME_AS_GRAD) continue;
            Config c = base;
            c.set = set, c.transport = transport, c.ranks = ranks, c.gpu = true, c.wire = wire, c.view = view;
            configs.push_back(c);
          }
    for (const char* set : {"resnet50", "gpt2_medium"})  // the quantized wires where there is a reduction
      for (const char* compression : {"int8", "fp8", "fp4"}) {
        Config c = base;
        c.set = set, c.transport = "local", c.ranks = 4, c.gpu = true, c.compression = compression;
        configs.push_back(c);
      }
  } else {
    // -2: int8, -3: fp8, -4: fp4
    for (int wire : {GCOMM_WIRE_SAME_AS_GRAD, static_cast<int>(gcommFloat16), -2, -3, -4}) {
      Config c = base;
      c.set = "resnet50", c.transport = "local", c.ranks = 2,
      c.wire = wire < 0 ? GCOMM_WIRE_SAME_AS_GRAD : wire;
      c.compression = wire == -2 ? "int8" : wire == -3 ? "fp8" : wire == -4 ? "fp4" : "";
      c.iters = std::min(c.iters, 5);
      configs.push_back(c);
    }
  }
  if (job_rank == 0)
    std::printf(
        "# gradcomm-reducer-bench: %s; step = begin + mark all ready (backward order) + finalize, until "
        "every "
        "rank's stream is idle; medians\n",
        job != nullptr ? "one rank per process"
        : have_gpu     ? "GPU present"
                       : "no GPU: host ranks");
  bool header = true;
  int status = 0;
  for (const Config& c : configs) {
    if (job == nullptr && c.transport == "nccl" && c.ranks > gpus)
      return gradcomm::bench::refuse(program, "--transport nccl needs one GPU per rank");
    try {
      if (job != nullptr) {
        Result r = run_process_rank(c, job, job_rank);
        if (job_rank == 0) report(c, r, header);
      } else {
        report(c, run(c), header);
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "gradcomm-reducer-bench: rank %d: %s\n", job_rank, e.what());
      status = 1;
      break;
    }
    header = false;
  }
  if (job != nullptr) gcommCommDestroy(job);
  if (base.json != nullptr) std::fclose(base.json);
  return status;
}
