// comm/nccl/ in a build without CUDA (GRADCOMM_CUDA=OFF): no NCCL is built or
// loaded. The NCCL transport and the NCCL-only C API exist and refuse with the
// reason (gcommNotSupported), as the NCCL build refuses a CUDA device on a
// machine without a GPU; the environment report says NCCL is absent and why.
#include "comm/nccl/nccl_job.hpp"
#include "comm/nccl/nccl_version.hpp"
#include "comm/nccl/store_init.hpp"
#include "common/api_guard.hpp"

namespace gradcomm {

namespace {
constexpr const char* kWhy =
    "gradcomm was built without CUDA (GRADCOMM_CUDA=OFF): no NCCL; host ranks use the socket and local "
    "transports";
}

int nccl_built_version() noexcept {
  return 0;
}
int nccl_loaded_version() noexcept {
  return 0;
}
bool nccl_has(NcclFeature) noexcept {
  return false;
}

NcclLoadReport nccl_load_report() noexcept {
  NcclLoadReport r;
  try {
    r.error = kWhy;
  } catch (...) {
  }
  return r;
}

namespace comm {
// Never reached by a job: a CUDA device fails its meeting here, as on a machine
// without a GPU (comm/rank_meeting.cpp finds none in this build).
std::unique_ptr<Transport> make_nccl_over_job(bootstrap::Bootstrap&, const bootstrap::LaunchConfig&,
                                              const JobFacts&, std::string&) {
  fail(gcommNotSupported, "the NCCL transport: ", kWhy);
}
}  // namespace comm

}  // namespace gradcomm

using namespace gradcomm;

extern "C" {

GCOMM_API gcommStatus_t gcommCommInitFromUniqueId(const gcommCommConfig_t*, const void*, size_t,
                                                  gcommComm_t* out) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(out);
    fail(gcommNotSupported, kWhy);
  });
}

GCOMM_API gcommStatus_t gcommCommWrapNccl(void*, gcommDevice_t, double, gcommComm_t* out) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(out);
    fail(gcommNotSupported, kWhy);
  });
}

GCOMM_API gcommStatus_t gcommGetNcclVersion(int* built, int* loaded) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(built);
    GCOMM_REQUIRE_NOT_NULL(loaded);
    fail(gcommNotSupported, kWhy);
  });
}

GCOMM_API gcommStatus_t gcommCommInitAll(int ndev, const int* devices, gcommComm_t* out) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(out);
    (void)comm::nccl_device_list(ndev, devices);  // refuses as on a machine without a GPU
    fail(gcommNotSupported, kWhy);
  });
}

}  // extern "C"
