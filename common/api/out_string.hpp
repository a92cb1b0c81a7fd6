// The output-string convention of every C API function that returns text
// (buffer, size, required): `required` (may be NULL) receives the full length + 1;
// the text goes into `buffer` NUL-terminated, cut to fit at a character boundary
// (a UTF-8 sequence is never split); buffer may be NULL when size is 0.
#pragma once

#include <algorithm>
#include <cstring>
#include <string>

#include "common/error.hpp"

namespace gradcomm {

inline void copy_out_string(const std::string& text, char* buffer, size_t size, size_t* required) {
  require(buffer != nullptr || size == 0, "buffer is NULL but size is ", size);
  if (required != nullptr) *required = text.size() + 1;
  if (size == 0) return;
  size_t n = std::min(text.size(), size - 1);
  while (n > 0 && n < text.size() && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  std::memcpy(buffer, text.data(), n);
  buffer[n] = '\0';
}

}  // namespace gradcomm
