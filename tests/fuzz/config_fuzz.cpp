// Fuzz target: every versioned config struct of the C API, with arbitrary size,
// magic, version and field values. Each call must return a status (never crash,
// never read past the struct) and, on success, create something destroyable.
// Pointer fields are forced to NULL or to valid strings: a caller's wild pointer
// cannot be validated by any library.
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gradcomm::fuzz::Input in(data, size);
  switch (in.byte() % 2) {
    case 0: fuzz_log_config(in); break;
    case 1: fuzz_allocator_config(in); break;
  }
  return 0;
}
