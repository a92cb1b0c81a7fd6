#include "reducer/grad_addresses.hpp"

#include <iterator>

#include "common/dtype.hpp"
#include "common/error.hpp"

namespace gradcomm::reducer {

namespace {
uintptr_t begin_of(const gcommTensor_t& g) {
  return reinterpret_cast<uintptr_t>(g.data);
}
uintptr_t end_of(const gcommTensor_t& g) {
  return begin_of(g) + g.count * dtype_size(g.dtype);
}
}  // namespace

GradAddresses::GradAddresses(const std::vector<gcommTensor_t>& grads) {
  for (size_t i = 0; i < grads.size(); ++i) {
    const gcommTensor_t& g = grads[i];
    if (g.count == 0) continue;
    if (auto other = overlapping(begin_of(g), end_of(g), i))
      fail(gcommInvalidArgument, "grads[", *other, "] and grads[", i, "] overlap (", grads[*other].data, ", ",
           grads[*other].count, " x ", dtype_name(grads[*other].dtype), " and ", g.data, ", ", g.count, " x ",
           dtype_name(g.dtype), "): every gradient needs memory of its own");
    add(i, g);
  }
}

void GradAddresses::move(size_t index, const gcommTensor_t& from, const gcommTensor_t& to) {
  if (to.count == 0) return;  // an empty gradient takes no range, before or after
  if (auto other = overlapping(begin_of(to), end_of(to), index))
    fail(gcommInvalidArgument, "gradient ", index, " at ", to.data, " (", to.count, " x ",
         dtype_name(to.dtype), ") would overlap gradient ", *other,
         "; every gradient needs memory of its own (moving several at once: gcommReducerSetAllGradData)");
  by_begin_.erase(begin_of(from));
  add(index, to);
}

void GradAddresses::add(size_t index, const gcommTensor_t& g) {
  by_begin_[begin_of(g)] = Range{end_of(g), index};
}

std::optional<size_t> GradAddresses::overlapping(uintptr_t begin, uintptr_t end, size_t self) const {
  auto first = by_begin_.lower_bound(begin);
  // Ranges that start inside [begin, end): the ranges are disjoint, so at most
  // `self` comes before another one.
  for (auto it = first; it != by_begin_.end() && it->first < end; ++it)
    if (it->second.index != self) return it->second.index;
  // The range that starts before `begin` may reach into it. When that one is
  // `self`, the one before it ends before self begins, so before `begin`.
  if (first != by_begin_.begin()) {
    auto before = std::prev(first);
    if (before->second.index != self && before->second.end > begin) return before->second.index;
  }
  return std::nullopt;
}

}  // namespace gradcomm::reducer
