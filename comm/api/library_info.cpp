// C API: the library's version and the environment report (CUDA, NCCL, GPUs).
// In comm/, the floor that knows the versions of both.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <sstream>

#include "common/api/out_string.hpp"
#include "common/api_guard.hpp"
#include "common/device.hpp"
#include "comm/nccl/nccl_version.hpp"

using namespace gradcomm;

namespace {
std::string cuda_version_string(int code) { return cat(code / 1000, ".", (code % 1000) / 10); }

std::string environment_report() {
  std::ostringstream os;
  os << "gradcomm " << gcommGetVersionString() << "\n";
  int runtime = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) {
    os << "CUDA runtime " << cuda_version_string(runtime) << "\n";
  } else {
    (void)cudaGetLastError();
    os << "CUDA runtime: unknown\n";
  }
  int driver = 0;
  if (cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0) {
    os << "CUDA driver " << cuda_version_string(driver) << "\n";
  } else {
    (void)cudaGetLastError();
    os << "CUDA driver: none\n";
  }
  int loaded = nccl_loaded_version();
  os << "NCCL built " << nccl_version_string(nccl_built_version()) << ", loaded "
     << (loaded ? nccl_version_string(loaded) : std::string("unusable")) << "\n";
  int count = cuda_device_count();
  if (count == 0) {
    os << "GPUs: none (" << no_gpu_reason() << "); gradcomm runs on the host\n";
  } else {
    os << "GPUs: " << count << "\n";
    for (int i = 0; i < count; ++i) {
      cudaDeviceProp prop{};
      if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) {
        (void)cudaGetLastError();
        os << "  cuda:" << i << " (properties unavailable)\n";
        continue;
      }
      char bus[32] = {};
      (void)cudaDeviceGetPCIBusId(bus, sizeof(bus), i);
      os << "  cuda:" << i << " " << prop.name << ", sm_" << prop.major << prop.minor << ", "
         << (prop.totalGlobalMem >> 20) << " MiB, " << prop.multiProcessorCount << " SMs, bus " << bus << "\n";
    }
  }
  return os.str();
}
}  // namespace

extern "C" {

GCOMM_API gcommStatus_t gcommGetVersion(int* version) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(version);
    *version = GCOMM_VERSION_CODE;
  });
}

GCOMM_API const char* gcommGetVersionString(void) {
#define GCOMM_STR2(x) #x
#define GCOMM_STR(x) GCOMM_STR2(x)
  return GCOMM_STR(GCOMM_VERSION_MAJOR) "." GCOMM_STR(GCOMM_VERSION_MINOR) "." GCOMM_STR(GCOMM_VERSION_PATCH);
#undef GCOMM_STR
#undef GCOMM_STR2
}

GCOMM_API gcommStatus_t gcommGetEnvironmentReport(char* buffer, size_t size, size_t* required) {
  return GCOMM_API_CALL({
    copy_out_string(environment_report(), buffer, size, required);
  });
}

}  // extern "C"
