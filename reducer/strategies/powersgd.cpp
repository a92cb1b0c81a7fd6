#include "reducer/strategies/powersgd.hpp"

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>

#include "common/config.hpp"
#include "common/cuda_check.hpp"
#include "common/device.hpp"
#include "common/dtype.hpp"
#include "common/log.hpp"
#include "kernels/ops.hpp"
#include "memory/device_bytes.hpp"
#include "reducer/strategies/state_bytes.hpp"

namespace gradcomm::reducer {

namespace kp = kernels::powersgd;

namespace {

constexpr char kStateMagic[8] = {'G', 'C', 'P', 'S', 'G', 'D', '\0', '\0'};
// Version 2 added the part (StatePart) after the version; version 1 is a whole state.
constexpr uint32_t kStateVersion = 2;
constexpr char kStateName[] = "PowerSGD state";

PowerSgdOptions powersgd_options_from(const gcommPowerSgdConfig_t& c) {
  require(c.rank >= 1 && c.rank <= kp::kMaxRank, "rank ", c.rank, " is outside 1..", kp::kMaxRank);
  require(std::isfinite(c.min_compression_rate) && c.min_compression_rate > 0.0f,
          "min_compression_rate must be a positive finite number, not ", c.min_compression_rate);
  require(c.error_feedback == 0 || c.error_feedback == 1, "error_feedback must be 0 or 1");
  require(c.warm_start == 0 || c.warm_start == 1, "warm_start must be 0 or 1");
  require(std::isfinite(c.orthogonalization_eps) && c.orthogonalization_eps >= 0.0f,
          "orthogonalization_eps must be a finite number >= 0");
  require(c.reserved_v1 == 0, "reserved_v1 must be 0");
  PowerSgdOptions o;
  o.rank = c.rank;
  o.min_compression_rate = c.min_compression_rate;
  o.start_iter = c.start_iter;
  o.error_feedback = c.error_feedback == 1;
  o.warm_start = c.warm_start == 1;
  o.eps = c.orthogonalization_eps;
  o.seed = c.seed;
  return o;
}

}  // namespace

std::unique_ptr<CompressionStrategy> make_powersgd(const void* config, const StrategySetup& setup) {
  const gcommPowerSgdConfig_t defaults = GCOMM_POWERSGD_CONFIG_INITIALIZER;
  const PowerSgdOptions options = powersgd_options_from(
      read_config(static_cast<const gcommPowerSgdConfig_t*>(config), defaults, "gcommPowerSgdConfig_t"));
  require(setup.grad_rows != nullptr,
          "PowerSGD needs grad_rows: each gradient's first dimension (0: not a matrix)");
  if (setup.sharded)
    fail(gcommNotSupported,
         "PowerSGD with sharded gradients is not defined: its P and Q are all-reduced "
         "whole and decompressed on every rank; use gcommReducerAllReduce mode for PowerSGD");
  return std::make_unique<PowerSgd>(setup.grads, setup.grad_rows, options, setup.allocator, setup.side,
                                    setup.device);
}

std::unique_ptr<CompressionStrategy> make_powersgd_from_text(OptionText& options,
                                                             const StrategySetup& setup) {
  gcommPowerSgdConfig_t c = GCOMM_POWERSGD_CONFIG_INITIALIZER;
  options.take("rank", c.rank);
  options.take("min_compression_rate", c.min_compression_rate);
  options.take("start_iter", c.start_iter);
  options.take("error_feedback", c.error_feedback);
  options.take("warm_start", c.warm_start);
  options.take("orthogonalization_eps", c.orthogonalization_eps);
  options.take("seed", c.seed);
  options.finish();
  return make_powersgd(&c, setup);
}

PowerSgd::PowerSgd(const std::vector<gcommTensor_t>& grads, const size_t* rows,
                   const PowerSgdOptions& options, memory::CachingAllocator& allocator, SideStream& side,
                   gcommDevice_t device)
    : options_(options), allocator_(allocator), side_(side), device_(device), slot_of_(grads.size(), kNone) {
  const double r = options_.rank;
  for (size_t i = 0; i < grads.size(); ++i) {
    const gcommTensor_t& g = grads[i];
    if (rows[i] == 0) continue;
    require(g.count % rows[i] == 0, "rows[", i, "] = ", rows[i], " does not divide gradient ", i, "'s ",
            g.count, " elements");
    size_t cols = g.count / rows[i];
    bool worth = (static_cast<double>(rows[i]) + cols) * r * options_.min_compression_rate <
                 static_cast<double>(rows[i]) * cols;
    if (g.dtype != gcommFloat32 || !worth) continue;
    slot_of_[i] = slots_.size();
    slots_.push_back(Slot{i, rows[i], cols});
  }
  stats_.compressed_matrices = slots_.size();
  stats_.uncompressed_tensors = grads.size() - slots_.size();
}

PowerSgd::~PowerSgd() {
  try {
    side_.quiesce();
    for (float* b : {p_, q_, q_next_, e_, flag_})
      if (b != nullptr) allocator_.deallocate(b, side_.stream());
  } catch (const std::exception& e) {
    GCOMM_WARN("PowerSGD teardown: ", e.what());
  }
}

float* PowerSgd::alloc_floats(size_t n) {
  return n == 0 ? nullptr : static_cast<float*>(allocator_.allocate(n * sizeof(float), side_.stream()));
}

// P and Q in plan order (each bucket's matrices contiguous), E in slot order;
// Q starts from the seeded Gaussian, E from zero.
void PowerSgd::set_layout(const BucketPlan& plan) {
  const size_t r = options_.rank;
  bucket_slots_.assign(plan.buckets.size(), {});
  bucket_p_.assign(plan.buckets.size(), {0, 0});
  bucket_q_.assign(plan.buckets.size(), {0, 0});
  size_t p = 0, q = 0, e = 0;
  for (size_t b = 0; b < plan.buckets.size(); ++b) {
    bucket_p_[b].first = p;
    bucket_q_[b].first = q;
    for (const BucketEntry& entry : plan.buckets[b].entries) {
      size_t k = slot_of_[entry.grad];
      if (k == kNone) continue;
      Slot& s = slots_[k];
      s.p_off = p;
      s.q_off = q;
      s.e_off = e;
      p += s.rows * r;
      q += s.cols * r;
      e += s.rows * s.cols;
      bucket_slots_[b].push_back(k);
    }
    bucket_p_[b].second = p;
    bucket_q_[b].second = q;
  }
  p_total_ = p;
  q_total_ = q;
  pending_.reserve(plan.buckets.size());
  e_total_ = options_.error_feedback ? e : 0;
  p_ = alloc_floats(p_total_);
  q_ = alloc_floats(q_total_);
  q_next_ = alloc_floats(q_total_);
  e_ = alloc_floats(e_total_);
  flag_ = alloc_floats(1);
  std::vector<float> host_q(q_total_);
  for (size_t k = 0; k < slots_.size(); ++k)
    kp::initial_q(options_.seed, k, slots_[k].cols, options_.rank, host_q.data() + slots_[k].q_off);
  memory::copy_bytes(q_, host_q.data(), q_total_ * sizeof(float), device_, side_.stream(),
                     cudaMemcpyHostToDevice);
  std::vector<float> zeros(std::max<size_t>(e_total_, 1), 0.0f);
  memory::copy_bytes(e_, zeros.data(), e_total_ * sizeof(float), device_, side_.stream(),
                     cudaMemcpyHostToDevice);
  side_.synchronize();
  for (const Slot& s : slots_) stats_.uncompressed_bytes_equivalent += s.rows * s.cols * sizeof(float);
}

void PowerSgd::begin_step(const StrategyContext& ctx) {
  if (rest_ != nullptr) rest_->begin_step(ctx);
  one_ = ctx.one;
  pending_.clear();  // a step that failed half-way left its buckets here
  step_compressed_ = step_ >= options_.start_iter && !slots_.empty();
  if (step_compressed_) {
    const float zero = 0.0f;
    memory::copy_bytes(flag_, &zero, sizeof zero, device_, side_.stream(), cudaMemcpyHostToDevice);
    if (!options_.warm_start) {
      // A fresh Q each step, still the same on every rank.
      std::vector<float> host_q(q_total_);
      for (size_t k = 0; k < slots_.size(); ++k)
        kp::initial_q(options_.seed + step_ + 1, k, slots_[k].cols, options_.rank,
                      host_q.data() + slots_[k].q_off);
      memory::copy_bytes(q_, host_q.data(), q_total_ * sizeof(float), device_, side_.stream(),
                         cudaMemcpyHostToDevice);
      if (device_.kind == gcommDeviceCuda) side_.synchronize();  // host_q is about to go
    }
    stats_.bytes_last_step = (p_total_ + q_total_) * sizeof(float);
  }
}

void PowerSgd::run_bucket(size_t bucket, bool complete, const StrategyContext& ctx) {
  const std::vector<size_t>& ks = bucket_slots_[bucket];
  // An unmarked compressed gradient contributes zero.
  if (!complete)
    for (size_t k : ks)
      if (!ctx.marked[slots_[k].grad])
        memory::zero_bytes(ctx.grads[slots_[k].grad].data, slots_[k].rows * slots_[k].cols * sizeof(float),
                           device_, side_.stream());
  if (rest_ != nullptr) rest_->run_bucket(bucket, complete, ctx);
  if (ks.empty()) return;
  const std::vector<gcommTensor_t>& grads = ctx.grads;
  const bool average = ctx.average;
  comm::Communicator& communicator = ctx.comm;
  auto all_reduce = [&](const char* what, float* buf, size_t count, gcommRedOp_t op) {
    auto span = ctx.span(what, SpanKind::kComm, bucket);
    // P, Q and registered gradients: buffers known.
    communicator.collective(comm::owned_buffers_call(comm::Collective::kAllReduce, buf, buf, count,
                                                     gcommFloat32, side_.stream(), op));
  };
  if (!step_compressed_) {
    // Warm-up: the whole gradient, averaged by the transport, then unscaled and checked.
    std::vector<gcommTensor_t> whole;
    for (size_t k : ks) {
      const gcommTensor_t& g = grads[slots_[k].grad];
      all_reduce("all_reduce (PowerSGD warm-up)", static_cast<float*>(g.data), g.count,
                 average ? gcommAvg : gcommSum);
      whole.push_back(g);
    }
    kernels::unscale_and_check(whole.data(), whole.size(), ctx.inv_scale != nullptr ? ctx.inv_scale : one_,
                               ctx.step_flag, target());
    return;
  }
  const int r = options_.rank;
  std::vector<kp::LowRankMatrix> state, next;  // q = Q (read by P = MQ), q = Q' (the rest)
  for (size_t k : ks) {
    const Slot& s = slots_[k];
    kp::LowRankMatrix m{static_cast<float*>(grads[s.grad].data),
                        e_ != nullptr ? e_ + s.e_off : nullptr,
                        p_ + s.p_off,
                        q_ + s.q_off,
                        s.rows,
                        s.cols};
    state.push_back(m);
    m.q = q_next_ + s.q_off;
    next.push_back(m);
  }
  const kernels::Target t = target();
  const size_t n = state.size();
  {
    auto span = ctx.span("PowerSGD P = MQ", SpanKind::kCompute, bucket);
    // M += E (error feedback) fused into P = M Q: one pass over M fewer.
    if (options_.error_feedback)
      kp::add_error_multiply_mq(state.data(), n, r, t);
    else
      kp::multiply_mq(state.data(), n, r, t);
  }
  float* p = p_ + bucket_p_[bucket].first;
  size_t p_count = bucket_p_[bucket].second - bucket_p_[bucket].first;
  all_reduce("all_reduce P", p, p_count, gcommSum);
  // Inf/NaN anywhere on any rank shows in the summed P: flag it, keep E and Q.
  gcommTensor_t p_tensor{p, p_count, gcommFloat32};
  kernels::unscale_and_check(&p_tensor, 1, one_, flag_, t);
  {
    auto span = ctx.span("PowerSGD orthogonalize, Q = MtP", SpanKind::kCompute, bucket);
    kp::orthogonalize(next.data(), n, r, options_.eps, t);
    kp::multiply_mtp(next.data(), n, r, nullptr, t);
  }
  float* q = q_next_ + bucket_q_[bucket].first;
  size_t q_count = bucket_q_[bucket].second - bucket_q_[bucket].first;
  all_reduce("all_reduce Q", q, q_count, gcommSum);
  // Q' can overflow in its sum while P did not: flagged too, or it would reach E and Q.
  gcommTensor_t q_tensor{q, q_count, gcommFloat32};
  kernels::unscale_and_check(&q_tensor, 1, one_, flag_, t);
  // Decompress (which writes E) and Q's commit wait for end_step: only then is
  // it known whether any gradient of the step, compressed or not, was non-finite.
  pending_.push_back(bucket);
}

// The state changes of the step's compressed buckets, on the side stream after
// every bucket's epilogue: E and Q stay as they were when the step saw Inf/NaN
// anywhere (this step's P, or `step_flag`, where the epilogues of the
// uncompressed gradients record theirs).
void PowerSgd::end_step(const StrategyContext& ctx) {
  if (rest_ != nullptr) rest_->end_step(ctx);
  const std::vector<gcommTensor_t>& grads = ctx.grads;
  const float* step_flag = ctx.step_flag;
  const float scale = ctx.average ? 1.0f / static_cast<float>(ctx.comm.size()) : 1.0f;
  const kp::DecompressOutput out{ctx.inv_scale, ctx.step_flag};
  const kernels::Target t = target();
  if (!pending_.empty()) {
    // flag_ |= *step_flag, as flags are 0 or 1: commit copies unless flag_ is set
    // already. (On the GPU the one writing thread reads the flag before it writes;
    // the block's other threads read it too but write nothing.)
    kernels::copy_unless_flagged(flag_, step_flag, 1, flag_, t);
  }
  const int r = options_.rank;
  for (size_t bucket : pending_) {
    auto span = ctx.span("PowerSGD decompress", SpanKind::kCompute, bucket);
    std::vector<kp::LowRankMatrix> next;
    for (size_t k : bucket_slots_[bucket]) {
      const Slot& s = slots_[k];
      next.push_back(kp::LowRankMatrix{static_cast<float*>(grads[s.grad].data),
                                       e_ != nullptr ? e_ + s.e_off : nullptr, p_ + s.p_off,
                                       q_next_ + s.q_off, s.rows, s.cols});
    }
    kp::decompress(next.data(), next.size(), r, scale, flag_, t, out);
    size_t q_begin = bucket_q_[bucket].first, q_count = bucket_q_[bucket].second - q_begin;
    kernels::copy_unless_flagged(q_ + q_begin, q_next_ + q_begin, q_count, flag_, t);
  }
  pending_.clear();
  if (step_compressed_) ++stats_.compressed_steps;
  ++step_;
}

std::vector<Counter> PowerSgd::counters() const {
  return {{"compressed_steps", stats_.compressed_steps},
          {"compressed_matrices", stats_.compressed_matrices},
          {"uncompressed_tensors", stats_.uncompressed_tensors},
          {"bytes_last_step", stats_.bytes_last_step},
          {"uncompressed_bytes_equivalent", stats_.uncompressed_bytes_equivalent}};
}

std::vector<uint8_t> PowerSgd::save(StatePart part) {
  // A shared state is Q and the step counter: the same bytes on every rank.
  const bool residual = options_.error_feedback && part == StatePart::kAll;
  std::vector<float> q(q_total_), e(residual ? e_total_ : 0);
  memory::copy_bytes(q.data(), q_, q_total_ * sizeof(float), device_, side_.stream(), cudaMemcpyDeviceToHost);
  if (residual)
    memory::copy_bytes(e.data(), e_, e_total_ * sizeof(float), device_, side_.stream(),
                       cudaMemcpyDeviceToHost);
  side_.synchronize();
  std::vector<uint8_t> out(kStateMagic, kStateMagic + sizeof kStateMagic);
  put(out, kStateVersion);
  put(out, static_cast<uint8_t>(part));
  put(out, static_cast<uint32_t>(options_.rank));
  put(out, step_);
  put(out, static_cast<uint64_t>(slots_.size()));
  put(out, static_cast<uint8_t>(options_.error_feedback ? 1 : 0));
  for (const Slot& s : slots_) {  // in slot order, independent of the plan's layout
    put(out, static_cast<uint64_t>(s.grad));
    put(out, static_cast<uint64_t>(s.rows));
    put(out, static_cast<uint64_t>(s.cols));
    const auto* qb = reinterpret_cast<const uint8_t*>(q.data() + s.q_off);
    out.insert(out.end(), qb, qb + s.cols * options_.rank * sizeof(float));
    if (residual) {
      const auto* eb = reinterpret_cast<const uint8_t*>(e.data() + s.e_off);
      out.insert(out.end(), eb, eb + s.rows * s.cols * sizeof(float));
    }
  }
  return out;
}

// Nothing in PowerSGD's state depends on the world (Q is per matrix, the residual
// per gradient), so a state of an earlier generation loads as this rank's own. A
// shared state carried (kEarlierWorld) sets Q and the step and keeps the residual.
void PowerSgd::load(const uint8_t* data, size_t bytes, StateOrigin origin) {
  require(data != nullptr || bytes == 0, "PowerSGD state: data is NULL");
  const uint8_t* p = data;
  const uint8_t* end = data + bytes;
  require(bytes >= sizeof kStateMagic && std::memcmp(p, kStateMagic, sizeof kStateMagic) == 0,
          "PowerSGD state: not a gradcomm PowerSGD state (bad magic)");
  p += sizeof kStateMagic;
  uint32_t version = take<uint32_t>(p, end, kStateName, "version");
  require(version == 1 || version == kStateVersion, "PowerSGD state: version ", version,
          ", this gradcomm reads 1 and ", kStateVersion);
  const auto part = version == 1 ? uint8_t{0} : take<uint8_t>(p, end, kStateName, "part");
  require(part <= 1, "PowerSGD state: part ", int{part}, " is neither 0 (all) nor 1 (shared)");
  const bool shared = part == static_cast<uint8_t>(StatePart::kShared);
  uint32_t rank = take<uint32_t>(p, end, kStateName, "rank");
  require(rank == static_cast<uint32_t>(options_.rank), "PowerSGD state: rank ", rank, ", this reducer uses ",
          options_.rank);
  uint64_t step = take<uint64_t>(p, end, kStateName, "step");
  uint64_t count = take<uint64_t>(p, end, kStateName, "count");
  require(count == slots_.size(), "PowerSGD state: ", count, " matrices, this reducer compresses ",
          slots_.size());
  uint8_t ef = take<uint8_t>(p, end, kStateName, "error_feedback");
  require((ef == 1) == options_.error_feedback, "PowerSGD state: error feedback ", ef ? "on" : "off",
          ", this reducer has it ", options_.error_feedback ? "on" : "off");
  // Parse everything before touching the state.
  std::vector<float> q(q_total_), e(e_total_);
  for (const Slot& s : slots_) {
    uint64_t grad = take<uint64_t>(p, end, kStateName, "grad"),
             rows = take<uint64_t>(p, end, kStateName, "rows"),
             cols = take<uint64_t>(p, end, kStateName, "cols");
    require(grad == s.grad && rows == s.rows && cols == s.cols, "PowerSGD state: matrix for gradient ", grad,
            " (", rows, " x ", cols, ") does not match this reducer's gradient ", s.grad, " (", s.rows, " x ",
            s.cols, ")");
    size_t qb = s.cols * options_.rank * sizeof(float),
           eb = ef && !shared ? s.rows * s.cols * sizeof(float) : 0;
    require(static_cast<size_t>(end - p) >= qb + eb, "PowerSGD state: truncated in gradient ", grad);
    std::memcpy(q.data() + s.q_off, p, qb);
    p += qb;
    if (eb > 0) std::memcpy(e.data() + s.e_off, p, eb);
    p += eb;
  }
  require(p == end, "PowerSGD state: ", end - p, " trailing bytes");
  memory::copy_bytes(q_, q.data(), q_total_ * sizeof(float), device_, side_.stream(), cudaMemcpyHostToDevice);
  if (!(shared && origin == StateOrigin::kEarlierWorld))
    memory::copy_bytes(e_, e.data(), e_total_ * sizeof(float), device_, side_.stream(),
                       cudaMemcpyHostToDevice);
  side_.synchronize();
  step_ = step;
}

}  // namespace gradcomm::reducer
