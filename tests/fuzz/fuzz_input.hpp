// Reads typed values from a fuzzer's byte string; past the end it yields zeros,
// so every input is a valid program.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace gradcomm::fuzz {

class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return pos_ >= size_; }
  template <class T>
  T take() {
    T value{};
    size_t n = sizeof(T) < size_ - pos_ ? sizeof(T) : size_ - pos_;
    if (pos_ < size_) std::memcpy(&value, data_ + pos_, n);
    pos_ += n;
    return value;
  }
  uint8_t byte() { return take<uint8_t>(); }
  // Copies up to `n` bytes into `out` (zero-filled past the end).
  void bytes(void* out, size_t n) {
    std::memset(out, 0, n);
    size_t have = pos_ < size_ ? size_ - pos_ : 0;
    size_t k = n < have ? n : have;
    if (k) std::memcpy(out, data_ + pos_, k);
    pos_ += k;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace gradcomm::fuzz
