// Validation and dispatch of the kernels layer's operations. Everything is
// checked before anything runs: a refused call launches nothing.
#include "kernels/ops.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "common/device.hpp"
#include "common/dtype.hpp"
#include "kernels/backend.hpp"
#include "kernels/functors.hpp"

namespace gradcomm::kernels {

namespace {

// Is memory of this kind usable by the target (see require_usable)? `what` names
// the argument, `index` its element (-1: none).
void check_kind(const PointerInfo& info, const Target& target, const char* what, long long index) {
  require_usable(info, target.device, what, index, "the call runs on");
}

// Where the caller vouches for its pointers (Target::locations_known), no driver query.
void check_location(const void* ptr, const Target& target, const char* what) {
  if (target.locations_known) return;
  check_kind(pointer_info(ptr), target, what, -1);
}

void check_scalar(const void* ptr, const Target& target, const char* what, bool required) {
  if (ptr == nullptr) {
    require(!required, "argument '", what, "' must not be NULL");
    return;
  }
  if (!target.scalars_known) check_location(ptr, target, what);
}

// Checks where every non-empty tensor lives. The tensors are visited in address
// order and one driver query answers for all tensors inside the same allocation:
// gradients usually sit in a few large allocations, and a query per tensor cost
// more than the kernels (0.5 us each; 161 ResNet-50 tensors = 80 us).
void check_locations(const gcommTensor_t* tensors, size_t n, const Target& target, const char* what) {
  std::vector<std::pair<uintptr_t, size_t>> order;
  order.reserve(n);
  for (size_t k = 0; k < n; ++k)
    if (tensors[k].count > 0) order.emplace_back(reinterpret_cast<uintptr_t>(tensors[k].data), k);
  if (!std::is_sorted(order.begin(), order.end())) std::sort(order.begin(), order.end());
  PointerRange range;
  for (const auto& [address, k] : order) {
    if (!range.contains(address)) range = pointer_range(tensors[k].data);
    check_kind(range.info, target, what, static_cast<long long>(k));
  }
}

// checked_span() for list element k, naming it only when it fails.
void check_tensor_span(const gcommTensor_t& t, const char* what, size_t k) {
  if (!within_address_limit(t.data, t.count, t.dtype))
    checked_span(t.data, t.count, t.dtype, cat(what, "[", k, "]").c_str());
}

// Checks a tensor list. Messages are only formatted on failure: this runs on
// every call, over thousands of tensors.
void check_tensors(const gcommTensor_t* tensors, size_t n, const Target& target, const char* what) {
  require(tensors != nullptr || n == 0, "argument '", what, "' is NULL but its count is ", n);
  check_list_length(n, what);  // before reading the list: a count can be absurd
  for (size_t k = 0; k < n; ++k) {
    const gcommTensor_t& t = tensors[k];
    if (!is_valid_dtype(t.dtype)) checked_dtype(t.dtype, cat(what, "[", k, "].dtype").c_str());
    require(t.data != nullptr || t.count == 0, what, "[", k, "] has ", t.count,
            " elements but its data is NULL");
    check_tensor_span(t, what, k);
  }
  // On the host, device memory can only appear if a GPU is present.
  if (!target.locations_known && (target.cuda() || gpu_available()))
    check_locations(tensors, n, target, what);
}

struct Range {
  uintptr_t begin, end;
  size_t index;
};

// Throws if any two non-empty ranges overlap. Lists usually come in address order
// (tensors of one slab, bucket offsets): then no sort is needed.
void check_disjoint(std::vector<Range> ranges, const char* what) {
  ranges.erase(std::remove_if(ranges.begin(), ranges.end(), [](const Range& r) { return r.begin == r.end; }),
               ranges.end());
  auto by_begin = [](const Range& x, const Range& y) { return x.begin < y.begin; };
  if (!std::is_sorted(ranges.begin(), ranges.end(), by_begin))
    std::sort(ranges.begin(), ranges.end(), by_begin);
  for (size_t i = 1; i < ranges.size(); ++i)
    require(ranges[i].begin >= ranges[i - 1].end, what, ": tensors ", ranges[i - 1].index, " and ",
            ranges[i].index, " overlap");
}

std::vector<Range> tensor_ranges(const gcommTensor_t* t, size_t n) {
  std::vector<Range> r(n);
  for (size_t k = 0; k < n; ++k) {
    uintptr_t b = reinterpret_cast<uintptr_t>(t[k].data);
    r[k] = Range{b, b + t[k].count * dtype_size(t[k].dtype), k};
  }
  return r;
}

// The bucket's element offsets (given, or back to back), validated: no overflow,
// no two tensors sharing bucket elements.
std::vector<size_t> bucket_offsets(const gcommTensor_t* t, size_t n, const size_t* offsets,
                                   gcommDataType_t bucket_dtype) {
  std::vector<size_t> result(n);
  size_t next = 0;
  std::vector<Range> ranges(n);
  for (size_t k = 0; k < n; ++k) {
    size_t off = offsets != nullptr ? offsets[k] : next;
    require(off <= SIZE_MAX - t[k].count, "offsets[", k, "] + count overflows");
    checked_bytes(off + t[k].count, bucket_dtype, "bucket");
    result[k] = off;
    ranges[k] = Range{off, off + t[k].count, k};
    next = off + t[k].count;
  }
  if (offsets != nullptr) check_disjoint(ranges, "bucket offsets");
  return result;
}

// The bucket must hold every tensor at its offset, below the address limit.
void check_bucket(const void* bucket, const gcommTensor_t* t, size_t n, const std::vector<size_t>& offsets,
                  gcommDataType_t bucket_dtype, const Target& target) {
  size_t end = 0;
  for (size_t k = 0; k < n; ++k) end = std::max(end, offsets[k] + t[k].count);
  checked_span(bucket, end, bucket_dtype, "bucket");
  check_location(bucket, target, "bucket");
}

void run(const OpSpec& spec, const std::vector<Pair>& pairs, const Target& target) {
  if (pairs.empty()) return;
  if (target.cuda()) {
    DeviceGuard guard(target.device);
    cuda::apply(spec, pairs.data(), pairs.size(), target.stream);
  } else {
    host::apply(spec, pairs.data(), pairs.size());
  }
}

// Unscale and clip work per dtype: one run per dtype present, in list order.
void run_per_dtype(OpSpec spec, const gcommTensor_t* t, size_t n, const Target& target) {
  std::vector<Pair> pairs;
  pairs.reserve(n);
  for (int d = 0; d < gcommNumDataTypes; ++d) {
    pairs.clear();
    for (size_t k = 0; k < n; ++k)
      if (t[k].dtype == d) pairs.push_back(Pair{t[k].data, t[k].data, t[k].count});
    spec.a_dtype = spec.b_dtype = static_cast<gcommDataType_t>(d);
    run(spec, pairs, target);
  }
}

// The clip's scaling, on arguments already checked.
void scale_to_norm(const gcommTensor_t* tensors, size_t n, float max_norm, const float* norm,
                   const Target& target) {
  OpSpec spec;
  spec.kind = OpKind::kClip;
  spec.norm = norm;
  spec.max_norm = max_norm;
  run_per_dtype(spec, tensors, n, target);
}

}  // namespace

Target make_target(gcommDevice_t device, gcommStream_t stream) {
  return Target{validate_device(device), stream};
}

void unscale_and_check(const gcommTensor_t* grads, size_t n, const float* inv_scale, float* found_inf,
                       const Target& target) {
  check_tensors(grads, n, target, "grads");
  check_scalar(inv_scale, target, "inv_scale", true);
  check_scalar(found_inf, target, "found_inf", false);
  check_disjoint(tensor_ranges(grads, n), "grads");
  OpSpec spec;
  spec.kind = OpKind::kUnscale;
  spec.device_scale = inv_scale;
  spec.found_inf = found_inf;
  run_per_dtype(spec, grads, n, target);
}

void check_finite(const gcommTensor_t* grads, size_t n, float* found_inf, const Target& target) {
  check_tensors(grads, n, target, "grads");
  check_scalar(found_inf, target, "found_inf", true);
  OpSpec spec;
  spec.kind = OpKind::kCheck;
  spec.found_inf = found_inf;
  run_per_dtype(spec, grads, n, target);
}

void pack(const gcommTensor_t* src, size_t n, const size_t* offsets, void* bucket,
          gcommDataType_t bucket_dtype, float scale, const float* device_scale, const Target& target,
          float* found_per_tensor, const size_t* slots) {
  checked_dtype(bucket_dtype, "bucket_dtype");
  check_tensors(src, n, target, "src");
  std::vector<size_t> off = bucket_offsets(src, n, offsets, bucket_dtype);
  bool any = std::any_of(src, src + n, [](const gcommTensor_t& t) { return t.count > 0; });
  require(bucket != nullptr || !any, "argument 'bucket' must not be NULL");
  if (any) check_bucket(bucket, src, n, off, bucket_dtype, target);
  check_scalar(device_scale, target, "device_scale", false);
  check_scalar(found_per_tensor, target, "found_per_tensor", false);
  auto slot = [&](size_t k) { return slots != nullptr ? slots[k] : k; };
  for (size_t k = 0; k < n && found_per_tensor != nullptr; ++k)
    require(slot(k) <= std::numeric_limits<unsigned int>::max(), "found_per_tensor: slot ", slot(k),
            " of tensor ", k, " is past 2^32 - 1");
  for (int d = 0; d < gcommNumDataTypes; ++d) {
    std::vector<Pair> pairs;
    for (size_t k = 0; k < n; ++k)
      if (src[k].dtype == d)
        pairs.push_back(Pair{src[k].data, static_cast<char*>(bucket) + off[k] * dtype_size(bucket_dtype),
                             src[k].count, static_cast<unsigned int>(slot(k))});
    OpSpec spec;
    spec.found_per_tensor = found_per_tensor;
    spec.kind = OpKind::kPack;
    spec.a_dtype = static_cast<gcommDataType_t>(d);
    spec.b_dtype = bucket_dtype;
    spec.scale = scale;
    spec.device_scale = device_scale;
    run(spec, pairs, target);
  }
}

void unpack(const void* bucket, gcommDataType_t bucket_dtype, const size_t* offsets, const gcommTensor_t* dst,
            size_t n, float scale, const float* device_scale, bool accumulate, float* found_inf,
            const Target& target) {
  checked_dtype(bucket_dtype, "bucket_dtype");
  check_tensors(dst, n, target, "dst");
  check_disjoint(tensor_ranges(dst, n), "dst");
  std::vector<size_t> off = bucket_offsets(dst, n, offsets, bucket_dtype);
  bool any = std::any_of(dst, dst + n, [](const gcommTensor_t& t) { return t.count > 0; });
  require(bucket != nullptr || !any, "argument 'bucket' must not be NULL");
  if (any) check_bucket(bucket, dst, n, off, bucket_dtype, target);
  check_scalar(device_scale, target, "device_scale", false);
  check_scalar(found_inf, target, "found_inf", false);
  for (int d = 0; d < gcommNumDataTypes; ++d) {
    std::vector<Pair> pairs;
    for (size_t k = 0; k < n; ++k)
      if (dst[k].dtype == d)
        pairs.push_back(
            Pair{const_cast<char*>(static_cast<const char*>(bucket)) + off[k] * dtype_size(bucket_dtype),
                 dst[k].data, dst[k].count});
    OpSpec spec;
    spec.kind = OpKind::kUnpack;
    spec.a_dtype = bucket_dtype;
    spec.b_dtype = static_cast<gcommDataType_t>(d);
    spec.scale = scale;
    spec.device_scale = device_scale;
    spec.accumulate = accumulate;
    spec.found_inf = found_inf;
    run(spec, pairs, target);
  }
}

size_t norm_workspace_bytes(const gcommTensor_t* tensors, size_t n) {
  require(tensors != nullptr || n == 0, "argument 'tensors' is NULL but its count is ", n);
  check_list_length(n, "tensors");
  for (size_t k = 0; k < n; ++k) {
    checked_dtype(tensors[k].dtype, "tensors[].dtype");
    check_tensor_span(tensors[k], "tensors", k);  // the chunk count below cannot overflow
  }
  size_t chunks = 0;
  for (size_t k = 0; k < n; ++k) chunks += chunks_of(tensors[k].count);
  // partials + per-tensor squares (doubles) + the chunk tables (u64 + u32 per tensor).
  return (chunks + n) * sizeof(double) + n * (sizeof(unsigned long long) + sizeof(unsigned int));
}

void l2_norm(const gcommTensor_t* tensors, size_t n, float* global_norm, float* per_tensor, void* workspace,
             size_t workspace_bytes, const Target& target, double* sum_of_squares) {
  check_tensors(tensors, n, target, "tensors");
  check_scalar(global_norm, target, "global_norm", true);
  check_scalar(per_tensor, target, "per_tensor", false);
  check_scalar(sum_of_squares, target, "sum_of_squares", false);
  if (target.cuda()) {
    size_t need = norm_workspace_bytes(tensors, n);
    require(workspace_bytes >= need, "workspace of ", workspace_bytes, " bytes is too small: ", need,
            " needed (ask with workspace = NULL)");
    check_scalar(workspace, target, "workspace", need > 0);  // an empty list needs none
    require(reinterpret_cast<uintptr_t>(workspace) % alignof(double) == 0,
            "workspace must be 8-byte aligned");
    DeviceGuard guard(target.device);
    cuda::l2_norm(tensors, n, global_norm, per_tensor, static_cast<double*>(workspace), target.stream,
                  sum_of_squares);
  } else {
    host::l2_norm(tensors, n, global_norm, per_tensor, sum_of_squares);
  }
}

void norm_of_sums(const double* squares, size_t n, float* norm, const Target& target) {
  require(squares != nullptr || n == 0, "argument 'squares' is NULL but its count is ", n);
  check_list_length(n, "squares");
  check_scalar(norm, target, "norm", true);
  if (n > 0) check_scalar(squares, target, "squares", true);
  if (target.cuda()) {
    DeviceGuard guard(target.device);
    cuda::norm_of_sums(squares, n, norm, target.stream);
  } else {
    host::norm_of_sums(squares, n, norm);
  }
}

void copy_unless_flagged(float* dst, const float* src, size_t count, const float* skip,
                         const Target& target) {
  require((dst != nullptr && src != nullptr) || count == 0, "copy_unless_flagged: NULL buffer for ", count,
          " floats");
  if (count == 0) return;
  if (target.cuda()) {
    DeviceGuard guard(target.device);
    cuda::copy_unless_flagged(dst, src, count, skip, target.stream);
  } else if (skip == nullptr || !(*skip > 0.0f)) {
    std::memcpy(dst, src, count * sizeof(float));
  }
}

void clip_by_global_norm(const gcommTensor_t* tensors, size_t n, float max_norm, float* global_norm,
                         void* workspace, size_t workspace_bytes, const Target& target, float* found_inf) {
  require(max_norm > 0.0f && is_finite(max_norm), "max_norm must be a positive finite number, not ",
          max_norm);
  // The list is validated before check_disjoint reads it (NULL list, overflowing counts).
  check_tensors(tensors, n, target, "tensors");
  check_disjoint(tensor_ranges(tensors, n), "tensors");
  if (found_inf != nullptr) check_scalar(found_inf, target, "found_inf", true);
  l2_norm(tensors, n, global_norm, nullptr, workspace, workspace_bytes, target);
  if (found_inf != nullptr) {
    // The norm is Inf or NaN exactly when some value is (or the sum overflowed).
    gcommTensor_t norm{global_norm, 1, gcommFloat32};
    check_finite(&norm, 1, found_inf, target);
  }
  scale_to_norm(tensors, n, max_norm, global_norm, target);
}

void clip_to_norm(const gcommTensor_t* tensors, size_t n, float max_norm, const float* norm,
                  const Target& target) {
  require(max_norm > 0.0f && is_finite(max_norm), "max_norm must be a positive finite number, not ",
          max_norm);
  check_tensors(tensors, n, target, "tensors");
  check_disjoint(tensor_ranges(tensors, n), "tensors");
  check_scalar(norm, target, "norm", true);
  scale_to_norm(tensors, n, max_norm, norm, target);
}

void cast(const void* src, gcommDataType_t src_dtype, void* dst, gcommDataType_t dst_dtype, size_t count,
          const Target& target) {
  gcommTensor_t s{const_cast<void*>(src), count, checked_dtype(src_dtype, "src_dtype")};
  checked_dtype(dst_dtype, "dst_dtype");
  check_tensors(&s, 1, target, "src");
  gcommTensor_t d{dst, count, dst_dtype};
  check_tensors(&d, 1, target, "dst");
  if (count == 0) return;
  uintptr_t sb = reinterpret_cast<uintptr_t>(src), db = reinterpret_cast<uintptr_t>(dst);
  require(sb == db ? src_dtype == dst_dtype
                   : (sb + count * dtype_size(src_dtype) <= db || db + count * dtype_size(dst_dtype) <= sb),
          "src and dst overlap (only an exact in-place cast to the same dtype is allowed)");
  OpSpec spec;
  spec.kind = OpKind::kPack;
  spec.a_dtype = src_dtype;
  spec.b_dtype = dst_dtype;
  run(spec, {Pair{const_cast<void*>(src), dst, count}}, target);
}

void update_scale(ScalerState* state, const ScalerParams& params, const Target& target) {
  check_scalar(state, target, "state", true);
  if (target.cuda()) {
    DeviceGuard guard(target.device);
    cuda::update_scale(state, params, target.stream);
  } else {
    host::update_scale(state, params);
  }
}

}  // namespace gradcomm::kernels
