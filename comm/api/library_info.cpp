// C API: the library's version and the environment report (CUDA, NCCL, GPUs).
// In comm/, the floor that knows the versions of both.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/nccl/nccl_version.hpp"
#include "common/api/out_string.hpp"
#include "common/api_guard.hpp"
#include "common/device.hpp"

using namespace gradcomm;

namespace {
std::string cuda_version_string(int code) {
  return cat(code / 1000, ".", (code % 1000) / 10);
}

struct GpuFacts {
  int ordinal = 0;
  bool known = false;  // properties read
  std::string name, bus;
  int sm = 0, sms = 0;
  size_t mib = 0;
};

// What the report says, gathered once and rendered as text or as JSON.
struct EnvironmentFacts {
  int runtime = 0, driver = 0;  // 0: unknown / none
  int nccl_built = 0, nccl_loaded = 0;
  std::string nccl_path, nccl_error;
  std::string no_gpu;  // why there is none, when there is none
  std::vector<GpuFacts> gpus;
};

EnvironmentFacts gather() {
  EnvironmentFacts f;
  if (cudaRuntimeGetVersion(&f.runtime) != cudaSuccess) f.runtime = 0;
  if (cudaDriverGetVersion(&f.driver) != cudaSuccess) f.driver = 0;
  (void)cudaGetLastError();
  f.nccl_built = nccl_built_version();
  NcclLoadReport nccl = nccl_load_report();
  f.nccl_loaded = nccl.version;
  f.nccl_path = nccl.path;
  f.nccl_error = nccl.error;
  int count = cuda_device_count();
  if (count == 0) f.no_gpu = no_gpu_reason();
  for (int i = 0; i < count; ++i) {
    GpuFacts g;
    g.ordinal = i;
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) == cudaSuccess) {
      char bus[32] = {};
      (void)cudaDeviceGetPCIBusId(bus, sizeof(bus), i);
      g.known = true;
      g.name = prop.name;
      g.bus = bus;
      g.sm = prop.major * 10 + prop.minor;
      g.sms = prop.multiProcessorCount;
      g.mib = prop.totalGlobalMem >> 20;
    }
    (void)cudaGetLastError();
    f.gpus.push_back(g);
  }
  return f;
}

std::string environment_text(const EnvironmentFacts& f) {
  std::ostringstream os;
  os << "gradcomm " << gcommGetVersionString() << "\n";
#ifdef GRADCOMM_CUDA_ABSENT
  os << "CUDA: not built in (GRADCOMM_CUDA=OFF): host ranks only\n";
#else
  os << "CUDA runtime " << (f.runtime ? cuda_version_string(f.runtime) : std::string("unknown")) << "\n";
  os << "CUDA driver " << (f.driver ? cuda_version_string(f.driver) : std::string("none")) << "\n";
#endif
  os << "NCCL built " << nccl_version_string(f.nccl_built);
  if (f.nccl_loaded)
    os << ", loaded " << nccl_version_string(f.nccl_loaded) << " from " << f.nccl_path << "\n";
  else
    os << ", not loadable (the host and local transports work without it): " << f.nccl_error << "\n";
  if (f.gpus.empty()) {
    os << "GPUs: none, " << f.no_gpu << "; gradcomm runs on the host\n";
  } else {
    os << "GPUs: " << f.gpus.size() << "\n";
    for (const GpuFacts& g : f.gpus) {
      if (!g.known) {
        os << "  cuda:" << g.ordinal << " (properties unavailable)\n";
        continue;
      }
      os << "  cuda:" << g.ordinal << " " << g.name << ", sm_" << g.sm << ", " << g.mib << " MiB, " << g.sms
         << " SMs, bus " << g.bus << "\n";
    }
  }
  return os.str();
}

std::string environment_json(const EnvironmentFacts& f) {
  using nlohmann::json;
  auto version_or_null = [](int code, auto format) { return code ? json(format(code)) : json(nullptr); };
  json j;
  j["gradcomm"] = gcommGetVersionString();
#ifdef GRADCOMM_CUDA_ABSENT
  j["cuda_built"] = false;
#else
  j["cuda_built"] = true;
#endif
  j["cuda_runtime"] = version_or_null(f.runtime, cuda_version_string);
  j["cuda_driver"] = version_or_null(f.driver, cuda_version_string);
  j["nccl"] = {{"built", nccl_version_string(f.nccl_built)},
               {"loaded", version_or_null(f.nccl_loaded, nccl_version_string)},
               {"path", f.nccl_loaded ? json(f.nccl_path) : json(nullptr)},
               {"error", f.nccl_loaded ? json(nullptr) : json(f.nccl_error)}};
  j["gpus"] = json::array();
  for (const GpuFacts& g : f.gpus) {
    json d = {{"ordinal", g.ordinal}};
    if (g.known) {
      d["name"] = g.name;
      d["sm"] = g.sm;
      d["memory_mib"] = g.mib;
      d["multiprocessors"] = g.sms;
      d["pci_bus_id"] = g.bus;
    }
    j["gpus"].push_back(d);
  }
  j["no_gpu_reason"] = f.gpus.empty() ? json(f.no_gpu) : json(nullptr);
  // Replace, never throw, on bytes that are not UTF-8 (a GPU name, a path).
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
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
  return GCOMM_API_CALL({ copy_out_string(environment_text(gather()), buffer, size, required); });
}

GCOMM_API gcommStatus_t gcommGetEnvironmentJson(char* buffer, size_t size, size_t* required) {
  return GCOMM_API_CALL({ copy_out_string(environment_json(gather()), buffer, size, required); });
}

}  // extern "C"
