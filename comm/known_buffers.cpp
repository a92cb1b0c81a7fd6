#include "comm/known_buffers.hpp"

#include <algorithm>

namespace gradcomm::comm {

bool KnownBuffers::covers(const void* ptr, size_t bytes) noexcept {
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  for (size_t i = 0; i < count_; ++i) {
    const Range r = ranges_[i];
    // bytes <= end - p: no overflow, since p < end here.
    if (p >= r.begin && p < r.end && bytes <= r.end - p) {
      std::rotate(ranges_.begin(), ranges_.begin() + i, ranges_.begin() + i + 1);
      return true;
    }
  }
  return false;
}

void KnownBuffers::add(uintptr_t begin, uintptr_t end) noexcept {
  if (begin >= end) return;
  // The same range again (a hit that was not asked for) replaces its old place.
  size_t i = 0;
  while (i < count_ && !(ranges_[i].begin == begin && ranges_[i].end == end)) ++i;
  if (i == count_) {
    if (count_ < kCapacity) ++count_;
    i = count_ - 1;  // the last: new, or the least recently used, forgotten
  }
  std::rotate(ranges_.begin(), ranges_.begin() + i, ranges_.begin() + i + 1);
  ranges_[0] = Range{begin, end};
}

}  // namespace gradcomm::comm
