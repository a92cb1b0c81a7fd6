// C API entry points that only NCCL has (include/gradcomm/comm.h): communicators
// from an ncclUniqueId the caller shared, around an ncclComm_t it owns, one per
// GPU of this process; and the NCCL versions.
#include <cstring>

#include "comm/api/publish.hpp"
#include "comm/nccl/nccl_check.hpp"
#include "comm/nccl/nccl_library.hpp"
#include "comm/nccl/nccl_transport.hpp"
#include "common/api_guard.hpp"
#include "common/config.hpp"
#include "common/device.hpp"
#include "common/env.hpp"

using namespace gradcomm;
using namespace gradcomm::comm;

extern "C" {

GCOMM_API gcommStatus_t gcommCommInitFromUniqueId(const gcommCommConfig_t* config, const void* unique_id,
                                                  size_t id_bytes, gcommComm_t* out) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(out);
    GCOMM_REQUIRE_NOT_NULL(unique_id);
    require(id_bytes == sizeof(ncclUniqueId), "id_bytes is ", id_bytes, " but an ncclUniqueId has ",
            sizeof(ncclUniqueId), " bytes");
    GCOMM_REQUIRE_NOT_NULL(config);
    const gcommCommConfig_t defaults = GCOMM_COMM_CONFIG_INITIALIZER;
    gcommCommConfig_t c = read_config(config, defaults, "gcommCommConfig_t");
    require(c.transport == gcommTransportAuto || c.transport == gcommTransportNccl,
            "config.transport must be gcommTransportAuto or gcommTransportNccl here");
    gcommDevice_t device = c.device;
    if (device.kind == gcommDeviceCuda && device.ordinal < 0) device.ordinal = c.local_rank;
    require(device.kind == gcommDeviceCuda && device.ordinal >= 0,
            "config.device must be a CUDA device (or set config.local_rank)");
    ncclUniqueId id;
    std::memcpy(&id, unique_id, sizeof(id));
    double timeout = timeout_from(c);
    *out =
        publish_communicator(make_nccl_transport_from_id(id, c.rank, c.world_size, device, timeout), timeout);
  });
}

GCOMM_API gcommStatus_t gcommCommWrapNccl(void* nccl_comm, gcommDevice_t device, double timeout_s,
                                          gcommComm_t* out) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(out);
    GCOMM_REQUIRE_NOT_NULL(nccl_comm);
    require(device.kind == gcommDeviceCuda, "an NCCL communicator lives on a CUDA device");
    device = validate_device(device);
    require(!(timeout_s != timeout_s), "timeout_s is NaN");
    double timeout = timeout_s > 0 ? timeout_s : knobs::timeout_seconds();
    *out = publish_communicator(
        std::make_unique<NcclTransport>(static_cast<ncclComm_t>(nccl_comm), false, device), timeout);
  });
}

GCOMM_API gcommStatus_t gcommGetNcclVersion(int* built, int* loaded) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(built);
    GCOMM_REQUIRE_NOT_NULL(loaded);
    nccl();  // throws gcommNotSupported, naming where it looked, when NCCL cannot be loaded
    *built = nccl_built_version();
    *loaded = nccl_loaded_version();
  });
}

GCOMM_API gcommStatus_t gcommCommInitAll(int ndev, const int* devices, gcommComm_t* out) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(out);
    publish_communicators(make_nccl_transports_all(ndev, devices), knobs::timeout_seconds(), out);
  });
}

}  // extern "C"
