// A strategy's saved state as host bytes (PowerSGD's, the int8 wire's): plain
// values appended in order, and read back with a bound check, so that a truncated
// state is refused naming the field that is missing.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "common/error.hpp"

namespace gradcomm::reducer {

template <class T>
void put(std::vector<uint8_t>& out, const T& v) {
  const auto* b = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), b, b + sizeof(T));
}

// Reads a T at p (advancing it); `state` names the state in the message ("PowerSGD state").
template <class T>
T take(const uint8_t*& p, const uint8_t* end, const char* state, const char* field) {
  require(static_cast<size_t>(end - p) >= sizeof(T), state, ": truncated at ", field);
  T v;
  std::memcpy(&v, p, sizeof(T));
  p += sizeof(T);
  return v;
}

}  // namespace gradcomm::reducer
