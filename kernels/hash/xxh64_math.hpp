// XXH64 (xxHash's 64-bit hash, as its specification defines it) for the GPU's
// divergence-check kernel, written for host and device alike. The host hashes with
// the library (tensor_hash_host.cpp); this copy is checked against it on random
// data, every length and misalignment, on the CPU (tests/kernels/tensor_hash_test.cpp),
// so the kernel's arithmetic has run even where no GPU has.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/element.hpp"  // GCOMM_HD

namespace gradcomm::kernels::hash {

namespace xxh64_detail {
constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t kPrime3 = 0x165667B19E3779F9ull;
constexpr uint64_t kPrime4 = 0x85EBCA77C2B2AE63ull;
constexpr uint64_t kPrime5 = 0x27D4EB2F165667C5ull;

GCOMM_HD uint64_t rotl(uint64_t x, int r) {
  return (x << r) | (x >> (64 - r));
}
// Little-endian loads (x86 and the GPU are little-endian). On a GPU a copy of
// unknown alignment is made byte by byte: where the span is 8-byte aligned
// (kAligned: then so is every 8-byte step) the kernel loads whole words.
template <bool kAligned>
GCOMM_HD uint64_t load64(const unsigned char* p) {
#ifdef __CUDA_ARCH__
  if constexpr (kAligned) return *reinterpret_cast<const uint64_t*>(p);
#endif
  uint64_t v;  // on the host a copy is one load at any alignment
  memcpy(&v, p, sizeof v);
  return v;
}
template <bool kAligned>
GCOMM_HD uint32_t load32(const unsigned char* p) {
#ifdef __CUDA_ARCH__
  if constexpr (kAligned) return *reinterpret_cast<const uint32_t*>(p);
#endif
  uint32_t v;
  memcpy(&v, p, sizeof v);
  return v;
}
GCOMM_HD uint64_t accumulate(uint64_t acc, uint64_t input) {
  acc += input * kPrime2;
  acc = rotl(acc, 31);
  return acc * kPrime1;
}
GCOMM_HD uint64_t merge_round(uint64_t acc, uint64_t v) {
  acc ^= accumulate(0, v);
  return acc * kPrime1 + kPrime4;
}
}  // namespace xxh64_detail

// kAligned: `data` is 8-byte aligned (the word loads stay aligned throughout).
template <bool kAligned>
GCOMM_HD uint64_t xxh64_of(const void* data, size_t len, uint64_t seed) {
  using namespace xxh64_detail;
  const unsigned char* p = static_cast<const unsigned char*>(data);
  const unsigned char* const end = p + len;
  uint64_t h;
  if (len >= 32) {
    uint64_t v1 = seed + kPrime1 + kPrime2, v2 = seed + kPrime2, v3 = seed, v4 = seed - kPrime1;
    const unsigned char* const limit = end - 32;
    do {
      v1 = accumulate(v1, load64<kAligned>(p));
      v2 = accumulate(v2, load64<kAligned>(p + 8));
      v3 = accumulate(v3, load64<kAligned>(p + 16));
      v4 = accumulate(v4, load64<kAligned>(p + 24));
      p += 32;
    } while (p <= limit);
    h = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18);
    h = merge_round(h, v1);
    h = merge_round(h, v2);
    h = merge_round(h, v3);
    h = merge_round(h, v4);
  } else {
    h = seed + kPrime5;
  }
  h += static_cast<uint64_t>(len);
  while (end - p >= 8) {
    h ^= accumulate(0, load64<kAligned>(p));
    h = rotl(h, 27) * kPrime1 + kPrime4;
    p += 8;
  }
  if (end - p >= 4) {
    h ^= static_cast<uint64_t>(load32<kAligned>(p)) * kPrime1;
    h = rotl(h, 23) * kPrime2 + kPrime3;
    p += 4;
  }
  while (p < end) {
    h ^= static_cast<uint64_t>(*p) * kPrime5;
    h = rotl(h, 11) * kPrime1;
    ++p;
  }
  h ^= h >> 33;
  h *= kPrime2;
  h ^= h >> 29;
  h *= kPrime3;
  h ^= h >> 32;
  return h;
}

GCOMM_HD uint64_t xxh64(const void* data, size_t len, uint64_t seed) {
  return reinterpret_cast<uintptr_t>(data) % 8 == 0 ? xxh64_of<true>(data, len, seed)
                                                    : xxh64_of<false>(data, len, seed);
}

}  // namespace gradcomm::kernels::hash
