// The bucket planner: a pure function from the registered gradients to the
// buckets the reducer packs and all-reduces, in launch order. Tested alone
// (tests/reducer) and fuzzed (tests/fuzz/bucket_plan_fuzz.cpp).
//
// Rules (PyTorch DDP's compute_bucket_assignment_by_size is the reference):
//  - gradients are taken in reverse registration order (backward produces them
//    in reverse), or in an explicit order (the observed ready order, for the
//    rebuild after the first synced step);
//  - one open bucket per gradient dtype; a gradient joins its dtype's bucket,
//    which closes once its wire bytes reach the cap: first_bucket_bytes for the
//    first bucket of each dtype (so communication starts early), bucket_cap_bytes
//    after that; a gradient of at least bucket_cap_bytes gets a bucket of its
//    own (one between the two caps joins the first bucket, as in DDP);
//  - buckets are sized by WIRE bytes (an f32 gradient sent as f16 takes half);
//    a carried gradient (GradSpec::carried) counts its bytes but takes no place;
//  - inside a bucket every tensor starts 16-byte aligned (vector access);
//  - buckets launch in the order they become complete: by the position, in the
//    order, of their last gradient. The same input gives the same plan on every
//    rank: nothing depends on addresses or hash order.
// Zero-element gradients are allowed: they get a place (and no bytes).
// Sharded mode pads each bucket to split evenly (PlanOptions::shards).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "gradcomm/types.h"

namespace gradcomm::reducer {

struct GradSpec {
  size_t count = 0;
  gcommDataType_t dtype = gcommFloat32;
  // Carried outside the bucket buffer by a compression strategy (PowerSGD's
  // matrices): no elements in its bucket, but its own bytes count toward the
  // cap, so such gradients spread over buckets as backward produces them (each
  // bucket's compression then starts while backward goes on; at zero bytes they
  // all fell into one bucket, complete only when backward ended).
  bool carried = false;
};

constexpr int kWireSameAsGrad = -1;

struct PlanOptions {
  size_t bucket_cap_bytes = size_t{25} << 20;
  size_t first_bucket_bytes = size_t{1} << 20;
  int wire_dtype = kWireSameAsGrad;  // or a gcommDataType_t
  std::vector<size_t> order;         // empty: reverse registration order
  // Sharded mode: each bucket's elements are padded to a multiple of shards * 16
  // bytes, so it splits into `shards` equal, 16-byte-aligned shards. 1: no padding.
  size_t shards = 1;
};

struct BucketEntry {
  size_t grad;    // index in registration order
  size_t offset;  // element offset in the bucket's buffer
};

struct Bucket {
  gcommDataType_t grad_dtype = gcommFloat32;
  gcommDataType_t wire_dtype = gcommFloat32;
  std::vector<BucketEntry> entries;  // in the order the gradients are expected
  size_t elements = 0;               // wire elements, padding included
  size_t wire_bytes() const;
  size_t shard_elements(size_t shards) const { return elements / shards; }
};

struct BucketPlan {
  std::vector<Bucket> buckets;    // launch order
  std::vector<size_t> bucket_of;  // per gradient (registration order)
};

// Throws gcommInvalidArgument (invalid dtype, zero caps, an order that is not a
// permutation, sizes that overflow).
BucketPlan plan_buckets(const std::vector<GradSpec>& grads, const PlanOptions& options);

// Sharded mode: the part of gradient `grad` in shard `rank` of a bucket: its
// elements [grad_offset, grad_offset + count), at element shard_offset of the shard.
struct ShardPiece {
  size_t grad = 0;
  size_t grad_offset = 0;
  size_t count = 0;
  size_t shard_offset = 0;
};

// Shard `rank` of `shards` of `bucket`, in shard order, padding excluded (counts:
// the gradients' element counts, registration order). Empty pieces are left out.
std::vector<ShardPiece> shard_pieces(const Bucket& bucket, const std::vector<size_t>& counts, size_t shards,
                                     size_t rank);

// Throws gcommInternalError with a message if `plan` breaks a rule above.
void check_plan_invariants(const std::vector<GradSpec>& grads, const PlanOptions& options,
                           const BucketPlan& plan);

// The same buckets, gradients and offsets (a rebuild that changes nothing is skipped).
bool same_plan(const BucketPlan& a, const BucketPlan& b);

// One line per bucket, for logs.
std::string describe_plan(const BucketPlan& plan);

// The reducer's per-bucket buffers (the wire, carried gradients, the sharded
// parameters' staging) are segments that each start 256-byte aligned: every
// dtype's element offsets stay exact and vector access stays aligned.
constexpr size_t kBucketAlign = 256;
// Segments of bytes[k] one after another, each aligned: their offsets, and their
// total (padding included) in *total. Throws gcommInvalidArgument naming `what` when
// the total overflows.
std::vector<size_t> aligned_layout(const std::vector<size_t>& bytes, size_t* total, const char* what);

}  // namespace gradcomm::reducer
