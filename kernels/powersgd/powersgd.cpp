// The Plan: validation once at setup, the kernels' tables, and dispatch to the
// host twins or the CUDA launchers.
#include "kernels/powersgd/powersgd.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include <cuda_runtime_api.h>

#include "common/cuda_check.hpp"
#include "common/device.hpp"
#include "common/error.hpp"
#include "kernels/powersgd/powersgd_math.hpp"

namespace gradcomm::kernels::powersgd {

namespace {

constexpr size_t kMaxDim = 0x7fffffff;  // the kernels index rows and columns with 32 bits

// Is this memory usable by a call on `device`? (The rule of kernels/ops.cpp.)
void check_location(const void* ptr, const gcommDevice_t& device, const std::string& what) {
  if (device.kind != gcommDeviceCuda && !gpu_available()) return;  // without a GPU all memory is host memory
  PointerInfo info = pointer_info(ptr);
  bool cuda = device.kind == gcommDeviceCuda;
  bool ok = cuda ? (info.kind == MemoryKind::kDevice && info.device == device.ordinal) || info.kind == MemoryKind::kManaged
                 : info.kind != MemoryKind::kDevice;
  if (ok) return;
  if (cuda)
    fail(gcommInvalidArgument, what, " is ", memory_kind_name(info.kind),
         info.kind == MemoryKind::kDevice ? cat(" of cuda:", info.device) : std::string(), " but the plan runs on ",
         describe_device(device), ", which needs device memory of that GPU");
  fail(gcommInvalidArgument, what, " is device memory of cuda:", info.device,
       " but the plan runs on the host; make the plan for the CUDA device instead");
}

struct Range {
  uintptr_t begin, end;
  std::string what;
};

// Builds the tables of one kernel: add(matrix, arg) fills the units (and any
// workspace offsets, batch-local) and returns false to leave the matrix out.
template <class Fill>
std::vector<Batch> build(const std::vector<Matrix>& ms, Fill&& fill) {
  std::vector<Batch> batches;
  Batch* b = nullptr;
  for (const Matrix& m : ms) {
    if (b == nullptr || b->count == kBatchMatrices) {
      batches.emplace_back();
      b = &batches.back();
      *b = Batch{};
    }
    MatArg a{};
    a.grad = m.grad;
    a.error = m.error;
    a.p = m.p;
    a.q = m.q;
    a.q_state = m.q_state != nullptr ? m.q_state : m.q;
    a.rows = static_cast<unsigned>(m.rows);
    a.cols = static_cast<unsigned>(m.cols);
    fill(*b, a);
    b->m[b->count++] = a;
  }
  return batches;
}

void add_units(Batch& b, MatArg& a, size_t units) {
  require(units <= 0xffffffffull - b.units, "a bucket of this size needs more than 2^32 work units; split it");
  a.first_unit = b.units;
  a.units = static_cast<unsigned>(units);
  b.units += a.units;
}

// Orthogonalize: per panel, slices of kOrthSliceRows rows; one Gram unit per
// slice, then (numbered after every Gram unit of the batch) one apply unit per
// slice of the panels of more than one slice. Panels go in the `p` field.
std::vector<Batch> build_orth(const std::vector<host::Panel>& panels, int rp, size_t* partials, size_t* max_count) {
  std::vector<Matrix> views(panels.size());
  for (size_t k = 0; k < panels.size(); ++k) {
    views[k].p = panels[k].data;
    views[k].rows = panels[k].rows;
  }
  size_t next_ws = 0;
  std::vector<Batch> batches = build(views, [&](Batch& b, MatArg& a) {
    if (b.count == 0) next_ws = 0;
    size_t slices = ceil_div(a.rows, kOrthSliceRows);
    a.aux = static_cast<unsigned>(slices);
    add_units(b, a, slices);
    a.ws = next_ws;
    if (slices > 1) next_ws += slices * rp * rp;
    *partials = std::max(*partials, next_ws);
  });
  for (Batch& batch : batches) {
    batch.first_units = batch.units;
    unsigned next = 0;
    for (unsigned k = 0; k < batch.count; ++k) {
      MatArg& a = batch.m[k];
      a.aux2 = next;
      if (a.aux > 1) next += a.aux;
    }
    require(next <= 0xffffffffu - batch.units, "a bucket of this size needs more than 2^32 work units; split it");
    batch.units += next;
    *max_count = std::max<size_t>(*max_count, batch.count);
  }
  return batches;
}

size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

}  // namespace

Plan::Plan(gcommDevice_t device, const Matrix* matrices, size_t count, int rank)
    : device_(validate_device(device)), rank_(rank) {
  require(rank >= 1 && rank <= kMaxRank, "rank must be in 1..", kMaxRank, ", not ", rank);
  require(matrices != nullptr || count == 0, "argument 'matrices' is NULL but its count is ", count);
  std::vector<Range> ranges;
  auto add_range = [&](const float* ptr, size_t elements, const std::string& what) {
    require(reinterpret_cast<uintptr_t>(ptr) % alignof(float) == 0, what, " is not 4-byte aligned");
    check_location(ptr, device_, what);
    uintptr_t b = reinterpret_cast<uintptr_t>(ptr);
    require(b <= UINTPTR_MAX - elements * sizeof(float), what, " wraps around the address space");
    ranges.push_back(Range{b, b + elements * sizeof(float), what});
  };
  for (size_t k = 0; k < count; ++k) {
    const Matrix& m = matrices[k];
    std::string name = cat("matrices[", k, "]");
    require(m.rows >= 1 && m.cols >= 1, name, " is ", m.rows, " x ", m.cols, "; both sides must be at least 1");
    require(m.rows <= kMaxDim && m.cols <= kMaxDim, name, " is ", m.rows, " x ", m.cols, "; sides above ", kMaxDim,
            " are not supported");
    require(m.rows <= SIZE_MAX / sizeof(float) / m.cols, name, ": ", m.rows, " x ", m.cols, " elements overflow");
    require(m.grad != nullptr && m.p != nullptr && m.q != nullptr, name, ": grad, p and q must not be NULL");
    add_range(m.grad, m.rows * m.cols, name + ".grad");
    if (m.error != nullptr) add_range(m.error, m.rows * m.cols, name + ".error");
    add_range(m.p, m.rows * rank, name + ".p");
    add_range(m.q, m.cols * rank, name + ".q");
    if (m.q_state != nullptr && m.q_state != m.q) add_range(m.q_state, m.cols * rank, name + ".q_state");
  }
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < ranges.size(); ++i)
    require(ranges[i].begin >= ranges[i - 1].end, ranges[i - 1].what, " and ", ranges[i].what, " overlap");

  matrices_.assign(matrices, matrices + count);
  for (Matrix& m : matrices_)
    if (m.q_state == m.q) m.q_state = nullptr;
  for (const Matrix& m : matrices_) {
    p_panels_.push_back(host::Panel{m.p, m.rows});
    q_panels_.push_back(host::Panel{m.q_state != nullptr ? m.q_state : m.q, m.cols});
  }
  if (!cuda()) return;

  const int rp = padded_rank(rank);
  const size_t r = static_cast<size_t>(rank);
  size_t next = 0;
  init_ = build(matrices_, [&](Batch& b, MatArg& a) {
    a.ws = matrices_[next++].key;  // init_q: ws carries the matrix's key
    add_units(b, a, ceil_div(size_t{a.cols} * r, kInitChunk));
  });
  multiply_p_ = build(matrices_, [&](Batch& b, MatArg& a) {
    add_units(b, a, ceil_div(a.rows, multiply_p_rows_per_block(rp)));
  });
  size_t q_counters = 0, q_partials = 0, next_ws = 0, next_counter = 0;
  multiply_q_ = build(matrices_, [&](Batch& b, MatArg& a) {
    if (b.count == 0) next_ws = next_counter = 0;  // offsets are per batch: batches run one after another
    size_t tiles = ceil_div(a.cols, kQTileCols), slices = ceil_div(a.rows, kQSliceRows);
    add_units(b, a, tiles * slices);
    a.aux = static_cast<unsigned>(slices);
    if (slices > 1) {  // partial sums per (tile, slice), summed by the tile's last block
      a.aux2 = static_cast<unsigned>(next_counter);
      a.ws = next_ws;
      next_counter += tiles;
      next_ws += slices * tiles * kQTileCols * rp;
      q_counters = std::max(q_counters, next_counter);
      q_partials = std::max(q_partials, next_ws);
    }
  });
  decompress_ = build(matrices_, [&](Batch& b, MatArg& a) {
    size_t col_tiles = ceil_div(a.cols, kDecompressCols);
    a.aux = static_cast<unsigned>(col_tiles);
    add_units(b, a, ceil_div(a.rows, kDecompressRows) * col_tiles);
  });
  size_t orth_partials = 0, orth_count = 0;
  orth_p_ = build_orth(p_panels_, rp, &orth_partials, &orth_count);
  orth_q_ = build_orth(q_panels_, rp, &orth_partials, &orth_count);

  WorkspaceLayout& l = layout_;
  l.orth_counters = 0;
  l.orth_t = align_up((2 + 2 * size_t{kBatchMatrices}) * sizeof(unsigned), 256);
  l.orth_partials = align_up(l.orth_t + orth_count * rp * rp * sizeof(float), 256);
  l.q_counters = align_up(l.orth_partials + orth_partials * sizeof(double), 256);
  l.q_partials = align_up(l.q_counters + q_counters * sizeof(unsigned), 256);
  l.total = align_up(l.q_partials + q_partials * sizeof(float), 256);
  workspace_bytes_ = count == 0 ? 0 : l.total;
}

void Plan::check_workspace(const void* workspace, size_t bytes) const {
  if (!cuda() || workspace_bytes_ == 0) return;
  require(workspace != nullptr, "argument 'workspace' must not be NULL (", workspace_bytes_,
          " bytes needed: Plan::workspace_bytes)");
  require(bytes >= workspace_bytes_, "workspace of ", bytes, " bytes is too small: ", workspace_bytes_, " needed");
  require(reinterpret_cast<uintptr_t>(workspace) % alignof(double) == 0, "workspace must be 8-byte aligned");
}

void Plan::prepare_workspace(void* workspace, size_t bytes, gcommStream_t stream) const {
  check_workspace(workspace, bytes);
  if (!cuda() || workspace_bytes_ == 0) return;
  check_location(workspace, device_, "workspace");
  DeviceGuard guard(device_);
  GCOMM_CUDA_CHECK(cudaMemsetAsync(workspace, 0, workspace_bytes_, reinterpret_cast<cudaStream_t>(stream)));
}

void Plan::init_q(uint64_t seed, gcommStream_t stream) const {
  if (!cuda()) return host::init_q(matrices_.data(), matrices_.size(), rank_, seed);
  DeviceGuard guard(device_);
  for (const Batch& b : init_) cuda::init_q(b, rank_, seed, stream);
}

void Plan::compensate_and_multiply_p(float* found_nonfinite, gcommStream_t stream) const {
  if (found_nonfinite != nullptr) check_location(found_nonfinite, device_, "found_nonfinite");
  if (!cuda()) return host::multiply_p(matrices_.data(), matrices_.size(), rank_, found_nonfinite);
  DeviceGuard guard(device_);
  for (const Batch& b : multiply_p_) cuda::multiply_p(b, rank_, found_nonfinite, stream);
}

void Plan::orthogonalize(Panels which, double eps, void* workspace, size_t bytes, gcommStream_t stream) const {
  require(eps >= 0.0 && eps < 1e300, "eps must be a finite number >= 0, not ", eps);
  const auto& panels = which == Panels::kP ? p_panels_ : q_panels_;
  if (!cuda()) return host::orthogonalize(panels.data(), panels.size(), rank_, eps);
  check_workspace(workspace, bytes);
  DeviceGuard guard(device_);
  for (const Batch& b : which == Panels::kP ? orth_p_ : orth_q_)
    cuda::orthogonalize(b, rank_, eps, workspace, layout_, stream);
}

void Plan::multiply_q(void* workspace, size_t bytes, gcommStream_t stream) const {
  if (!cuda()) return host::multiply_q(matrices_.data(), matrices_.size(), rank_);
  check_workspace(workspace, bytes);
  DeviceGuard guard(device_);
  for (const Batch& b : multiply_q_) cuda::multiply_q(b, rank_, workspace, layout_, stream);
}

void Plan::decompress(float scale, const float* skip, gcommStream_t stream) const {
  require(is_finite(scale), "scale must be finite, not ", scale);
  if (skip != nullptr) check_location(skip, device_, "skip");
  if (!cuda()) return host::decompress(matrices_.data(), matrices_.size(), rank_, scale, skip);
  DeviceGuard guard(device_);
  for (const Batch& b : decompress_) cuda::decompress(b, rank_, scale, skip, stream);
}

}  // namespace gradcomm::kernels::powersgd
