// Kernel benchmarks on model-shaped gradient sets (bench/common/grad_sets.hpp):
// unscale+check, pack (f32 -> f16 bucket with 1/world), the fused unpack
// epilogue (f16 bucket -> f32 += , x 1/(world*scale), found-inf), the global
// norm, and the device's copy bandwidth on the same bytes as the baseline.
// GPU cases use CUDA-event timing (UseManualTime) and report GB/s and launches
// per call; without a GPU they are skipped. Host-twin cases run everywhere.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <random>
#include <string>
#include <vector>

#include "common/device.hpp"
#include "common/grad_sets.hpp"
#include "kernels/ops.hpp"

namespace {

using namespace gradcomm;
using namespace gradcomm::kernels;
using namespace gradcomm::bench;

const char* kSets[] = {"resnet50", "gpt2_medium", "tiny"};
constexpr size_t kMaxTensorsPerLaunch = 900;  // kernels/cuda_kernels.cu

enum class Op { kUnscale, kPack, kUnpack, kNorm, kCopy };

// Gradients (f32) in one allocation, each tensor 16-byte aligned, plus an f16
// bucket and scalars, on the GPU or the host.
struct Workload {
  bool gpu;
  std::vector<gcommTensor_t> grads;
  void* grad_mem = nullptr;
  void* bucket = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  float* scalars = nullptr;  // [inv_scale, found_inf, device_scale, norm]
  size_t elements = 0;

  Workload(const std::vector<size_t>& sizes, bool on_gpu) : gpu(on_gpu) {
    size_t padded = 0;
    for (size_t n : sizes) padded += (n + 3) / 4 * 4;
    elements = total_elements(sizes);
    std::vector<float> init(padded);
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (float& v : init) v = u(rng);
    float host_scalars[4] = {1.0f / 65536.0f, 0.0f, 0.5f, 0.0f};
    grad_mem = alloc(padded * 4);
    bucket = alloc(elements * 2);
    scalars = static_cast<float*>(alloc(sizeof(host_scalars)));
    copy_in(grad_mem, init.data(), padded * 4);
    copy_in(scalars, host_scalars, sizeof(host_scalars));
    size_t off = 0;
    for (size_t n : sizes) {
      grads.push_back(gcommTensor_t{static_cast<float*>(grad_mem) + off, n, gcommFloat32});
      off += (n + 3) / 4 * 4;
    }
    workspace_bytes = norm_workspace_bytes(grads.data(), grads.size());
    workspace = alloc(workspace_bytes);
  }
  ~Workload() {
    for (void* p : {grad_mem, bucket, workspace, static_cast<void*>(scalars)})
      gpu ? (void)cudaFree(p) : free(p);
  }
  void* alloc(size_t bytes) {
    void* p = nullptr;
    if (gpu) {
      if (cudaMalloc(&p, bytes) != cudaSuccess) p = nullptr;
    } else {
      p = aligned_alloc(256, (bytes + 255) / 256 * 256);
    }
    return p;
  }
  void copy_in(void* dst, const void* src, size_t bytes) {
    if (gpu)
      cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice);
    else
      memcpy(dst, src, bytes);
  }
  Target target() const { return Target{gpu ? gcommCudaDevice(0) : gcommHostDevice(), nullptr}; }

  void run(Op op) {
    switch (op) {
      case Op::kUnscale:
        unscale_and_check(grads.data(), grads.size(), scalars, scalars + 1, target());
        break;
      case Op::kPack:
        pack(grads.data(), grads.size(), nullptr, bucket, gcommFloat16, 0.125f, nullptr, target());
        break;
      case Op::kUnpack:
        unpack(bucket, gcommFloat16, nullptr, grads.data(), grads.size(), 0.125f, scalars + 2, true,
               scalars + 1, target());
        break;
      case Op::kNorm:
        l2_norm(grads.data(), grads.size(), scalars + 3, nullptr, workspace, workspace_bytes, target());
        break;
      case Op::kCopy:
        cudaMemcpyAsync(bucket, grad_mem, elements * 2, cudaMemcpyDeviceToDevice, nullptr);
        break;
    }
  }
  // Bytes each op must move at least (read + write).
  size_t bytes(Op op) const {
    switch (op) {
      case Op::kUnscale:
        return elements * 8;
      case Op::kPack:
        return elements * 6;
      case Op::kUnpack:
        return elements * 10;
      case Op::kNorm:
        return elements * 4;
      case Op::kCopy:
        return elements * 4;  // elements*2 read + elements*2 written
    }
    return 0;
  }
};

void BM_Gpu(benchmark::State& state, Op op, const char* set) {
  if (!gpu_available()) {
    state.SkipWithError("no usable GPU");
    return;
  }
  cudaSetDevice(0);
  Workload w(grad_set(set), true);
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  w.run(op);  // warm-up
  cudaDeviceSynchronize();
  for (auto _ : state) {
    cudaEventRecord(start, nullptr);
    w.run(op);
    cudaEventRecord(stop, nullptr);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    state.SetIterationTime(ms / 1e3);
  }
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(w.bytes(op)) * state.iterations(), benchmark::Counter::kIsRate);
  size_t nonempty = w.grads.size();
  state.counters["launches"] =
      op == Op::kCopy
          ? 1
          : (nonempty + kMaxTensorsPerLaunch - 1) / kMaxTensorsPerLaunch + (op == Op::kNorm ? 2 : 0);
  state.counters["tensors"] = static_cast<double>(w.grads.size());
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

void BM_Host(benchmark::State& state, Op op, const char* set) {
  Workload w(grad_set(set), false);
  for (auto _ : state) w.run(op);
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(w.bytes(op)) * state.iterations(), benchmark::Counter::kIsRate);
}

const struct {
  Op op;
  const char* name;
} kOps[] = {{Op::kUnscale, "unscale"},
            {Op::kPack, "pack_f16"},
            {Op::kUnpack, "unpack_epilogue"},
            {Op::kNorm, "l2norm"},
            {Op::kCopy, "copy_baseline"}};

int register_all() {
  for (const char* set : kSets)
    for (const auto& o : kOps) {
      benchmark::RegisterBenchmark((std::string("gpu/") + o.name + "/" + set).c_str(), BM_Gpu, o.op, set)
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
      if (o.op != Op::kCopy && std::string(set) != "gpt2_medium")
        benchmark::RegisterBenchmark((std::string("host/") + o.name + "/" + set).c_str(), BM_Host, o.op, set)
            ->Unit(benchmark::kMicrosecond);
    }
  return 0;
}
const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();
