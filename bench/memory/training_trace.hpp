// A synthetic allocation trace shaped like data-parallel training, for replay
// benchmarks. The generator (deterministic for a seed):
//  - setup: `buckets` gradient buckets of `bucket_bytes` and their half-size
//    wire buffers, on the communication stream, alive for the whole trace;
//  - every step, with a "sequence length" factor f drawn in [1 - jitter, 1]
//    (dynamic shapes are what fragments a cache):
//    * `workspaces` workspaces of 1..16 MiB, alive for the step;
//    * forward: per layer three activations of f*H, 4*f*H and f*H/8 bytes
//      (H = hidden_bytes), allocated in order and kept;
//    * backward, layers in reverse: a temporary of 4*f*H bytes allocated and
//      freed, then the layer's activations freed in stack (LIFO) order, and a
//      4 KiB flag on the communication stream allocated and freed;
//    * the workspaces freed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gradcomm {
namespace bench {

struct TraceOp {
  bool alloc;    // false: free
  uint32_t id;   // the allocation this op creates or frees
  size_t bytes;  // for allocs
  int stream;    // 0 compute, 1 communication
};

struct TraceParams {
  int steps = 20;
  int layers = 24;
  int buckets = 8;
  size_t bucket_bytes = size_t{25} << 20;
  size_t hidden_bytes = size_t{8} << 20;
  int workspaces = 4;
  double jitter = 0.25;
  uint64_t seed = 42;
};

std::vector<TraceOp> make_training_trace(const TraceParams& params);

// Number of ids a trace uses (for the replay table).
uint32_t trace_ids(const std::vector<TraceOp>& trace);

}  // namespace bench
}  // namespace gradcomm
