// gradcomm-powersgd-bench: PowerSGD through the reducer on model-shaped gradient
// sets (bench/common/grad_sets.hpp, values with low-rank structure plus noise):
// the step time with compression against the same reducer without it, the bytes
// on the wire against an f32 all-reduce of every gradient, and the relative error
// of the first compressed step's approximation (no error feedback yet: the plain
// rank-r approximation). Ranks are threads on the local transport, on GPU 0 or the
// host. One table row and one JSON line per configuration.
//
//   gradcomm-powersgd-bench                      ranks 1, 2, 4, 8 (host: 1, 2) for both sets, r = 4
//   gradcomm-powersgd-bench --set resnet50 --ranks 2 --rank 8 --device host
//   gradcomm-powersgd-bench --set gpt2_medium --ranks 1 --bucket-cap-mib 4096
//       every compressed matrix in one bucket (the default cap, 25 MiB, spreads them)
//   gradcomm-powersgd-bench --set resnet50 --error-steps 10 [--no-error-feedback]
//       the relative error of each of the first 10 compressed steps on the same
//       gradients (warm start: Q converges to the gradients' top subspace, so the
//       error stops depending on the random first Q; compare with
//       torch_powersgd_peer.py --error-steps 10), and no timing
//   gradcomm-powersgd-bench --set resnet50 --error-steps 10 --compressor int8|f16|SPEC
//       the same per-step errors with the f16 wire, or any compression by its text
//       form ("int8", "fp8:format=e5m2"; docs/compression.md; error feedback unless
//       --no-error-feedback) instead of PowerSGD
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/bench_cli.hpp"
#include "common/bench_util.hpp"
#include "common/grad_sets.hpp"
#include "gradcomm/gradcomm.h"

namespace {

using Clock = std::chrono::steady_clock;
using gradcomm::bench::Barrier;
using gradcomm::bench::check;
using gradcomm::bench::check_cuda;
using gradcomm::bench::grad_rows;
using gradcomm::bench::grad_set;
using gradcomm::bench::lowrank_value;
using gradcomm::bench::median;

struct Config {
  std::string set = "resnet50";
  int ranks = 1;
  int rank = 4;
  bool gpu = false;
  int iters = 10;
  int error_steps = 0;                  // > 0: only the per-step errors of that many compressed steps
  std::string compressor = "powersgd";  // --error-steps: powersgd, f16, or a compression's text form
  bool error_feedback = true;
  bool seed_given = false;  // --seed S: the initial Q's seed, else the config's default
  uint64_t seed = 0;
  size_t bucket_cap_mib = 0;  // --bucket-cap-mib: 0 = the reducer's default
  FILE* json = nullptr;
};

struct Result {
  double plain_us = 0, psgd_us = 0, rel_error = 0;
  std::vector<double> step_errors;  // --error-steps
  size_t wire_bytes = 0, f32_bytes = 0;
  gcommPowerSgdStats_t stats = GCOMM_POWERSGD_STATS_INITIALIZER;
};

// The set's values, made once per set (GPT-2 medium: 355 M values) on all cores.
const std::vector<std::vector<float>>& values_of(const std::string& set) {
  static std::string cached_set;
  static std::vector<std::vector<float>> cached;
  if (cached_set == set) return cached;
  std::vector<size_t> sizes = grad_set(set), rows = grad_rows(set);
  cached.assign(sizes.size(), {});
  unsigned workers = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (unsigned w = 0; w < workers; ++w)
    pool.emplace_back([&, w] {
      for (size_t k = w; k < sizes.size(); k += workers) {
        cached[k].resize(sizes[k]);
        size_t cols = rows[k] > 0 ? sizes[k] / rows[k] : sizes[k];
        for (size_t e = 0; e < sizes[k]; ++e) cached[k][e] = lowrank_value(k, e / cols, e % cols);
      }
    });
  for (auto& t : pool) t.join();
  cached_set = set;
  return cached;
}

void run_rank(const Config& c, int rank, gcommComm_t comm, Barrier& barrier, Result& out,
              const std::vector<std::vector<float>>& host) {
  if (c.gpu) check_cuda(cudaSetDevice(0), "cudaSetDevice");
  cudaStream_t stream = nullptr;
  if (c.gpu) check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  // Every rank contributes the same values: the average is the input.
  std::vector<size_t> sizes = grad_set(c.set), rows = grad_rows(c.set);
  std::vector<void*> mem(sizes.size());
  std::vector<gcommTensor_t> grads;
  for (size_t k = 0; k < sizes.size(); ++k) {
    if (c.gpu)
      check_cuda(cudaMalloc(&mem[k], sizes[k] * 4), "cudaMalloc");
    else
      mem[k] = std::malloc(sizes[k] * 4);
    grads.push_back(gcommTensor_t{mem[k], sizes[k], gcommFloat32});
  }
  auto upload = [&] {
    for (size_t k = 0; k < sizes.size(); ++k) {
      if (c.gpu)
        check_cuda(cudaMemcpyAsync(mem[k], host[k].data(), sizes[k] * 4, cudaMemcpyHostToDevice, stream),
                   "copy");
      else
        std::memcpy(mem[k], host[k].data(), sizes[k] * 4);
    }
  };
  auto time_steps = [&](gcommReducer_t r, int iters) {
    std::vector<double> t;
    for (int it = 0; it < iters; ++it) {
      upload();
      if (c.gpu) check_cuda(cudaStreamSynchronize(stream), "sync");
      barrier.wait();
      auto t0 = Clock::now();
      check(gcommReducerBeginStep(r, 1), "begin");
      for (size_t k = sizes.size(); k-- > 0;) check(gcommReducerMarkReady(r, k, stream), "mark");
      check(gcommReducerFinalize(r, stream, nullptr), "finalize");
      if (c.gpu) check_cuda(cudaStreamSynchronize(stream), "sync");
      barrier.wait();
      t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    return median(t);
  };
  // ||reduced - input|| / ||input|| over every gradient (every rank gave the same input).
  auto relative_error = [&] {
    double num = 0, den = 0;
    std::vector<float> got;
    for (size_t k = 0; k < sizes.size(); ++k) {
      got.resize(sizes[k]);
      if (c.gpu)
        check_cuda(cudaMemcpy(got.data(), mem[k], sizes[k] * 4, cudaMemcpyDeviceToHost), "copy back");
      else
        std::memcpy(got.data(), mem[k], sizes[k] * 4);
      for (size_t e = 0; e < sizes[k]; ++e) {
        double d = got[e] - host[k][e];
        num += d * d;
        den += static_cast<double>(host[k][e]) * host[k][e];
      }
    }
    return std::sqrt(num / den);
  };
  gcommReducerConfig_t rc = GCOMM_REDUCER_CONFIG_INITIALIZER;
  rc.rebuild_buckets = 0;
  if (c.bucket_cap_mib > 0) rc.bucket_cap_bytes = c.bucket_cap_mib << 20;
  gcommPowerSgdConfig_t pc = GCOMM_POWERSGD_CONFIG_INITIALIZER;
  pc.rank = c.rank;
  pc.start_iter = 0;
  pc.error_feedback = c.error_feedback ? 1 : 0;
  if (c.seed_given) pc.seed = c.seed;
  if (c.error_steps > 0) {
    gcommReducer_t r = nullptr;
    if (c.compressor == "f16") rc.wire_dtype = gcommFloat16;
    check(gcommReducerCreate(comm, grads.data(), grads.size(), &rc, &r), "create");
    if (c.compressor == "powersgd")
      check(gcommReducerEnableCompression(r, gcommCompressionPowerSgd, &pc, rows.data()), "enable PowerSGD");
    if (c.compressor != "powersgd" && c.compressor != "f16") {
      const std::string spec =
          c.compressor +
          (c.error_feedback
               ? ""
               : (c.compressor.find(':') == std::string::npos ? ":error_feedback=0" : ",error_feedback=0"));
      check(gcommReducerEnableCompressionText(r, spec.c_str(), rows.data()), ("enable " + spec).c_str());
    }
    for (int s = 0; s < c.error_steps; ++s) {
      time_steps(r, 1);
      double e = relative_error();
      if (rank == 0) out.step_errors.push_back(e);
    }
    check(gcommReducerDestroy(r), "destroy");
    for (void* p : mem) c.gpu ? (void)cudaFree(p) : std::free(p);
    if (stream != nullptr) cudaStreamDestroy(stream);
    if (rank == 0 && !out.step_errors.empty()) out.rel_error = out.step_errors.front();
    return;
  }
  gcommReducer_t plain = nullptr;
  check(gcommReducerCreate(comm, grads.data(), grads.size(), &rc, &plain), "create");
  double plain_us = time_steps(plain, c.iters);
  gcommReducerStats_t ps{};
  check(gcommReducerGetStats(plain, &ps), "stats");
  check(gcommReducerDestroy(plain), "destroy");

  gcommReducer_t r = nullptr;
  check(gcommReducerCreate(comm, grads.data(), grads.size(), &rc, &r), "create");
  check(gcommReducerEnableCompression(r, gcommCompressionPowerSgd, &pc, rows.data()), "enable PowerSGD");
  // First compressed step: the approximation error of rank r on these values.
  time_steps(r, 1);
  const double first_error = relative_error();
  double psgd_us = time_steps(r, c.iters);
  gcommReducerStats_t rs{};
  check(gcommReducerGetStats(r, &rs), "stats");
  check(gcommReducerGetCompressionStats(r, gcommCompressionPowerSgd, &out.stats), "PowerSGD stats");
  check(gcommReducerDestroy(r), "destroy");
  for (void* p : mem) c.gpu ? (void)cudaFree(p) : std::free(p);
  if (stream != nullptr) cudaStreamDestroy(stream);
  if (rank == 0) {
    out.plain_us = plain_us;
    out.psgd_us = psgd_us;
    out.rel_error = first_error;
    out.wire_bytes = rs.wire_bytes_per_step + out.stats.bytes_last_step;
    out.f32_bytes = ps.grad_bytes;
  }
}

Result run(const Config& c) {
  std::vector<gcommComm_t> comms(c.ranks, nullptr);
  gcommCommConfig_t cc = GCOMM_COMM_CONFIG_INITIALIZER;
  check(gcommCommInitLocal(c.ranks, c.gpu ? gcommCudaDevice(0) : gcommHostDevice(), &cc, comms.data()),
        "init");
  const auto& host = values_of(c.set);
  Barrier barrier(c.ranks);
  std::vector<Result> results(c.ranks);
  gradcomm::bench::on_rank_threads(comms,
                                   [&](int q) { run_rank(c, q, comms[q], barrier, results[q], host); });
  return results[0];
}

void report_errors(const Config& c, const Result& r) {
  std::printf(
      "%-12s ranks %d %s %s error feedback %s: relative error per step:", c.set.c_str(), c.ranks,
      c.compressor == "powersgd" ? ("PowerSGD r " + std::to_string(c.rank)).c_str() : c.compressor.c_str(),
      c.gpu ? "gpu" : "host", c.error_feedback ? "on" : "off");
  for (double e : r.step_errors) std::printf(" %.5f", e);
  std::printf("\n");
  if (c.json != nullptr) {
    std::fprintf(c.json,
                 "{\"bench\": \"powersgd_error_steps\", \"compressor\": \"%s\", \"set\": \"%s\", "
                 "\"ranks\": %d, \"rank\": %d, "
                 "\"device\": \"%s\", \"error_feedback\": %d, \"seed\": %llu, \"errors\": [",
                 c.compressor.c_str(), c.set.c_str(), c.ranks, c.rank, c.gpu ? "gpu" : "host",
                 c.error_feedback ? 1 : 0,
                 static_cast<unsigned long long>(
                     c.seed_given ? c.seed : gcommPowerSgdConfig_t(GCOMM_POWERSGD_CONFIG_INITIALIZER).seed));
    for (size_t i = 0; i < r.step_errors.size(); ++i)
      std::fprintf(c.json, "%s%.6f", i ? ", " : "", r.step_errors[i]);
    std::fprintf(c.json, "]}\n");
    std::fflush(c.json);
  }
}

void report(const Config& c, const Result& r, bool header) {
  if (c.error_steps > 0) return report_errors(c, r);
  if (header)
    std::printf("%-12s %5s %4s %4s %10s %10s %9s %11s %9s %9s\n", "set", "ranks", "r", "dev", "plain_us",
                "psgd_us", "matrices", "wire_MiB", "ratio", "rel_err");
  double ratio = r.wire_bytes > 0 ? static_cast<double>(r.f32_bytes) / r.wire_bytes : 0.0;
  std::printf("%-12s %5d %4d %4s %10.1f %10.1f %9zu %11.2f %8.1fx %9.4f\n", c.set.c_str(), c.ranks, c.rank,
              c.gpu ? "gpu" : "host", r.plain_us, r.psgd_us, r.stats.compressed_matrices,
              r.wire_bytes / 1048576.0, ratio, r.rel_error);
  std::fflush(stdout);
  if (c.json != nullptr) {
    std::fprintf(
        c.json,
        "{\"bench\": \"powersgd_step\", \"set\": \"%s\", \"ranks\": %d, \"rank\": %d, \"device\": \"%s\", "
        "\"plain_step_us\": %.2f, \"powersgd_step_us\": %.2f, \"compressed_matrices\": %zu, "
        "\"uncompressed_tensors\": %zu, \"wire_bytes\": %zu, \"f32_allreduce_bytes\": %zu, "
        "\"pq_bytes\": %zu, \"compressed_f32_bytes\": %zu, \"compression_ratio\": %.3f, "
        "\"relative_error\": %.6f, \"iters\": %d, \"bucket_cap_mib\": %zu}\n",
        c.set.c_str(), c.ranks, c.rank, c.gpu ? "gpu" : "host", r.plain_us, r.psgd_us,
        r.stats.compressed_matrices, r.stats.uncompressed_tensors, r.wire_bytes, r.f32_bytes,
        r.stats.bytes_last_step, r.stats.uncompressed_bytes_equivalent, ratio, r.rel_error, c.iters,
        c.bucket_cap_mib);
    std::fflush(c.json);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int gpus = 0;
  bool have_gpu = cudaGetDeviceCount(&gpus) == cudaSuccess && gpus > 0;
  (void)cudaGetLastError();
  Config base;
  std::string device = have_gpu ? "gpu" : "host", json_path;
  const char* program = "gradcomm-powersgd-bench";
  CLI::App app{
      "A step with PowerSGD against the plain step, and the bytes each sends; with --error-steps, the "
      "per-step error of a compressor instead. Without --set or --ranks: a matrix for this machine."};
  CLI::Option* set_option =
      app.add_option("--set", base.set, "gradient set")->check(CLI::IsMember({"resnet50", "gpt2_medium"}));
  CLI::Option* ranks_option =
      app.add_option("--ranks", base.ranks, "local ranks")->check(CLI::Range(1, 1024));
  app.add_option("--rank", base.rank, "PowerSGD's rank")->capture_default_str()->check(CLI::Range(1, 1024));
  app.add_option("--device", device, "host, or local ranks on GPU 0 (default: gpu where present)")
      ->check(CLI::IsMember({"host", "gpu"}));
  app.add_option("--iters", base.iters, "timed steps")->capture_default_str()->check(CLI::Range(1, 1000000));
  app.add_option("--error-steps", base.error_steps,
                 "> 0: only the per-step errors of that many compressed steps")
      ->check(CLI::Range(0, 1000000));
  app.add_option("--compressor", base.compressor,
                 "with --error-steps: powersgd, f16, or a compression's text form (int8, fp8:format=e5m2)")
      ->capture_default_str();
  app.add_option("--bucket-cap-mib", base.bucket_cap_mib,
                 "the reducer's bucket cap in MiB (default: the reducer's, 25); a cap above the set's size "
                 "puts every compressed matrix in one bucket")
      ->check(CLI::Range(size_t{1}, size_t{1} << 20));
  app.add_flag("!--no-error-feedback", base.error_feedback, "with --error-steps: no error feedback");
  CLI::Option* seed_option =
      app.add_option("--seed", base.seed, "the initial Q's seed (default: the config's)");
  app.add_option("-J", json_path, "JSON lines file");
  if (auto code = gradcomm::bench::parse_command_line(app, argc, argv, program)) return *code;
  const bool matrix = set_option->count() == 0 && ranks_option->count() == 0;
  base.gpu = device == "gpu";
  base.seed_given = seed_option->count() > 0;
  if (base.gpu && !have_gpu)
    return gradcomm::bench::refuse(program, "--device gpu, but no usable GPU is present");
  if (!gradcomm::bench::open_json(json_path, program, base.json)) return 2;
  std::vector<Config> configs;
  if (!matrix) {
    configs.push_back(base);
  } else {
    for (const char* set : {"resnet50", "gpt2_medium"})
      for (int ranks : {1, 2, 4, 8}) {
        if (!base.gpu && (ranks > 2 || std::string(set) == "gpt2_medium")) continue;  // host: keep it short
        Config c = base;
        c.set = set;
        c.ranks = ranks;
        if (!base.gpu) c.iters = std::min(c.iters, 3);
        configs.push_back(c);
      }
  }
  std::printf(
      "# gradcomm-powersgd-bench: %s; step = begin + mark all + finalize until idle, median; ratio = f32 "
      "all-reduce bytes / bytes sent\n",
      base.gpu ? "local ranks on GPU 0" : "host ranks");
  bool header = true;
  for (const Config& c : configs) {
    try {
      report(c, run(c), header);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "gradcomm-powersgd-bench: %s\n", e.what());
      return 1;
    }
    header = false;
  }
  if (base.json != nullptr) std::fclose(base.json);
  return 0;
}
