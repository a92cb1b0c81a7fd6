// Fuzz target: the bucket planner on random gradient lists, caps, wire dtypes and
// orders. Valid input must give a plan that keeps every invariant (each element
// in exactly one bucket, no overlap, alignment, caps, launch order) and the same
// plan twice; invalid input must be refused with gcommInvalidArgument.
#include <cstdint>
#include <vector>

#include "common/error.hpp"
#include "fuzz_input.hpp"
#include "reducer/bucket_plan.hpp"

using namespace gradcomm;
using namespace gradcomm::reducer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  std::vector<GradSpec> grads(in.byte() % 64);
  for (auto& g : grads) {
    uint8_t kind = in.byte();
    g.count = kind & 0x80 ? in.take<uint64_t>() : in.take<uint32_t>() % (1u << 22);  // sometimes absurd
    g.dtype = static_cast<gcommDataType_t>(kind % 4 == 3 ? in.byte() : kind % 4);    // sometimes invalid
    g.carried = (kind & 0x40) != 0;                                                  // PowerSGD's matrices
  }
  PlanOptions o;
  o.first_bucket_bytes = in.take<uint32_t>();
  o.bucket_cap_bytes = in.take<uint32_t>() | (in.byte() & 1 ? 0 : 1u << 24);
  uint8_t wire = in.byte();
  o.wire_dtype = wire % 5 == 4 ? kWireSameAsGrad : wire % 5;  // 3 is invalid
  if (in.byte() & 1) {
    for (size_t i = 0; i < grads.size(); ++i) o.order.push_back(i);
    for (size_t i = o.order.size(); i > 1; --i) std::swap(o.order[i - 1], o.order[in.byte() % i]);
    if (!o.order.empty() && (in.byte() & 7) == 0) o.order.back() = in.byte();  // sometimes not a permutation
  }
  BucketPlan plan;
  try {
    plan = plan_buckets(grads, o);
  } catch (const Error& e) {
    if (e.status() != gcommInvalidArgument) __builtin_trap();
    return 0;
  }
  check_plan_invariants(grads, o, plan);  // throws (and so crashes the fuzzer) on a broken plan
  BucketPlan again = plan_buckets(grads, o);
  if (again.bucket_of != plan.bucket_of || describe_plan(again) != describe_plan(plan)) __builtin_trap();
  return 0;
}
