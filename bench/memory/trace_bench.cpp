// Replays the training-like trace (training_trace.hpp) through the caching
// allocator over a virtual upstream (addresses only, so the trace's GiBs cost
// nothing) and reports fragmentation: peak reserved / peak allocated, and /
// peak requested. Time per replayed op measures the cache's bookkeeping.
// The _Device cases replay it on GPU 0's memory with two real streams, as
// bench/memory/torch_alloc_peer.py replays the same trace (gradcomm-training-trace
// writes it) through PyTorch's caching allocator.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <chrono>
#include <vector>

#include "common/device.hpp"
#include "memory/caching_allocator.hpp"
#include "memory/testing/test_upstreams.hpp"
#include "training_trace.hpp"

using namespace gradcomm;
using namespace gradcomm::memory;

namespace {

// Peak reserved / peak allocated (and / requested) of a replay: the fragmentation.
void report_fragmentation(benchmark::State& state, const AllocatorStats& last) {
  const double reserved = static_cast<double>(last.reserved_bytes.all().peak);
  state.counters["peak_reserved_MiB"] = reserved / (1 << 20);
  state.counters["peak_allocated_MiB"] = static_cast<double>(last.allocated_bytes.all().peak) / (1 << 20);
  state.counters["reserved_per_allocated"] = reserved / static_cast<double>(last.allocated_bytes.all().peak);
  state.counters["reserved_per_requested"] = reserved / static_cast<double>(last.requested_bytes.all().peak);
  state.counters["upstream_allocs"] = static_cast<double>(last.upstream_allocs);
}

void replay(benchmark::State& state, AllocatorOptions options, double jitter) {
  bench::TraceParams params;
  params.jitter = jitter;
  const std::vector<bench::TraceOp> trace = bench::make_training_trace(params);
  std::vector<void*> ptrs(bench::trace_ids(trace));
  const gcommStream_t streams[2] = {reinterpret_cast<gcommStream_t>(0x10),
                                    reinterpret_cast<gcommStream_t>(0x20)};
  AllocatorStats last;
  for (auto _ : state) {
    VirtualUpstream upstream;
    ImmediateEvents events;
    CachingAllocator alloc(upstream, events, options);
    for (const bench::TraceOp& op : trace) {
      if (op.alloc) {
        ptrs[op.id] = alloc.allocate(op.bytes, streams[op.stream]);
      } else {
        alloc.deallocate(ptrs[op.id], streams[op.stream]);
      }
    }
    last = alloc.stats();
  }
  report_fragmentation(state, last);
  state.counters["trace_allocs"] = static_cast<double>(last.malloc_calls);
  state.counters["ops_per_s"] =
      benchmark::Counter(static_cast<double>(trace.size()), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_TraceReplay_Defaults(benchmark::State& state) {
  replay(state, AllocatorOptions{}, 0.25);
}
BENCHMARK(BM_TraceReplay_Defaults)->Unit(benchmark::kMillisecond);

void BM_TraceReplay_MaxSplit64MiB(benchmark::State& state) {
  AllocatorOptions o;
  o.max_split_size = 64 << 20;
  replay(state, o, 0.25);
}
BENCHMARK(BM_TraceReplay_MaxSplit64MiB)->Unit(benchmark::kMillisecond);

void BM_TraceReplay_StaticShapes(benchmark::State& state) {
  replay(state, AllocatorOptions{}, 0.0);
}
BENCHMARK(BM_TraceReplay_StaticShapes)->Unit(benchmark::kMillisecond);

// On GPU 0: the first replay (every segment comes from cudaMalloc) is timed on
// its own; the timed iterations then replay through the warm cache, as a
// training loop's later steps do. Peaks are those of the whole run.
void replay_on_device(benchmark::State& state, double jitter) {
  if (!gpu_available()) {
    state.SkipWithError(("no usable GPU (" + no_gpu_reason() + ")").c_str());
    return;
  }
  DeviceGuard guard(0);
  bench::TraceParams params;
  params.jitter = jitter;
  const std::vector<bench::TraceOp> trace = bench::make_training_trace(params);
  std::vector<void*> ptrs(bench::trace_ids(trace));
  cudaStream_t raw[2] = {nullptr, nullptr};
  for (cudaStream_t& s : raw) cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  const gcommStream_t streams[2] = {reinterpret_cast<gcommStream_t>(raw[0]),
                                    reinterpret_cast<gcommStream_t>(raw[1])};
  auto alloc = make_caching_allocator(gcommCudaDevice(0), gcommMemoryDevice, AllocatorOptions{});
  auto replay_once = [&] {
    for (const bench::TraceOp& op : trace) {
      if (op.alloc) {
        ptrs[op.id] = alloc->allocate(op.bytes, streams[op.stream]);
      } else {
        alloc->deallocate(ptrs[op.id], streams[op.stream]);
      }
    }
  };
  const auto cold_start = std::chrono::steady_clock::now();
  replay_once();
  const double cold_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - cold_start).count();
  for (auto _ : state) replay_once();
  const AllocatorStats last = alloc->stats();
  alloc.reset();
  for (cudaStream_t s : raw) cudaStreamDestroy(s);
  report_fragmentation(state, last);
  state.counters["cold_replay_ms"] = cold_s * 1e3;
  state.counters["trace_ops"] = static_cast<double>(trace.size());
  state.counters["ops_per_s"] =
      benchmark::Counter(static_cast<double>(trace.size()), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_TraceReplay_Device(benchmark::State& state) {
  replay_on_device(state, 0.25);
}
BENCHMARK(BM_TraceReplay_Device)->Unit(benchmark::kMillisecond);

void BM_TraceReplay_StaticShapes_Device(benchmark::State& state) {
  replay_on_device(state, 0.0);
}
BENCHMARK(BM_TraceReplay_StaticShapes_Device)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
