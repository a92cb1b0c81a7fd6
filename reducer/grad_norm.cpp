#include "reducer/grad_norm.hpp"

#include <memory>

#include "kernels/ops.hpp"

namespace gradcomm::reducer {

// Across ranks, each rank's sum of squares over its parts (in double) lands in its
// slot; the all-gather (in place) fills the others, and every rank adds them in
// rank order and rounds once: every rank gets the same bits whatever order the
// transport reduces in, and the float is the one the whole gradient's norm gives
// (the sums differ only in the order of double additions; a tie in the final
// rounding is the rare exception).
const float* GradNorm::clip(const std::vector<gcommTensor_t>& parts, bool across_ranks, float max_norm,
                            gcommStream_t stream) {
  const kernels::Target target{comm_.device(), side_.stream(), true};
  float* norm = scalars_.grad_norm();
  side_.wait_for(stream);
  const size_t bytes = target.cuda() ? kernels::norm_workspace_bytes(parts.data(), parts.size()) : 0;
  auto release = [this](void* p) { allocator_.deallocate(p, side_.stream()); };
  std::unique_ptr<void, decltype(release)> workspace(
      bytes > 0 ? allocator_.allocate(bytes, side_.stream()) : nullptr, release);
  if (across_ranks) {
    double* squares = scalars_.rank_squares();
    double* mine = squares + comm_.rank();
    kernels::l2_norm(parts.data(), parts.size(), norm, nullptr, workspace.get(), bytes, target, mine);
    // A double is moved as two floats: an all-gather only moves bytes.
    comm_.collective(comm::owned_buffers_call(comm::Collective::kAllGather, mine, squares, 2, gcommFloat32,
                                              side_.stream()));
    kernels::norm_of_sums(squares, static_cast<size_t>(comm_.size()), norm, target);
  } else {
    kernels::l2_norm(parts.data(), parts.size(), norm, nullptr, workspace.get(), bytes, target);
  }
  if (max_norm > 0.0f) kernels::clip_to_norm(parts.data(), parts.size(), max_norm, norm, target);
  side_.make_wait(stream);
  return norm;
}

}  // namespace gradcomm::reducer
