// Fuzz target: every versioned config struct of the C API (log, allocator, grad
// scaler, communicator, reducer), with arbitrary size,
// magic, version and field values, and hostile tensor lists (absurd counts,
// overlapping gradients, list lengths past the array). Each call must return a status (never crash,
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

// Tensor lists as hostile callers write them (issue 17 #1-#3): tensors inside one
// slab at any offset, possibly overlapping; counts that fit the slab or are
// absurd (must be refused: following them would read unmapped memory); a list
// count above the array's length only when it is above GCOMM_MAX_TENSORS (must
// be refused before the list is read: the array is on the heap, where ASan sees
// a read past it). Whatever is accepted must run; a reducer must never hold two
// gradients that share memory, however they were registered or moved.
bool overlap(const gcommTensor_t& x, const gcommTensor_t& y) {
  size_t ex = x.count * (x.dtype == gcommFloat32 ? 4 : 2), ey = y.count * (y.dtype == gcommFloat32 ? 4 : 2);
  auto bx = reinterpret_cast<uintptr_t>(x.data), by = reinterpret_cast<uintptr_t>(y.data);
  return ex > 0 && ey > 0 && bx < by + ey && by < bx + ex;
}

void fuzz_tensor_lists(gradcomm::fuzz::Input& in) {
  static gcommComm_t comm = [] {
    gcommComm_t c = nullptr;
    if (gcommCommInitLocal(1, gcommHostDevice(), nullptr, &c) != gcommSuccess) __builtin_trap();
    return c;
  }();
  constexpr size_t kSlab = 4096;  // bytes
  static float slab[kSlab / 4];
  const size_t n = 1 + in.byte() % 6;
  std::vector<gcommTensor_t> t(n);
  bool absurd = false;
  for (auto& x : t) {
    x.dtype = static_cast<gcommDataType_t>(in.byte() % 3);
    size_t offset = in.take<uint16_t>() % kSlab & ~size_t{3};
    x.data = reinterpret_cast<char*>(slab) + offset;
    size_t room = (kSlab - offset) / (x.dtype == gcommFloat32 ? 4 : 2);
    uint8_t kind = in.byte();
    if (kind < 8) {
      // Each reaches past GCOMM_ADDRESS_LIMIT from any non-null address, for every dtype.
      const size_t esize = x.dtype == gcommFloat32 ? 4 : 2;
      const size_t huge[] = {SIZE_MAX,
                             SIZE_MAX / 2,
                             SIZE_MAX / 4,
                             SIZE_MAX / 8,
                             static_cast<size_t>(GCOMM_ADDRESS_LIMIT) / esize,
                             static_cast<size_t>(GCOMM_ADDRESS_LIMIT) / 2,
                             SIZE_MAX - 3,
                             static_cast<size_t>(GCOMM_ADDRESS_LIMIT)};
      x.count = huge[kind];
      absurd = true;
    } else {
      x.count = room == 0 ? 0 : in.take<uint16_t>() % (room + 1);
    }
  }
  uint8_t claim = in.byte();
  const size_t claimed = claim < 250    ? n
                         : claim == 250 ? SIZE_MAX
                                        : static_cast<size_t>(GCOMM_MAX_TENSORS) + claim;
  const bool refusable = absurd || claimed != n;
  float found = 0, norm = 0;
  if (gcommCheckFinite(t.data(), claimed, &found, gcommHostDevice(), nullptr) == gcommSuccess && refusable)
    __builtin_trap();
  if (gcommL2Norm(t.data(), claimed, &norm, nullptr, nullptr, 0, gcommHostDevice(), nullptr) ==
          gcommSuccess &&
      refusable)
    __builtin_trap();
  gcommReducer_t r = nullptr;
  if (gcommReducerCreate(comm, t.data(), claimed, nullptr, &r) != gcommSuccess) return;
  if (refusable) __builtin_trap();
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j)
      if (overlap(t[i], t[j])) __builtin_trap();  // accepted gradients that share memory
  // Move one gradient somewhere in the slab: accepted only if it overlaps no other.
  size_t k = in.byte() % n;
  gcommTensor_t moved = t[k];
  size_t room = kSlab / (moved.dtype == gcommFloat32 ? 4 : 2);
  if (moved.count <= room) {
    size_t to = (in.take<uint16_t>() % (kSlab - moved.count * (moved.dtype == gcommFloat32 ? 4 : 2) + 1)) &
                ~size_t{3};
    moved.data = reinterpret_cast<char*>(slab) + to;
    bool clash = false;
    for (size_t i = 0; i < n; ++i) clash = clash || (i != k && overlap(moved, t[i]));
    gcommStatus_t s = gcommReducerSetGradData(r, k, moved.data);
    if ((s == gcommSuccess) == clash) __builtin_trap();
  }
  if (gcommReducerBeginStep(r, 1) != gcommSuccess) __builtin_trap();
  for (size_t i = 0; i < n; ++i)
    if (gcommReducerMarkReady(r, i, nullptr) != gcommSuccess) __builtin_trap();
  if (gcommReducerFinalize(r, nullptr, nullptr) != gcommSuccess) __builtin_trap();
  if (gcommReducerDestroy(r) != gcommSuccess) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gradcomm::fuzz::Input in(data, size);
  switch (in.byte() % 6) {
    case 0:
      fuzz_log_config(in);
      break;
    case 1:
      fuzz_allocator_config(in);
      break;
    case 2:
      fuzz_grad_scaler_config(in);
      break;
    case 3:
      fuzz_comm_config(in);
      break;
    case 4:
      fuzz_reducer_config(in);
      break;
    case 5:
      fuzz_tensor_lists(in);
      break;
  }
  return 0;
}
