// Fuzz target: every versioned config struct of the C API (log, allocator, grad
// scaler, communicator, reducer), with arbitrary size,
// magic, version and field values. Each call must return a status (never crash,
// never read past the struct) and, on success, create something destroyable.
// Pointer fields are forced to NULL or to valid strings: a caller's wild pointer
// cannot be validated by any library.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz_input.hpp"
#include "gradcomm/gradcomm.h"

namespace {

// The struct's bytes come from the input; `size` may claim less than the real
// struct (an older caller) or more (a newer one), so back it with enough room.
template <class Config>
Config* fill(gradcomm::fuzz::Input& in, std::vector<uint8_t>& storage) {
  storage.assign(sizeof(Config) * 2, 0);
  in.bytes(storage.data(), sizeof(Config));
  Config* config = reinterpret_cast<Config*>(storage.data());
  uint8_t mode = in.byte();
  if (mode & 1) config->magic = GCOMM_CONFIG_MAGIC;  // get past the magic check half the time
  if (mode & 2) config->size = sizeof(Config) - (mode >> 4) * 4;
  if (config->size > storage.size()) config->size = storage.size();
  return config;
}

void fuzz_log_config(gradcomm::fuzz::Input& in) {
  std::vector<uint8_t> storage;
  auto* config = fill<gcommLogConfig_t>(in, storage);
  config->callback = nullptr;
  config->user_data = nullptr;
  if (config->level > gcommLogInfo) config->level = gcommLogWarn;  // keep the fuzzer's output quiet
  (void)gcommSetLogConfig(config);
  (void)gcommSetLogConfig(nullptr);
}

void fuzz_allocator_config(gradcomm::fuzz::Input& in) {
  std::vector<uint8_t> storage;
  auto* config = fill<gcommAllocatorConfig_t>(in, storage);
  gcommAllocator_t alloc = nullptr;
  if (gcommAllocatorCreate(gcommHostDevice(), config, &alloc) == gcommSuccess) {
    void* p = nullptr;
    if (gcommAllocatorMalloc(alloc, in.take<uint16_t>(), nullptr, &p) == gcommSuccess)
      (void)gcommAllocatorFree(alloc, p, nullptr);
    if (gcommAllocatorDestroy(alloc) != gcommSuccess) __builtin_trap();
  }
}

void fuzz_grad_scaler_config(gradcomm::fuzz::Input& in) {
  std::vector<uint8_t> storage;
  auto* config = fill<gcommGradScalerConfig_t>(in, storage);
  gcommGradScaler_t scaler = nullptr;
  if (gcommGradScalerCreate(gcommHostDevice(), config, &scaler) == gcommSuccess) {
    if (gcommGradScalerUpdate(scaler, nullptr) != gcommSuccess) __builtin_trap();
    if (gcommGradScalerDestroy(scaler) != gcommSuccess) __builtin_trap();
  }
}

void fuzz_comm_config(gradcomm::fuzz::Input& in) {
  std::vector<uint8_t> storage;
  auto* config = fill<gcommCommConfig_t>(in, storage);
  config->master_addr = nullptr;
  config->job_key = nullptr;
  if (config->timeout_s > 5.0 || !(config->timeout_s == config->timeout_s)) config->timeout_s = 1.0;
  gcommComm_t comm = nullptr;
  if (gcommCommInitLocal(1, gcommHostDevice(), config, &comm) == gcommSuccess)
    if (gcommCommDestroy(comm) != gcommSuccess) __builtin_trap();
}

// One host rank: a reducer over three gradients, one step when it could be made.
void fuzz_reducer_config(gradcomm::fuzz::Input& in) {
  static gcommComm_t comm = [] {
    gcommComm_t c = nullptr;
    if (gcommCommInitLocal(1, gcommHostDevice(), nullptr, &c) != gcommSuccess) __builtin_trap();
    return c;
  }();
  std::vector<uint8_t> storage;
  auto* config = fill<gcommReducerConfig_t>(in, storage);
  config->scaler = nullptr;
  // Caps below 64 bytes make thousands of buckets of a few elements: valid, but slow for a fuzzer.
  if (config->bucket_cap_bytes < 64) config->bucket_cap_bytes = 64 + config->bucket_cap_bytes;
  if (config->first_bucket_bytes < 64) config->first_bucket_bytes = 64 + config->first_bucket_bytes;
  static float a[100], b[7], c[33];
  gcommTensor_t grads[3] = {{a, 100, gcommFloat32}, {b, 7, gcommFloat32}, {c, 33, gcommFloat32}};
  bool view = config->size >= offsetof(gcommReducerConfig_t, grad_as_bucket_view) + sizeof(int) &&
              config->grad_as_bucket_view == 1;
  if (view)
    for (auto& g : grads) g.data = nullptr;
  gcommReducer_t r = nullptr;
  if (gcommReducerCreate(comm, grads, 3, config, &r) != gcommSuccess) return;
  if (gcommReducerBeginStep(r, 1) != gcommSuccess) __builtin_trap();
  for (size_t i = 0; i < 3; ++i)
    if (gcommReducerMarkReady(r, 2 - i, nullptr) != gcommSuccess) __builtin_trap();
  if (gcommReducerFinalize(r, nullptr, nullptr) != gcommSuccess) __builtin_trap();
  if (gcommReducerDestroy(r) != gcommSuccess) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gradcomm::fuzz::Input in(data, size);
  switch (in.byte() % 5) {
    case 0: fuzz_log_config(in); break;
    case 1: fuzz_allocator_config(in); break;
    case 2: fuzz_grad_scaler_config(in); break;
    case 3: fuzz_comm_config(in); break;
    case 4: fuzz_reducer_config(in); break;
  }
  return 0;
}
