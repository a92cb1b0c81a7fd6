// Test rig for the reducer: local communicators on the host or on GPU 0 (ranks
// as threads), per-rank gradients with random values, and the reference
// (sum over ranks / world, in double). The same tests run on both devices; the
// GPU instantiation skips without a GPU.
#pragma once

#include <cstring>

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "comm/local/ranks.hpp"
#include "gradcomm/gradcomm.h"
#include "kernels/reference.hpp"
#include "support/gpu.hpp"

namespace gradcomm::test {

// One gradient's storage where the reducer's device wants it.
struct GradMem {
  gcommDataType_t dtype = gcommFloat32;
  size_t count = 0;
  void* data = nullptr;
  bool gpu = false;
  bool owned = true;

  GradMem() = default;
  GradMem(gcommDataType_t d, size_t n, bool on_gpu) : dtype(d), count(n), gpu(on_gpu) {
    size_t bytes = std::max<size_t>(n * elem_size(d), 1);
    // Written once (0x3c bytes: finite f32 and f16 values) so that tests which
    // never upload a gradient still read defined memory: compute-sanitizer's
    // initcheck flagged those reads on an H100 (2026-11-25).
    if (gpu) {
      EXPECT_EQ(cudaMalloc(&data, bytes), cudaSuccess);
      EXPECT_EQ(cudaMemset(data, 0x3c, bytes), cudaSuccess);
    } else {
      data = std::malloc(bytes);
      std::memset(data, 0x3c, bytes);
    }
  }
  GradMem(const GradMem&) = delete;
  GradMem& operator=(const GradMem&) = delete;
  GradMem(GradMem&& o) noexcept { *this = std::move(o); }
  GradMem& operator=(GradMem&& o) noexcept {
    std::swap(dtype, o.dtype);
    std::swap(count, o.count);
    std::swap(data, o.data);
    std::swap(gpu, o.gpu);
    std::swap(owned, o.owned);
    return *this;
  }
  ~GradMem() {
    if (!owned || data == nullptr) return;
    if (gpu)
      cudaFree(data);
    else
      std::free(data);
  }
  // A view of memory the reducer owns (grad_as_bucket_view).
  static GradMem view(gcommDataType_t d, size_t n, void* p, bool on_gpu) {
    GradMem m;
    m.dtype = d;
    m.count = n;
    m.data = p;
    m.gpu = on_gpu;
    m.owned = false;
    return m;
  }
  gcommTensor_t tensor() const { return gcommTensor_t{count ? data : nullptr, count, dtype}; }
  // Writes the values in order on `stream` (the "backward" that produces the gradient).
  void upload(const TypedBuffer& b, cudaStream_t stream) {
    size_t bytes = count * elem_size(dtype);
    if (bytes == 0) return;
    if (gpu) {
      ASSERT_EQ(cudaMemcpyAsync(data, b.bytes.data() + b.offset * elem_size(dtype), bytes,
                                cudaMemcpyHostToDevice, stream),
                cudaSuccess);
    } else {
      std::memcpy(data, b.bytes.data() + b.offset * elem_size(dtype), bytes);
    }
  }
  TypedBuffer download(cudaStream_t stream) const {
    TypedBuffer b{dtype, count, 0, std::vector<unsigned char>((count + 8) * elem_size(dtype))};
    size_t bytes = count * elem_size(dtype);
    if (bytes == 0) return b;
    if (gpu) {
      EXPECT_EQ(cudaMemcpyAsync(b.bytes.data(), data, bytes, cudaMemcpyDeviceToHost, stream), cudaSuccess);
      EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    } else {
      std::memcpy(b.bytes.data(), data, bytes);
    }
    return b;
  }
};

// Relative precision of a dtype (half an ulp at 1.0, rounded up).
inline double precision_of(gcommDataType_t d) {
  return d == gcommFloat32 ? 1.2e-7 : d == gcommFloat16 ? 9.8e-4 : 7.9e-3;
}

// Checks got[j] == sum_r inputs[r][j] * factor, within the rounding of the dtypes
// the values pass through (gradient dtype and wire dtype) for `world` terms.
inline void expect_reduced(const TypedBuffer& got, const std::vector<const TypedBuffer*>& inputs,
                           double factor, gcommDataType_t wire, const std::string& what) {
  double eps = std::max(precision_of(got.dtype), precision_of(wire)) * (3.0 + inputs.size());
  for (size_t j = 0; j < got.count; ++j) {
    double ref = 0.0, mag = 0.0;
    for (const TypedBuffer* in : inputs) {
      ref += in->get(j);
      mag += std::fabs(in->get(j));
    }
    ref *= factor;
    mag *= std::fabs(factor);
    double g = got.get(j);
    ASSERT_NEAR(g, ref, eps * mag + 1e-30) << what << " element " << j << " of " << got.count;
  }
}

// The devices the reducer tests run on.
enum class RigDevice { kHost, kGpu };

inline std::string rig_name(const ::testing::TestParamInfo<RigDevice>& info) {
  return info.param == RigDevice::kHost ? "Host" : "Gpu";
}
// How gtest (and ctest's test list) print the parameter: "host", not "4-byte object <00-00 00-00>".
inline void PrintTo(RigDevice d, std::ostream* os) {
  *os << (d == RigDevice::kHost ? "host" : "gpu");
}

// body(rank, comm, stream) on one thread per rank, with a stream of its own on
// the GPU (device 0); returns each rank's error ("" = ok).
inline std::vector<std::string> run_rank_bodies(
    std::vector<gcommComm_t>& comms, bool on_gpu,
    const std::function<std::string(int, gcommComm_t, cudaStream_t)>& body) {
  return run_ranks(comms, [&](int rank, gcommComm_t comm) -> std::string {
    cudaStream_t stream = nullptr;
    if (on_gpu && (cudaSetDevice(0) != cudaSuccess || cudaStreamCreate(&stream) != cudaSuccess))
      return "cannot create a stream";
    std::string e = body(rank, comm, stream);
    if (stream != nullptr) cudaStreamDestroy(stream);
    return e;
  });
}

class ReducerRig : public ::testing::TestWithParam<RigDevice> {
 public:
  void SetUp() override {
    if (gpu()) {
      GCOMM_SKIP_WITHOUT_GPU();
      ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    }
  }
  bool gpu() const { return GetParam() == RigDevice::kGpu; }
  gcommDevice_t device() const { return gpu() ? gcommCudaDevice(0) : gcommHostDevice(); }

  std::vector<gcommComm_t> make_comms(int n, double timeout_s = 60.0) {
    std::vector<gcommComm_t> comms(n, nullptr);
    gcommCommConfig_t cfg = GCOMM_COMM_CONFIG_INITIALIZER;
    cfg.timeout_s = timeout_s;
    EXPECT_EQ(gcommCommInitLocal(n, device(), &cfg, comms.data()), gcommSuccess) << gcommGetLastError();
    return comms;
  }

  // body(rank, comm, stream) on one thread per rank, with a stream of its own on
  // the GPU; fails the test with every rank's error.
  void run(std::vector<gcommComm_t>& comms,
           const std::function<std::string(int, gcommComm_t, cudaStream_t)>& body) {
    auto errors = run_rank_bodies(comms, gpu(), body);
    for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
    destroy(comms);
  }
};

// "" or "<call> failed: <status>: <message>".
inline std::string check(gcommStatus_t s, const char* call) {
  if (s == gcommSuccess) return "";
  return std::string(call) + " failed: " + gcommGetStatusString(s) + ": " + gcommGetLastError();
}
#define RIG_CHECK(call)                                              \
  do {                                                               \
    std::string rig_error_ = ::gradcomm::test::check((call), #call); \
    if (!rig_error_.empty()) return rig_error_;                      \
  } while (0)

}  // namespace gradcomm::test
