// PowerSGD as a compression strategy (reducer/strategy.hpp): which gradients are compressed, their
// P, Q and error-feedback buffers, and the per-bucket round
//   M += E;  P = M Q;  all-reduce P;  orthogonalize P;  Q' = M^T P;  all-reduce Q';
//   M^ = P Q'^T / world;  E = M - M^;  Q = Q'  (E and Q kept on an Inf/NaN step)
// on the reducer's side stream. The math is kernels/powersgd/low_rank.hpp.
//
// A gradient is compressed when it is f32, the caller gave its first dimension
// (rows; cols = count / rows), and (rows + cols) * r * min_compression_rate <
// rows * cols. The others travel in the reducer's buckets through the strategy
// PowerSGD wraps (the all-reduce strategy). Before start_iter synced steps the
// compressed gradients are all-reduced whole.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <memory>

#include "kernels/powersgd/low_rank.hpp"
#include "memory/caching_allocator.hpp"
#include "reducer/compressions.hpp"
#include "reducer/strategy.hpp"

namespace gradcomm::reducer {

struct PowerSgdOptions {
  int rank = 4;
  float min_compression_rate = 2.0f;
  uint64_t start_iter = 10;
  bool error_feedback = true;
  bool warm_start = true;
  float eps = 1e-8f;
  uint64_t seed = 0x5eed;
};

class PowerSgd final : public CompressionStrategy {
 public:
  // `rows[i]`: gradient i's first dimension (0: not a matrix). Nothing is
  // allocated until set_layout, which the reducer calls with its plan (made with
  // the compressed gradients at zero bytes): it fixes the layout of P and Q (each
  // bucket's matrices contiguous, one all-reduce each).
  PowerSgd(const std::vector<gcommTensor_t>& grads, const size_t* rows, const PowerSgdOptions& options,
           memory::CachingAllocator& allocator, SideStream& side, gcommDevice_t device);
  ~PowerSgd() override;
  PowerSgd(const PowerSgd&) = delete;
  PowerSgd& operator=(const PowerSgd&) = delete;

  gcommCompression_t kind() const noexcept override { return gcommCompressionPowerSgd; }
  const char* name() const noexcept override { return "powersgd"; }
  bool takes(size_t grad) const noexcept override { return slot_of_[grad] != kNone; }
  void set_layout(const BucketPlan& plan) override;
  // Clears the non-finite flag (and draws a fresh Q without warm start).
  void begin_step(const StrategyContext& ctx) override;
  // The wrapped strategy's bucket, then this bucket's compressed gradients
  // (unmarked ones zeroed first): compress and the P and Q all-reduces. Before
  // start_iter: the whole gradients, averaged, unscaled, Inf/NaN flagged, at once.
  void run_bucket(size_t b, bool complete, const StrategyContext& ctx) override;
  // The compressed buckets' decompress (their epilogue, fused: averaged, times
  // 1/loss scale, Inf/NaN into the step flag) and the state update (E, Q),
  // skipped when this step's P or the step flag (every other gradient's epilogue
  // has run) saw Inf/NaN. A skipped step still counts as a step.
  void end_step(const StrategyContext& ctx) override;

  const PowerSgdOptions& options() const { return options_; }
  // gcommPowerSgdStats_t's fields.
  std::vector<Counter> counters() const override;

  // State (step counter, Q, E) to and from host bytes, with a version tag.
  std::vector<uint8_t> save(StatePart part) override;
  void load(const uint8_t* data, size_t bytes, StateOrigin origin) override;

 private:
  static constexpr size_t kNone = SIZE_MAX;
  struct Slot {
    size_t grad, rows, cols;
    size_t p_off = 0, q_off = 0, e_off = 0;  // float offsets in p_, q_ (and q_next_), e_
  };
  // Locations known: its own buffers and the reducer's registered gradients.
  kernels::Target target() const { return kernels::Target{device_, side_.stream(), true}; }
  float* alloc_floats(size_t n);

  PowerSgdOptions options_;
  memory::CachingAllocator& allocator_;
  SideStream& side_;
  gcommDevice_t device_;
  std::vector<size_t> slot_of_;  // per gradient
  std::vector<Slot> slots_;
  std::vector<std::vector<size_t>> bucket_slots_;               // per bucket, in P/Q order
  std::vector<std::pair<size_t, size_t>> bucket_p_, bucket_q_;  // [begin, end) floats
  float* p_ = nullptr;
  float* q_ = nullptr;
  float* q_next_ = nullptr;
  float* e_ = nullptr;
  float* flag_ = nullptr;  // > 0: this step's P was not finite on some rank
  const float* one_ = nullptr;
  size_t p_total_ = 0, q_total_ = 0, e_total_ = 0;
  // This step's compressed buckets, decompressed at end_step.
  std::vector<size_t> pending_;
  uint64_t step_ = 0;  // synced steps finished, skipped ones included
  bool step_compressed_ = false;
  struct Stats {
    uint64_t compressed_steps = 0;
    uint64_t compressed_matrices = 0;
    uint64_t uncompressed_tensors = 0;
    uint64_t bytes_last_step = 0;                // P and Q of the compressed matrices, per rank
    uint64_t uncompressed_bytes_equivalent = 0;  // the same gradients as an f32 all-reduce
  } stats_;
};

// The compression table's factories (compressions.cpp): a gcommPowerSgdConfig_t
// (NULL: defaults) or its text form; they need setup.grad_rows and refuse sharded mode.
std::unique_ptr<CompressionStrategy> make_powersgd(const void* config, const StrategySetup& setup);
std::unique_ptr<CompressionStrategy> make_powersgd_from_text(OptionText& options, const StrategySetup& setup);

}  // namespace gradcomm::reducer
