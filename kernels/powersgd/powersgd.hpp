// PowerSGD's compute building blocks (issue 7), for the reducer's PowerSGD
// strategy: the all-reduces between the steps are the caller's.
//
// One Plan per bucket: the bucket's gradients viewed as matrices (f32, row-major
// n x m), their P (n x r), Q (m x r) and error (n x m) buffers, a rank r in 1..32
// and a device. The Plan validates everything once (pointers, sizes, where the
// memory lives, no two buffers overlapping) and precomputes the kernels' tables,
// so a step's calls only check their own arguments and allocate nothing. On a
// CUDA device each call enqueues one kernel on the caller's stream (no sync); on
// the host the host twin runs before the call returns.
//
// One step, PowerSGD as in Vogels et al. / PyTorch's powerSGD_hook:
//   compensate_and_multiply_p   M += E (written back), P = M·Q_state      (1 launch)
//   -- all-reduce (sum) every P of the bucket: they are one flat buffer if the
//      caller lays them out so --
//   orthogonalize(kP)           P <- P·T, orthonormal (or zero) columns   (1 launch)
//   multiply_q                  Q = Mᵀ·P                                   (1 launch)
//   -- all-reduce (sum) every Q --
//   decompress(1/world)         M̂ = P·Qᵀ/world into M; E = M_old - M̂;
//                               Q_state <- Q  (E and Q_state only if not skipped) (1 launch)
// With warm start, orthogonalize(kQ) on Q_state before the next step's
// compensate_and_multiply_p (as PyTorch does); without it, init_q(seed + step).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gradcomm/gradcomm.h"
#include "kernels/powersgd/powersgd_backend.hpp"

namespace gradcomm::kernels::powersgd {

// One gradient viewed as an n x m matrix, and its PowerSGD buffers. All f32,
// row-major, on the Plan's device.
struct Matrix {
  float* grad = nullptr;     // M, n x m: the gradient; becomes M + E, then M̂
  float* error = nullptr;    // E, n x m; NULL: no error feedback for this matrix
  float* p = nullptr;        // P, n x r
  float* q = nullptr;        // Q, m x r: written by multiply_q, all-reduced, read by decompress
  float* q_state = nullptr;  // warm-start Q, m x r, read by compensate_and_multiply_p; NULL: q is the state.
                             // A separate buffer keeps the state safe from a skipped step (decompress)
  size_t rows = 0;           // n >= 1
  size_t cols = 0;           // m >= 1
  uint64_t key = 0;          // init_q's random stream for this matrix (say, the parameter's index):
                             // the same on every rank, independent of the bucket layout
};

enum class Panels { kP, kQ };  // orthogonalize the P's (n x r) or the Q states (m x r)

class Plan {
 public:
  // Validates and keeps a copy of the list. Throws gradcomm::Error (nothing kept) on bad input.
  Plan(gcommDevice_t device, const Matrix* matrices, size_t count, int rank);

  int rank() const { return rank_; }
  size_t size() const { return matrices_.size(); }
  const Matrix& matrix(size_t k) const { return matrices_[k]; }
  const gcommDevice_t& device() const { return device_; }

  // Scratch bytes the CUDA path of orthogonalize and multiply_q needs (0 on the
  // host). CUB's rule: the library never allocates; the caller allocates this once
  // per Plan (8-byte aligned), zeroes it once with prepare_workspace, and passes it
  // to every call. The kernels leave it zeroed again (their counters reset
  // themselves), so calls on one stream can reuse it forever; two calls that may
  // run at the same time need two workspaces.
  size_t workspace_bytes() const { return workspace_bytes_; }
  void prepare_workspace(void* workspace, size_t bytes, gcommStream_t stream) const;

  // Q_state (q where q_state is NULL) <- standard normal values drawn from
  // (seed, key, element): the same bits on every rank, host and GPU.
  void init_q(uint64_t seed, gcommStream_t stream) const;

  // Error feedback and the first product, one pass over M: M += E (where E is
  // set), then P = M·Q_state. found_nonfinite (may be NULL; device memory on a
  // GPU) is set to 1.0f if any element of M + E is Inf/NaN, never cleared: ranks
  // learn of it if the caller sums it with the P's (one more float in the flat P
  // buffer), and pass it to decompress as `skip`.
  void compensate_and_multiply_p(float* found_nonfinite, gcommStream_t stream) const;

  // Orthonormalizes the columns of every panel (P: n x r, or the Q states: m x r)
  // in one launch; a column that is (numerically) zero or dependent on earlier
  // ones becomes zero (see keep_column in powersgd_math.hpp), never NaN. eps >= 0:
  // also drop columns whose remaining norm is at most eps.
  void orthogonalize(Panels which, double eps, void* workspace, size_t workspace_bytes, gcommStream_t stream) const;

  // Q = Mᵀ·P for every matrix, one launch.
  void multiply_q(void* workspace, size_t workspace_bytes, gcommStream_t stream) const;

  // M <- M̂ = scale·P·Qᵀ and, unless *skip != 0 (skip may be NULL; device memory
  // on a GPU), E <- M_old - M̂ and Q_state <- Q: one pass over M and E. A skipped
  // step still writes M̂ (the caller discards that step's gradients).
  void decompress(float scale, const float* skip, gcommStream_t stream) const;

 private:
  bool cuda() const { return device_.kind == gcommDeviceCuda; }
  void check_workspace(const void* workspace, size_t bytes) const;

  gcommDevice_t device_;
  int rank_;
  std::vector<Matrix> matrices_;
  std::vector<host::Panel> p_panels_, q_panels_;  // host twins' views of the panels
  // Kernel tables (CUDA only), built once.
  std::vector<Batch> init_, multiply_p_, orth_p_, orth_q_, multiply_q_, decompress_;
  WorkspaceLayout layout_;
  size_t workspace_bytes_ = 0;
};

}  // namespace gradcomm::kernels::powersgd
