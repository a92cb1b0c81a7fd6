// alloc+free latency: the caching allocator (cached sizes and fresh sizes)
// against its raw upstreams. Host cases run anywhere; GPU cases (cudaMalloc,
// cudaMallocAsync from the device's default pool, the cache over device memory)
// skip with the reason when there is no GPU.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <memory>

#include "common/device.hpp"
#include "gradcomm/gradcomm.h"
#include "memory/caching_allocator.hpp"

using namespace gradcomm;
using namespace gradcomm::memory;

namespace {

gcommStream_t const kStream = reinterpret_cast<gcommStream_t>(0x10);

void sizes(benchmark::internal::Benchmark* b) {
  for (int64_t n : {int64_t{512}, int64_t{64} << 10, int64_t{4} << 20, int64_t{64} << 20}) b->Arg(n);
}

// A pair that hits the cache: the block is freed on the stream it is reused on.
void BM_CachedAllocFree_Host(benchmark::State& state) {
  // One allocator shared by every run and thread (static init is thread-safe).
  static const std::unique_ptr<CachingAllocator> alloc =
      make_caching_allocator(gcommHostDevice(), gcommMemoryHost, AllocatorOptions{});
  const auto bytes = static_cast<size_t>(state.range(0));
  gcommStream_t s = reinterpret_cast<gcommStream_t>(0x100 + state.thread_index());
  alloc->deallocate(alloc->allocate(bytes, s), s);  // warm
  for (auto _ : state) {
    void* p = alloc->allocate(bytes, s);
    benchmark::DoNotOptimize(p);
    alloc->deallocate(p, s);
  }
  if (state.thread_index() == 0) {
    state.counters["upstream_allocs"] = static_cast<double>(alloc->stats().upstream_allocs);
  }
}
BENCHMARK(BM_CachedAllocFree_Host)->Apply(sizes);
BENCHMARK(BM_CachedAllocFree_Host)->Arg(64 << 10)->Threads(2);

// The same through the C API (registry lookup and exception firewall included).
void BM_CachedAllocFree_HostCApi(benchmark::State& state) {
  gcommAllocator_t a = nullptr;
  if (gcommAllocatorCreate(gcommHostDevice(), nullptr, &a) != gcommSuccess) {
    state.SkipWithError(gcommGetLastError());
    return;
  }
  const auto bytes = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    void* p = nullptr;
    gcommAllocatorMalloc(a, bytes, kStream, &p);
    benchmark::DoNotOptimize(p);
    gcommAllocatorFree(a, p, kStream);
  }
  gcommAllocatorDestroy(a);
}
BENCHMARK(BM_CachedAllocFree_HostCApi)->Arg(64 << 10);

// Every pair misses: release_threshold 0 gives each segment back at its free,
// so each allocation goes to aligned_alloc (the cache's whole slow path).
void BM_FreshAllocFree_Host(benchmark::State& state) {
  AllocatorOptions o;
  o.release_threshold = 0;
  auto alloc = make_caching_allocator(gcommHostDevice(), gcommMemoryHost, o);
  const auto bytes = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    void* p = alloc->allocate(bytes, kStream);
    benchmark::DoNotOptimize(p);
    alloc->deallocate(p, kStream);
  }
  state.counters["upstream_allocs"] = static_cast<double>(alloc->stats().upstream_allocs);
}
BENCHMARK(BM_FreshAllocFree_Host)->Apply(sizes);

// The raw host upstreams.
void BM_MallocFree(benchmark::State& state) {
  const auto bytes = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    void* p = std::malloc(bytes);
    benchmark::DoNotOptimize(p);
    std::free(p);
  }
}
BENCHMARK(BM_MallocFree)->Apply(sizes);

void BM_AlignedAllocFree(benchmark::State& state) {
  const auto bytes = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    void* p = std::aligned_alloc(256, bytes);
    benchmark::DoNotOptimize(p);
    std::free(p);
  }
}
BENCHMARK(BM_AlignedAllocFree)->Apply(sizes);

// GPU cases.
bool skip_without_gpu(benchmark::State& state) {
  if (gpu_available()) return false;
  state.SkipWithError(("no usable GPU (" + no_gpu_reason() + ")").c_str());
  return true;
}

void BM_CachedAllocFree_Device(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  auto alloc = make_caching_allocator(gcommCudaDevice(0), gcommMemoryDevice, AllocatorOptions{});
  const auto bytes = static_cast<size_t>(state.range(0));
  alloc->deallocate(alloc->allocate(bytes, nullptr), nullptr);
  for (auto _ : state) {
    void* p = alloc->allocate(bytes, nullptr);
    benchmark::DoNotOptimize(p);
    alloc->deallocate(p, nullptr);
  }
}
BENCHMARK(BM_CachedAllocFree_Device)->Apply(sizes);

void BM_CudaMallocFree(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  DeviceGuard guard(0);
  const auto bytes = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    void* p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
      state.SkipWithError("cudaMalloc failed");
      break;
    }
    cudaFree(p);
  }
}
BENCHMARK(BM_CudaMallocFree)->Apply(sizes);

// cudaMallocAsync/cudaFreeAsync from the device's default pool, on one stream:
// the stream-ordered allocator CUDA itself offers.
void BM_CudaMallocAsyncFree(benchmark::State& state) {
  if (skip_without_gpu(state)) return;
  DeviceGuard guard(0);
  cudaStream_t s = nullptr;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  const auto bytes = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    void* p = nullptr;
    if (cudaMallocAsync(&p, bytes, s) != cudaSuccess) {
      state.SkipWithError("cudaMallocAsync failed");
      break;
    }
    cudaFreeAsync(p, s);
  }
  cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
}
BENCHMARK(BM_CudaMallocAsyncFree)->Apply(sizes);

}  // namespace

BENCHMARK_MAIN();
