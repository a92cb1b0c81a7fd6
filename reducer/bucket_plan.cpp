#include "reducer/bucket_plan.hpp"

#include <algorithm>
#include <cstdint>
#include <sstream>

#include "common/dtype.hpp"

namespace gradcomm::reducer {

namespace {

gcommDataType_t wire_of(const PlanOptions& o, gcommDataType_t grad) {
  return o.wire_dtype == kWireSameAsGrad ? grad : static_cast<gcommDataType_t>(o.wire_dtype);
}

// Elements per 16 bytes of the wire dtype: tensor offsets are multiples of it.
size_t align_elements(gcommDataType_t wire) {
  return 16 / dtype_size(wire);
}

size_t round_up(size_t n, size_t a) {
  return (n + a - 1) / a * a;
}

size_t padded_for_shards(size_t elements, gcommDataType_t wire, size_t shards) {
  const size_t unit = shards * align_elements(wire);
  require(elements <= SIZE_MAX / dtype_size(wire) - unit, "a bucket of ", elements,
          " elements cannot be padded for ", shards, " shards");
  return round_up(elements, unit);
}

std::vector<size_t> visit_order(size_t n, const PlanOptions& o) {
  if (o.order.empty()) {
    std::vector<size_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = n - 1 - i;
    return order;
  }
  require(o.order.size() == n, "order has ", o.order.size(), " entries for ", n, " gradients");
  std::vector<char> seen(n, 0);
  for (size_t i : o.order) {
    require(i < n, "order names gradient ", i, " but there are ", n);
    require(!seen[i], "order names gradient ", i, " twice");
    seen[i] = 1;
  }
  return o.order;
}

// Byte counts toward a cap: absurd gradients must not wrap them around.
size_t sat_add(size_t a, size_t b) {
  return b > SIZE_MAX - a ? SIZE_MAX : a + b;
}

// The bytes of a bucket's carried gradients (they count toward its cap).
size_t carried_bytes(const Bucket& b, const std::vector<GradSpec>& grads, gcommDataType_t wire) {
  size_t bytes = 0;
  for (const BucketEntry& e : b.entries)
    if (grads[e.grad].carried) bytes = sat_add(bytes, grads[e.grad].count * dtype_size(wire));
  return bytes;
}

}  // namespace

size_t Bucket::wire_bytes() const {
  return elements * dtype_size(wire_dtype);
}

BucketPlan plan_buckets(const std::vector<GradSpec>& grads, const PlanOptions& o) {
  require(o.bucket_cap_bytes > 0, "bucket_cap_bytes must be > 0");
  require(o.first_bucket_bytes > 0, "first_bucket_bytes must be > 0");
  require(o.shards >= 1, "shards must be >= 1");
  require(o.wire_dtype == kWireSameAsGrad || is_valid_dtype(static_cast<gcommDataType_t>(o.wire_dtype)),
          "wire dtype ", o.wire_dtype, " is not a gcommDataType_t (or -1 for the gradient's own)");
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!is_valid_dtype(grads[i].dtype)) checked_dtype(grads[i].dtype, cat("gradient ", i, " dtype").c_str());
    // Padded to 16 bytes, in the larger of the two element sizes.
    require(grads[i].count <= (SIZE_MAX / 4) - 16, "gradient ", i, ": ", grads[i].count,
            " elements overflow");
  }
  std::vector<size_t> order = visit_order(grads.size(), o);

  BucketPlan plan;
  plan.bucket_of.assign(grads.size(), 0);
  std::vector<Bucket> closed;
  std::vector<size_t> closed_last_pos;  // position in `order` of each closed bucket's last gradient
  Bucket open[gcommNumDataTypes];
  size_t open_carried[gcommNumDataTypes] = {};  // bytes of the open bucket's carried gradients
  bool has_open[gcommNumDataTypes] = {};
  size_t open_last_pos[gcommNumDataTypes] = {};
  int closed_count[gcommNumDataTypes] = {};

  auto close = [&](int d) {
    closed.push_back(std::move(open[d]));
    closed_last_pos.push_back(open_last_pos[d]);
    open[d] = Bucket{};
    open_carried[d] = 0;
    has_open[d] = false;
    ++closed_count[d];
  };
  auto cap_for = [&](int d) { return closed_count[d] == 0 ? o.first_bucket_bytes : o.bucket_cap_bytes; };

  for (size_t pos = 0; pos < order.size(); ++pos) {
    size_t g = order[pos];
    int d = grads[g].dtype;
    gcommDataType_t wire = wire_of(o, grads[g].dtype);
    size_t bytes = grads[g].count * dtype_size(wire);
    // A gradient of at least the cap has a bucket of its own. One between the first
    // bucket's cap and the cap joins the open bucket, as in DDP: the first bucket
    // then launches as soon as that gradient is ready, where closing it before (a
    // bucket of a few biases) left the gradient to wait for a full bucket behind it.
    if (bytes >= o.bucket_cap_bytes && has_open[d] && !open[d].entries.empty()) close(d);
    if (!has_open[d]) {
      open[d].grad_dtype = grads[g].dtype;
      open[d].wire_dtype = wire;
      has_open[d] = true;
    }
    Bucket& b = open[d];
    size_t offset = round_up(b.elements, align_elements(wire));
    const size_t placed = grads[g].carried ? 0 : grads[g].count;
    // With caps near SIZE_MAX a bucket's bytes could wrap; no such buffer can exist.
    require(placed <= SIZE_MAX / dtype_size(wire) - offset, "gradient ", g, ": ", placed,
            " elements at offset ", offset, " overflow the address space of a ", dtype_name(wire), " bucket");
    b.entries.push_back(BucketEntry{g, offset});
    b.elements = offset + placed;
    if (grads[g].carried) open_carried[d] = sat_add(open_carried[d], bytes);
    open_last_pos[d] = pos;
    if (sat_add(b.wire_bytes(), open_carried[d]) >= cap_for(d) || bytes >= o.bucket_cap_bytes) close(d);
  }
  for (int d = 0; d < gcommNumDataTypes; ++d)
    if (has_open[d]) close(d);
  if (o.shards > 1)
    for (Bucket& b : closed) b.elements = padded_for_shards(b.elements, b.wire_dtype, o.shards);

  // Launch order: when each bucket's last gradient arrives.
  std::vector<size_t> idx(closed.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::sort(idx.begin(), idx.end(),
            [&](size_t a, size_t b) { return closed_last_pos[a] < closed_last_pos[b]; });
  for (size_t i : idx) plan.buckets.push_back(std::move(closed[i]));
  for (size_t b = 0; b < plan.buckets.size(); ++b)
    for (const BucketEntry& e : plan.buckets[b].entries) plan.bucket_of[e.grad] = b;
  return plan;
}

void check_plan_invariants(const std::vector<GradSpec>& grads, const PlanOptions& o, const BucketPlan& plan) {
  auto broken = [](const std::string& what) {
    fail(gcommInternalError, "bucket plan invariant broken: ", what);
  };
  std::vector<size_t> order = visit_order(grads.size(), o);
  std::vector<size_t> pos_of(grads.size());
  for (size_t p = 0; p < order.size(); ++p) pos_of[order[p]] = p;
  std::vector<int> seen(grads.size(), 0);
  if (plan.bucket_of.size() != grads.size()) broken("bucket_of has the wrong size");
  size_t previous_last = 0;
  int first_seen[gcommNumDataTypes] = {0, 0, 0};
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    const Bucket& k = plan.buckets[b];
    if (k.entries.empty()) broken(cat("bucket ", b, " is empty"));
    if (k.wire_dtype != wire_of(o, k.grad_dtype)) broken(cat("bucket ", b, " has the wrong wire dtype"));
    size_t end = 0, last = 0;
    for (size_t i = 0; i < k.entries.size(); ++i) {
      const BucketEntry& e = k.entries[i];
      if (e.grad >= grads.size()) broken(cat("bucket ", b, " names gradient ", e.grad));
      if (seen[e.grad]++) broken(cat("gradient ", e.grad, " is in two buckets"));
      if (plan.bucket_of[e.grad] != b) broken(cat("bucket_of[", e.grad, "] is wrong"));
      if (grads[e.grad].dtype != k.grad_dtype) broken(cat("bucket ", b, " mixes dtypes"));
      if ((e.offset * dtype_size(k.wire_dtype)) % 16 != 0)
        broken(cat("gradient ", e.grad, " is not 16-byte aligned"));
      if (e.offset < end) broken(cat("gradient ", e.grad, " overlaps the previous one in bucket ", b));
      if (grads[e.grad].count > SIZE_MAX / dtype_size(k.wire_dtype) - e.offset)
        broken(cat("bucket ", b, " overflows the address space"));
      end = e.offset + (grads[e.grad].carried ? 0 : grads[e.grad].count);
      if (i > 0 && pos_of[e.grad] < pos_of[k.entries[i - 1].grad])
        broken(cat("bucket ", b, " is out of order"));
      last = std::max(last, pos_of[e.grad]);
    }
    const size_t expected = o.shards > 1 ? padded_for_shards(end, k.wire_dtype, o.shards) : end;
    if (k.elements != expected)
      broken(cat("bucket ", b, " elements ", k.elements, " != ", expected, " (the end of its last tensor ",
                 end, o.shards > 1 ? ", padded for the shards)" : ")"));
    // A gradient of at least bucket_cap_bytes is alone, whatever the first bucket's cap.
    if (k.entries.size() > 1)
      for (const BucketEntry& e : k.entries)
        if (grads[e.grad].count * dtype_size(k.wire_dtype) >= o.bucket_cap_bytes)
          broken(cat("gradient ", e.grad, " (at least the cap) shares bucket ", b));
    // Below the cap before its last gradient joined, unless that one was alone.
    size_t cap = first_seen[k.grad_dtype]++ == 0 ? o.first_bucket_bytes : o.bucket_cap_bytes;
    if (k.entries.size() > 1) {
      Bucket before = k;
      before.entries.pop_back();
      const BucketEntry& prev = before.entries.back();
      size_t before_last = sat_add(
          (prev.offset + (grads[prev.grad].carried ? 0 : grads[prev.grad].count)) * dtype_size(k.wire_dtype),
          carried_bytes(before, grads, k.wire_dtype));
      if (before_last >= cap) broken(cat("bucket ", b, " went past its cap"));
    }
    if (b > 0 && last < previous_last) broken(cat("bucket ", b, " launches before an earlier-completed one"));
    previous_last = last;
  }
  for (size_t g = 0; g < grads.size(); ++g)
    if (seen[g] != 1) broken(cat("gradient ", g, " is in no bucket"));
}

std::vector<ShardPiece> shard_pieces(const Bucket& bucket, const std::vector<size_t>& counts, size_t shards,
                                     size_t rank) {
  const size_t size = bucket.shard_elements(shards);
  const size_t lo = rank * size, hi = lo + size;
  std::vector<ShardPiece> pieces;
  for (const BucketEntry& e : bucket.entries) {
    const size_t begin = std::max(lo, e.offset), end = std::min(hi, e.offset + counts[e.grad]);
    if (begin < end) pieces.push_back(ShardPiece{e.grad, begin - e.offset, end - begin, begin - lo});
  }
  return pieces;
}

std::string describe_plan(const BucketPlan& plan) {
  std::ostringstream os;
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    const Bucket& k = plan.buckets[b];
    os << "bucket " << b << ": " << dtype_name(k.grad_dtype) << " -> " << dtype_name(k.wire_dtype) << ", "
       << k.entries.size() << " tensors, " << k.wire_bytes() << " bytes, gradients";
    size_t shown = 0;
    for (const BucketEntry& e : k.entries) {
      if (shown++ == 8) {
        os << " ...";
        break;
      }
      os << " " << e.grad;
    }
    os << "\n";
  }
  return os.str();
}

std::vector<size_t> aligned_layout(const std::vector<size_t>& bytes, size_t* total, const char* what) {
  std::vector<size_t> offsets(bytes.size());
  size_t at = 0;
  for (size_t k = 0; k < bytes.size(); ++k) {
    offsets[k] = at;
    require(bytes[k] <= SIZE_MAX - at - kBucketAlign, what, "' total size overflows");
    at = (at + bytes[k] + kBucketAlign - 1) / kBucketAlign * kBucketAlign;
  }
  *total = at;
  return offsets;
}

bool same_plan(const BucketPlan& a, const BucketPlan& b) {
  if (a.buckets.size() != b.buckets.size()) return false;
  for (size_t k = 0; k < a.buckets.size(); ++k) {
    const Bucket& x = a.buckets[k];
    const Bucket& y = b.buckets[k];
    if (x.elements != y.elements || x.wire_dtype != y.wire_dtype || x.entries.size() != y.entries.size())
      return false;
    for (size_t e = 0; e < x.entries.size(); ++e)
      if (x.entries[e].grad != y.entries[e].grad || x.entries[e].offset != y.entries[e].offset) return false;
  }
  return true;
}

}  // namespace gradcomm::reducer
