// Where the registered gradients live, as disjoint byte ranges ordered by
// address: a gradient that would share memory with another is refused when it
// is registered or moved (naming both), not at the next mark-ready, when the
// step would already be half launched. Empty gradients take no range.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "gradcomm/types.h"

namespace gradcomm::reducer {

class GradAddresses {
 public:
  GradAddresses() = default;
  // Throws gcommInvalidArgument naming the first two gradients found to overlap.
  explicit GradAddresses(const std::vector<gcommTensor_t>& grads);

  // Records that gradient `index` moved from `from` to `to`, O(log n); throws
  // gcommInvalidArgument, changing nothing, if `to` would overlap another.
  void move(size_t index, const gcommTensor_t& from, const gcommTensor_t& to);

 private:
  struct Range {
    uintptr_t end;
    size_t index;
  };
  // The gradient other than `self` that [begin, end) overlaps, if any.
  std::optional<size_t> overlapping(uintptr_t begin, uintptr_t end, size_t self) const;
  void add(size_t index, const gcommTensor_t& g);

  std::map<uintptr_t, Range> by_begin_;
};

}  // namespace gradcomm::reducer
