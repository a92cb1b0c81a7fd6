// The two backends behind powersgd.hpp: the host twins and the CUDA launchers,
// and the kernel tables the Plan builds once. Arguments are validated by the Plan.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gradcomm/gradcomm.h"

namespace gradcomm::kernels::powersgd {

struct Matrix;

// One matrix (or panel) in a kernel's table. The kernels cut their work in units
// (one CUDA block each); a block finds its matrix by binary search over
// first_unit. aux/aux2/ws mean what each kernel's table builder says.
struct MatArg {
  float* grad;
  float* error;
  float* p;        // orthogonalize: the panel
  float* q;
  float* q_state;  // never NULL here: q when the matrix has no separate state
  unsigned long long ws;  // workspace offset (elements) of this matrix's partial sums
  unsigned rows, cols;    // orthogonalize: rows of the panel; cols unused
  unsigned first_unit, units;
  unsigned aux, aux2;
};

// A kernel's table travels in the kernel parameters (CUDA 12.1+: 32 KiB); more
// matrices take more launches.
constexpr unsigned kBatchMatrices = 400;
struct Batch {
  MatArg m[kBatchMatrices];
  unsigned count;
  unsigned units;        // all units of the launch
  unsigned first_units;  // orthogonalize: the Gram units (apply units follow)
  unsigned pad;
};
static_assert(sizeof(Batch) <= 32000, "a Batch must fit CUDA's kernel parameter space");

// Byte offsets inside the workspace (CUDA only).
struct WorkspaceLayout {
  size_t orth_counters = 0;  // u32: ticket, exited, arrive[kBatchMatrices], ready[kBatchMatrices]
  size_t orth_t = 0;         // f32: kBatchMatrices transforms of rp x rp
  size_t orth_partials = 0;  // f64: partial Gram matrices, rp x rp per slice of split panels
  size_t q_counters = 0;     // u32: one per column tile of a split matrix
  size_t q_partials = 0;     // f32: partial Q tiles, kQTileCols x rp per (tile, slice)
  size_t total = 0;
};

namespace host {
struct Panel {
  float* data;  // rows x r, row-major
  size_t rows;
};
void init_q(const Matrix* m, size_t n, int r, uint64_t seed);
void multiply_p(const Matrix* m, size_t n, int r, float* found_nonfinite);
void orthogonalize(const Panel* panels, size_t n, int r, double eps);
void multiply_q(const Matrix* m, size_t n, int r);
void decompress(const Matrix* m, size_t n, int r, float scale, const float* skip);
}  // namespace host

namespace cuda {
void init_q(const Batch& b, int r, uint64_t seed, gcommStream_t stream);
void multiply_p(const Batch& b, int r, float* found_nonfinite, gcommStream_t stream);
void orthogonalize(const Batch& b, int r, double eps, void* workspace, const WorkspaceLayout& layout,
                   gcommStream_t stream);
void multiply_q(const Batch& b, int r, void* workspace, const WorkspaceLayout& layout, gcommStream_t stream);
void decompress(const Batch& b, int r, float scale, const float* skip, gcommStream_t stream);
}  // namespace cuda

}  // namespace gradcomm::kernels::powersgd
