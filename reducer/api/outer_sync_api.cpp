// C API of outer synchronization (include/gradcomm/outer_sync.h).
#include <cstring>
#include <memory>

#include "common/api_guard.hpp"
#include "common/config.hpp"
#include "common/handle_registry.hpp"
#include "reducer/outer_sync.hpp"

using namespace gradcomm;
using namespace gradcomm::reducer;

struct gcommOuterSync {
  std::unique_ptr<OuterSync> sync;
};

namespace {

HandleRegistry<gcommOuterSync>& outer_syncs() {
  static HandleRegistry<gcommOuterSync> registry("gcommOuterSync_t");
  return registry;
}

OuterSync& sync_of(gcommOuterSync_t handle) {
  return *outer_syncs().get(handle)->sync;
}

}  // namespace

GCOMM_API gcommStatus_t gcommOuterSyncCreate(gcommComm_t comm, const gcommTensor_t* params, size_t num_params,
                                             const gcommOuterSyncConfig_t* config, gcommOuterSync_t* sync) {
  return GCOMM_API_CALL({
    GCOMM_REQUIRE_NOT_NULL(sync);
    const gcommOuterSyncConfig_t defaults = GCOMM_OUTER_SYNC_CONFIG_INITIALIZER;
    const gcommOuterSyncConfig_t c = read_config(config, defaults, "gcommOuterSyncConfig_t");
    auto made = std::make_unique<gcommOuterSync>();
    made->sync = std::make_unique<OuterSync>(comm, params, num_params, c);
    outer_syncs().add(made.get());
    *sync = made.release();
  });
}

GCOMM_API gcommStatus_t gcommOuterSyncDestroy(gcommOuterSync_t sync) {
  return GCOMM_API_CALL({ outer_syncs().destroy(sync); });
}

GCOMM_API gcommStatus_t gcommOuterSyncStep(gcommOuterSync_t sync, gcommStream_t stream, int* synced) {
  return GCOMM_API_CALL({
    const int n = sync_of(sync).step(stream);
    if (synced != nullptr) *synced = n;
  });
}

GCOMM_API gcommStatus_t gcommOuterSyncGetStats(gcommOuterSync_t sync, gcommOuterSyncStats_t* stats) {
  return GCOMM_API_CALL({
    const gcommOuterSyncStats_t out = sync_of(sync).stats();
    write_versioned_out(out, stats, "gcommOuterSyncStats_t", "GCOMM_OUTER_SYNC_STATS_INITIALIZER");
  });
}

GCOMM_API gcommStatus_t gcommOuterSyncSaveState(gcommOuterSync_t sync, void* buffer, size_t size,
                                                size_t* required) {
  return GCOMM_API_CALL({
    const std::vector<uint8_t> state = sync_of(sync).save();
    if (required != nullptr) *required = state.size();
    if (size == 0) return;
    GCOMM_REQUIRE_NOT_NULL(buffer);
    require(size >= state.size(), "size ", size, " is below the state's ", state.size(),
            " bytes (ask with size 0)");
    std::memcpy(buffer, state.data(), state.size());
  });
}

GCOMM_API gcommStatus_t gcommOuterSyncLoadState(gcommOuterSync_t sync, const void* data, size_t size) {
  return GCOMM_API_CALL({ sync_of(sync).load(static_cast<const uint8_t*>(data), size); });
}
