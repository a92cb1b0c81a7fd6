// The block-quantized wire: blockwise codes (a kernels/quant/ format: int8, fp8,
// fp4) with error feedback (docs/reducer.md, "The int8 wire"); the int8, fp8 and
// fp4 wires are this strategy with their format (int8_wire.*, fp8_wire.*,
// fp4_wire.*). Per
// bucket (f32 wire), after the usual pack (divided by the world size):
//   1. quantize this rank's values plus its error feedback E into W chunks of
//      blocks of codes with one f32 scale each (kernels/quant/); the residual
//      (what the codes lost) stays in the bucket's buffer;
//   2. all-to-all: rank i receives everyone's chunk i;
//   3. rank i decodes and sums them in rank order, adds its own error feedback
//      E2 for chunk i, and quantizes the sum again straight into its slot of the
//      all-gather buffer (the residual kept for E2);
//   4. all-gather the reduced chunks;
//   5. decode the whole bucket and run the usual epilogue (times 1/loss scale,
//      Inf/NaN flagged, cast back) from it.
// At end_step, E and E2 take the residuals for every quantized bucket unless the
// step saw Inf/NaN (then both are left as they were). With both, what the wire
// loses telescopes: over T steps, the sum of the results differs from the sum of
// the true averages by the last E and E2 only (docs/reducer.md). Each rank sends 2 (W-1) chunks: about
// 2 (W-1)/W (bits/8 + 4/block) bytes per value against an f32 ring all-reduce's
// 2 (W-1)/W 4 bytes.
//
// The values are unscaled (times 1/loss scale) in the pack, so E and E2 hold
// true gradient units whatever the loss scale does. Buckets whose wire is not f32,
// buckets too small to save bytes (W chunks of whole blocks >= 4 bytes a value),
// and steps before start_iter go through the wrapped all-reduce strategy. Bucket views and sharded mode are
// refused at enable (the views are the wire, which holds the residual; a sharded quantized reduce-scatter is
// not built).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "gradcomm/reducer.h"
#include "kernels/quant/quant.hpp"
#include "memory/caching_allocator.hpp"
#include "reducer/compressions.hpp"
#include "reducer/strategy.hpp"

namespace gradcomm::reducer {

// Which wire this is: its compression kind and name, the format of its codes, and
// the magic of its saved state (a state of another wire is refused).
struct BlockWireKind {
  gcommCompression_t kind;
  const char* name;  // "int8"; "int8 wire" in messages
  const kernels::quant::Codec& codec;
  char state_magic[8];
};

struct BlockWireOptions {
  size_t block = 256;
  bool error_feedback = true;
  uint64_t start_iter = 0;
};

// The options of the config structs' common fields, checked (gcommInvalidArgument
// naming the field), and the setups the wire refuses (gcommNotSupported).
BlockWireOptions block_wire_options(int block_size, int error_feedback, uint64_t start_iter);
void refuse_unsupported_setup(const char* wire, const StrategySetup& setup);
// The text form's keys of those fields (block_size, error_feedback, start_iter).
void take_block_wire_options(OptionText& options, int& block_size, int& error_feedback, uint64_t& start_iter);

class BlockWire final : public CompressionStrategy {
 public:
  BlockWire(const BlockWireKind& kind, const BlockWireOptions& options, int world, int rank,
            memory::CachingAllocator& allocator, SideStream& side, gcommDevice_t device);
  ~BlockWire() override;
  BlockWire(const BlockWire&) = delete;
  BlockWire& operator=(const BlockWire&) = delete;

  gcommCompression_t kind() const noexcept override { return kind_.kind; }
  const char* name() const noexcept override { return kind_.name; }
  // Fixes the chunk layout of every f32 bucket and allocates E (zeros) and the
  // staging buffers, sized for the largest bucket (buckets run one after another
  // on the side stream).
  void set_layout(const BucketPlan& plan) override;
  void begin_step(const StrategyContext& ctx) override;
  void run_bucket(size_t b, bool complete, const StrategyContext& ctx) override;
  void end_step(const StrategyContext& ctx) override;

  // The fields of the wire's stats struct (gcommInt8Stats_t; fp8's and fp4's are it).
  std::vector<Counter> counters() const override;
  // State (step counter, E per quantized bucket) to and from host bytes.
  std::vector<uint8_t> save(StatePart part) override;
  void load(const uint8_t* data, size_t bytes, StateOrigin origin) override;

 private:
  kernels::Target target() const { return kernels::Target{device_, side_.stream(), true}; }
  void* alloc(size_t bytes);
  void release();  // frees every buffer (after the side stream's work)

  const BlockWireKind& kind_;
  BlockWireOptions options_;
  int world_, rank_;
  memory::CachingAllocator& allocator_;
  SideStream& side_;
  gcommDevice_t device_;
  std::vector<uint8_t> quantized_;  // per bucket: 1 when it goes through this strategy
  std::vector<kernels::quant::Layout> layouts_;
  std::vector<size_t> e_offset_;   // per bucket: its E in e_ (floats)
  std::vector<size_t> e2_offset_;  // per bucket: its E2 in e2_ and r2_ (floats)
  float* e_ = nullptr;             // this rank's contribution: what its codes lost
  float* e2_ = nullptr;            // this rank's chunks as their owner: what the requantization lost
  float* r2_ = nullptr;            // this step's owner residuals, committed to e2_ at end_step
  size_t e_total_ = 0, e2_total_ = 0;
  void* send_ = nullptr;         // this rank's quantized bucket, W chunks
  void* recv_ = nullptr;         // everyone's chunk `rank_`
  void* gather_ = nullptr;       // the reduced chunks, all ranks'
  float* decoded_ = nullptr;     // the bucket decoded, for the epilogue
  std::vector<size_t> pending_;  // this step's quantized buckets (E committed at end_step)
  uint64_t step_ = 0;
  bool step_quantized_ = false;
  struct Stats {
    uint64_t compressed_steps = 0;
    uint64_t compressed_buckets = 0;    // in the plan
    uint64_t bytes_last_step = 0;       // this rank sent for them, in the last quantized step
    uint64_t f32_allreduce_bytes = 0;   // the same buckets as an f32 ring all-reduce
    uint64_t error_feedback_bytes = 0;  // memory held by E
  } stats_;
};

}  // namespace gradcomm::reducer
