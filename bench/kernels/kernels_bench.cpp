// Kernel benchmarks on model-shaped gradient sets (bench/common/grad_sets.hpp):
// unscale+check, pack (f32 -> f16 bucket with 1/world), the fused unpack
// epilogue (f16 bucket -> f32 += , x 1/(world*scale), found-inf), the global
// norm, the block-quantized wires' quantize (with error feedback and residual) and
// dequantize (int8, fp8 e4m3, fp4 e2m1), the divergence check's tensor hash (XXH64 chunks of
// each tensor; the host's is the library's), the unpack epilogue cut in 25 MiB slices of the
// gradients in registration order (one call each, as the reducer makes one per
// bucket; its plan differs in detail: reverse order, a smaller first bucket,
// aligned entries), so that what a launch costs shows in the time,
// and the device's copy bandwidth on the same bytes as the baseline.
// GPU cases use CUDA-event timing (UseManualTime) and report bytes_per_second (the
// least bytes the op must move, read + written) and launches
// per call; without a GPU they are skipped. Host-twin cases run everywhere.
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <random>
#include <string>
#include <vector>

#include "common/device.hpp"
#include "common/grad_sets.hpp"
#include "kernels/hash/tensor_hash.hpp"
#include "kernels/ops.hpp"
#include "kernels/quant/fp4.hpp"
#include "kernels/quant/fp8.hpp"
#include "kernels/quant/int8.hpp"
#include "kernels/quant/quant.hpp"

namespace {

using namespace gradcomm;
using namespace gradcomm::kernels;
using namespace gradcomm::bench;

const char* kSets[] = {"resnet50", "gpt2_medium", "tiny"};
constexpr size_t kMaxTensorsPerLaunch = 900;        // kernels/cuda_kernels.cu's kLargeBatch
constexpr size_t kSmallBatch = 64;                  // and its kSmallBatch
constexpr size_t kBucketBytes = 25u * 1024 * 1024;  // the reducer's default bucket cap
constexpr size_t kQuantBlock = 256;                 // the quantized wires' default block

enum class Op {
  kUnscale,
  kPack,
  kUnpack,
  kUnpackPerBucket,
  kNorm,
  kInt8Quantize,
  kInt8Dequantize,
  kFp8Quantize,
  kFp8Dequantize,
  kFp4Quantize,
  kFp4Dequantize,
  kTensorHash,
  kCopy
};

// Gradients (f32) in one allocation, each tensor 16-byte aligned, plus an f16
// bucket and scalars, on the GPU or the host.
struct Workload {
  bool gpu;
  std::vector<gcommTensor_t> grads;
  void* grad_mem = nullptr;
  void* bucket = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  float* scalars = nullptr;           // [inv_scale, found_inf, device_scale, norm]
  std::vector<uint64_t> hash_chunks;  // the divergence check's chunk hashes (host)
  uint64_t* device_chunks = nullptr;  // and on the GPU
  size_t elements = 0;
  std::vector<size_t> bucket_starts;    // first tensor of each 25 MiB bucket, then grads.size()
  std::vector<size_t> bucket_elements;  // each bucket's first element in the whole bucket buffer
  std::vector<size_t> bucket_offsets;   // each tensor's element offset in its bucket
  // The quantized wire of the whole set as one bucket of one chunk: error
  // feedback, residual (f32, `elements` each) and codes (lazily allocated).
  kernels::quant::Layout quant_layout;
  void* error = nullptr;
  void* residual = nullptr;
  void* codes = nullptr;

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
    size_t in_bucket = 0, before = 0;
    for (size_t k = 0; k < grads.size(); ++k) {
      if (k == 0 || (in_bucket > 0 && (in_bucket + grads[k].count) * 4 > kBucketBytes)) {
        bucket_starts.push_back(k);
        bucket_elements.push_back(before);
        in_bucket = 0;
      }
      bucket_offsets.push_back(in_bucket);
      in_bucket += grads[k].count;
      before += grads[k].count;
    }
    bucket_starts.push_back(grads.size());
    size_t chunks = 0;
    for (const gcommTensor_t& g : grads) chunks += kernels::hash::chunks_of(g.count * 4);
    hash_chunks.resize(chunks);
    if (gpu) device_chunks = static_cast<uint64_t*>(alloc(chunks * 8));
  }
  ~Workload() {
    for (void* p : {grad_mem, bucket, workspace, static_cast<void*>(scalars), error, residual, codes,
                    static_cast<void*>(device_chunks)})
      if (p != nullptr) gpu ? (void)cudaFree(p) : free(p);
  }
  // The quantized wire's buffers and `op`'s codes of the gradients, made before the
  // timed loop of a quantized op (the other cases do not need them).
  bool prepare_quant(Op op) {
    if (codes != nullptr) return true;
    quant_layout = kernels::quant::layout_for(elements, 1, kQuantBlock, codec(op).code_bits);
    std::vector<float> e(elements);
    std::mt19937 rng(2);
    std::uniform_real_distribution<float> u(-1e-3f, 1e-3f);
    for (float& v : e) v = u(rng);
    error = alloc(elements * 4);
    residual = alloc(elements * 4);
    codes = alloc(quant_layout.total_bytes());
    if (error == nullptr || residual == nullptr || codes == nullptr) return false;
    copy_in(error, e.data(), elements * 4);
    kernels::quant::quantize(codec(op), static_cast<const float*>(grad_mem), nullptr, quant_layout, codes,
                             nullptr, target());
    return true;
  }
  static bool quantized(Op op) {
    return op == Op::kInt8Quantize || op == Op::kInt8Dequantize || op == Op::kFp8Quantize ||
           op == Op::kFp8Dequantize || op == Op::kFp4Quantize || op == Op::kFp4Dequantize;
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
      case Op::kUnpackPerBucket:
        for (size_t b = 0; b + 1 < bucket_starts.size(); ++b) {
          const size_t first = bucket_starts[b], n = bucket_starts[b + 1] - first;
          // Offsets are within the bucket, whose f16 elements start at bucket_elements[b].
          unpack(static_cast<const char*>(bucket) + bucket_elements[b] * 2, gcommFloat16,
                 &bucket_offsets[first], &grads[first], n, 0.125f, scalars + 2, true, scalars + 1, target());
        }
        break;
      case Op::kInt8Quantize:
      case Op::kFp8Quantize:
      case Op::kFp4Quantize:
        // The contiguous gradient memory as one f32 vector (the quantized wires pack first).
        kernels::quant::quantize(codec(op), static_cast<const float*>(grad_mem),
                                 static_cast<const float*>(error), quant_layout, codes,
                                 static_cast<float*>(residual), target());
        break;
      case Op::kInt8Dequantize:
      case Op::kFp8Dequantize:
      case Op::kFp4Dequantize:
        kernels::quant::dequantize(codec(op), codes, quant_layout, static_cast<float*>(residual), target());
        break;
      case Op::kNorm:
        l2_norm(grads.data(), grads.size(), scalars + 3, nullptr, workspace, workspace_bytes, target());
        break;
      case Op::kTensorHash:  // every tensor's chunk hashes (the divergence check's pass over the bytes)
        for (size_t k = 0, c = 0; k < grads.size(); c += kernels::hash::chunks_of(grads[k].count * 4), ++k) {
          if (gpu)
            kernels::hash::cuda::chunk_hashes(grads[k].data, grads[k].count * 4, device_chunks + c, nullptr);
          else
            kernels::hash::host::chunk_hashes(grads[k].data, grads[k].count * 4, hash_chunks.data() + c);
        }
        break;
      case Op::kCopy:
        cudaMemcpyAsync(bucket, grad_mem, elements * 2, cudaMemcpyDeviceToDevice, nullptr);
        break;
    }
  }
  static const kernels::quant::Codec& codec(Op op) {
    if (op == Op::kInt8Quantize || op == Op::kInt8Dequantize) return kernels::quant::int8_codec();
    if (op == Op::kFp4Quantize || op == Op::kFp4Dequantize) return kernels::quant::fp4_e2m1_codec();
    return kernels::quant::fp8_e4m3_codec();
  }
  // Bytes each op must move at least (read + write).
  size_t bytes(Op op) const {
    switch (op) {
      case Op::kUnpackPerBucket:
        return elements * 10;
      case Op::kInt8Quantize:
      case Op::kFp8Quantize:  // x and e read; codes (+ a scale per block) and residual written
        return elements * 13 + elements / kQuantBlock * 4;
      case Op::kInt8Dequantize:
      case Op::kFp8Dequantize:  // codes and scales read, f32 written
        return elements * 5 + elements / kQuantBlock * 4;
      case Op::kFp4Quantize:  // as above with half a byte a code
        return elements * 12 + elements / 2 + elements / kQuantBlock * 4;
      case Op::kFp4Dequantize:
        return elements * 4 + elements / 2 + elements / kQuantBlock * 4;
      case Op::kUnscale:
        return elements * 8;
      case Op::kPack:
        return elements * 6;
      case Op::kUnpack:
        return elements * 10;
      case Op::kNorm:
      case Op::kTensorHash:
        return elements * 4;
      case Op::kCopy:
        return elements * 4;  // elements*2 read + elements*2 written
    }
    return 0;
  }
};

// Launches of one call of `op`: a tensor list goes out in batches of up to 900
// tensors, or 64 where the whole list is that short (kernels/cuda_kernels.cu).
double launches(const Workload& w, Op op) {
  auto of_list = [](size_t n) {
    return n <= kSmallBatch ? 1 : (n + kMaxTensorsPerLaunch - 1) / kMaxTensorsPerLaunch;
  };
  if (op == Op::kCopy || Workload::quantized(op)) return 1;
  if (op == Op::kTensorHash) return static_cast<double>(w.grads.size());  // a launch a tensor
  if (op == Op::kUnpackPerBucket) {
    size_t total = 0;
    for (size_t b = 0; b + 1 < w.bucket_starts.size(); ++b)
      total += of_list(w.bucket_starts[b + 1] - w.bucket_starts[b]);
    return static_cast<double>(total);
  }
  const size_t per_list =
      (w.grads.size() + kMaxTensorsPerLaunch - 1) / kMaxTensorsPerLaunch;  // l2_norm: always 900
  return static_cast<double>((op == Op::kNorm ? per_list : of_list(w.grads.size())) +
                             (op == Op::kNorm ? 2 : 0));
}

void BM_Gpu(benchmark::State& state, Op op, const char* set) {
  if (!gpu_available()) {
    state.SkipWithError("no usable GPU");
    return;
  }
  cudaSetDevice(0);
  Workload w(grad_set(set), true);
  if (Workload::quantized(op) && !w.prepare_quant(op)) {
    state.SkipWithError("cannot allocate the quantized wire's buffers on the GPU");
    return;
  }
  w.run(op);  // warm-up
  if (cudaDeviceSynchronize() != cudaSuccess) {
    state.SkipWithError("a CUDA call failed during the warm-up");
    return;
  }
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  for (auto _ : state) {
    cudaEventRecord(start, nullptr);
    w.run(op);
    cudaEventRecord(stop, nullptr);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    state.SetIterationTime(ms / 1e3);
  }
  state.SetBytesProcessed(static_cast<int64_t>(w.bytes(op)) * state.iterations());
  state.counters["launches"] = launches(w, op);
  state.counters["tensors"] = static_cast<double>(w.grads.size());
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

void BM_Host(benchmark::State& state, Op op, const char* set) {
  Workload w(grad_set(set), false);
  if (Workload::quantized(op) && !w.prepare_quant(op)) {
    state.SkipWithError("cannot allocate the quantized wire's buffers");
    return;
  }
  w.run(op);  // warm-up: first touches of the buffers are not timed
  for (auto _ : state) w.run(op);
  state.SetBytesProcessed(static_cast<int64_t>(w.bytes(op)) * state.iterations());
}

const struct {
  Op op;
  const char* name;
} kOps[] = {{Op::kUnscale, "unscale"},
            {Op::kPack, "pack_f16"},
            {Op::kUnpack, "unpack_epilogue"},
            {Op::kUnpackPerBucket, "unpack_per_bucket"},
            {Op::kNorm, "l2norm"},
            {Op::kInt8Quantize, "int8_quantize"},
            {Op::kInt8Dequantize, "int8_dequantize"},
            {Op::kFp8Quantize, "fp8_quantize"},
            {Op::kFp8Dequantize, "fp8_dequantize"},
            {Op::kFp4Quantize, "fp4_quantize"},
            {Op::kFp4Dequantize, "fp4_dequantize"},
            {Op::kTensorHash, "tensor_hash"},
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
