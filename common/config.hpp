// Reading the versioned config structs of the C API (NCCL's ncclConfig_t pattern).
//
// Every config struct starts with {size_t size; uint32_t magic; uint32_t version;}
// and is filled by its ..._INITIALIZER macro. The library copies
// min(caller's size, own size) bytes over its defaults, so a caller built against
// an older, smaller struct gets defaults for the fields it lacks, and a caller
// built against a newer, larger struct has the fields it adds ignored (logged).
// Rule for adding fields: append only, and end each version's fields on an 8-byte
// boundary (add explicit reserved padding) so an older size never cuts a newer
// field in two.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/error.hpp"
#include "common/log.hpp"

namespace gradcomm {

constexpr size_t kConfigHeaderBytes = sizeof(size_t) + 2 * sizeof(uint32_t);

template <class Config>
Config read_config(const Config* user, const Config& defaults, const char* type_name) {
  static_assert(std::is_trivially_copyable<Config>::value, "config structs are plain C structs");
  static_assert(offsetof(Config, size) == 0 && offsetof(Config, magic) == sizeof(size_t) &&
                    offsetof(Config, version) == sizeof(size_t) + sizeof(uint32_t),
                "config structs start with size, magic, version");
  if (user == nullptr) return defaults;
  require(user->magic == GCOMM_CONFIG_MAGIC, type_name, " was not made by its _INITIALIZER macro (magic 0x",
          std::hex, user->magic, ", expected 0x", GCOMM_CONFIG_MAGIC, std::dec, "); declare it as `",
          type_name, " c = ..._INITIALIZER;` and then set fields");
  require(user->size >= kConfigHeaderBytes && user->size % alignof(uint32_t) == 0, type_name, ": size ",
          user->size, " is not a valid struct size (use the _INITIALIZER macro)");
  require(user->version > 0, type_name, ": version 0 is not valid (use the _INITIALIZER macro)");
  Config result = defaults;
  size_t copy = user->size < sizeof(Config) ? user->size : sizeof(Config);
  std::memcpy(static_cast<void*>(&result), static_cast<const void*>(user), copy);
  if (user->size > sizeof(Config)) {
    GCOMM_INFO(CALL, type_name, " from a newer gradcomm (version ", user->version, ", ", user->size,
               " bytes): fields past byte ", sizeof(Config),
               " are not known to this library and are ignored");
  }
  result.size = sizeof(Config);
  return result;
}

// The other direction, for versioned output structs (statistics): `user` was set
// with its _INITIALIZER (check_versioned_out says so, before anything is computed);
// the fields both versions know are copied from `value`, the caller's header
// stays as it was.
template <class Out>
void check_versioned_out(const Out* user, const char* type_name, const char* initializer) {
  static_assert(std::is_trivially_copyable<Out>::value, "output structs are plain C structs");
  require(user != nullptr, "the ", type_name, " argument is NULL");
  require(user->magic == GCOMM_CONFIG_MAGIC, type_name, " was not made by ", initializer, " (magic 0x",
          std::hex, user->magic, std::dec, ")");
  require(user->size >= kConfigHeaderBytes && user->size % alignof(uint64_t) == 0, type_name, ": size ",
          user->size, " is not a valid struct size (use ", initializer, ")");
}

template <class Out>
void write_versioned_out(const Out& value, Out* user, const char* type_name, const char* initializer) {
  check_versioned_out(user, type_name, initializer);
  const size_t n = user->size < sizeof(Out) ? user->size : sizeof(Out);
  std::memcpy(reinterpret_cast<char*>(user) + kConfigHeaderBytes,
              reinterpret_cast<const char*>(&value) + kConfigHeaderBytes, n - kConfigHeaderBytes);
}

}  // namespace gradcomm
