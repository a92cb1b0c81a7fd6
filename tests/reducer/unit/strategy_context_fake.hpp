// A strategy's world without a Reducer: a host rank's communicator (the local
// transport, ranks as threads), a side stream with no lane, a bucket plan of the
// caller's gradients in host memory, the bucket buffer, the flags, and the
// StrategyContext over them, so that a CompressionStrategy is driven call by call
// (set_layout, begin_step, run_bucket, end_step) and its effects are read directly.
#pragma once

#include <memory>
#include <thread>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/local/local_transport.hpp"
#include "memory/caching_allocator.hpp"
#include "memory/events/event_source.hpp"
#include "memory/upstream/upstream.hpp"
#include "reducer/bucket_plan.hpp"
#include "reducer/compressions.hpp"
#include "reducer/side_stream.hpp"
#include "reducer/step_timeline.hpp"
#include "reducer/strategy.hpp"

namespace gradcomm::reducer::test {

// One rank's fake context: its gradients (f32, registration order, host memory),
// one bucket per `bucket_elements`-element cap in reverse order as the reducer plans.
class FakeRank {
 public:
  FakeRank(comm::Communicator& comm, const std::vector<size_t>& counts, size_t bucket_cap_bytes)
      : comm_(comm),
        side_(gcommHostDevice(), nullptr),
        timeline_(gcommHostDevice(), false),
        allocator_(memory::make_host_upstream(), std::make_unique<memory::ImmediateEvents>()) {
    std::vector<GradSpec> specs;
    for (size_t n : counts) {
      data_.emplace_back(n, 0.0f);
      grads_.push_back(gcommTensor_t{n > 0 ? data_.back().data() : nullptr, n, gcommFloat32});
      specs.push_back(GradSpec{n, gcommFloat32});
    }
    PlanOptions po;
    po.bucket_cap_bytes = po.first_bucket_bytes = bucket_cap_bytes;
    plan_ = plan_buckets(specs, po);
    size_t total = 0;
    std::vector<size_t> bytes;
    for (const Bucket& b : plan_.buckets) bytes.push_back(b.wire_bytes());
    const std::vector<size_t> offsets = aligned_layout(bytes, &total, "the buckets");
    buckets_.assign(total / sizeof(float) + 1, 0.0f);
    for (size_t off : offsets) bucket_data_.push_back(reinterpret_cast<char*>(buckets_.data()) + off);
    marked_.assign(counts.size(), 1);
  }

  // The set-up every strategy factory sees.
  StrategySetup setup(const size_t* grad_rows = nullptr) {
    return StrategySetup{grads_, grad_rows,        false, false, comm_.size(), comm_.rank(), allocator_,
                         side_,  gcommHostDevice()};
  }

  StrategyContext context(const CompressionStrategy& outermost) {
    return StrategyContext{comm_,
                           side_,
                           gcommHostDevice(),
                           plan_,
                           grads_,
                           marked_,
                           bucket_data_.data(),
                           true /*average*/,
                           false /*views*/,
                           nullptr /*sharding*/,
                           false /*epilogue_at_finalize*/,
                           inv_scale_,
                           &flags_[2],
                           nullptr /*own_nonfinite*/,
                           &flags_[1],
                           outermost,
                           timeline_};
  }

  // One synced step of `s` over every bucket, all gradients marked.
  void step(CompressionStrategy& s) {
    flags_[2] = 0.0f;
    const StrategyContext ctx = context(s);
    s.begin_step(ctx);
    for (size_t b = 0; b < plan_.buckets.size(); ++b) s.run_bucket(b, true, ctx);
    s.end_step(ctx);
  }

  std::vector<std::vector<float>>& data() { return data_; }
  const BucketPlan& plan() const { return plan_; }
  float step_flag() const { return flags_[2]; }
  void set_inv_scale(const float* inv_scale) { inv_scale_ = inv_scale; }
  std::vector<uint8_t>& marked() { return marked_; }

 private:
  comm::Communicator& comm_;
  SideStream side_;
  StepTimeline timeline_;
  memory::CachingAllocator allocator_;
  std::vector<std::vector<float>> data_;
  std::vector<gcommTensor_t> grads_;
  BucketPlan plan_;
  std::vector<float> buckets_;
  std::vector<void*> bucket_data_;
  std::vector<uint8_t> marked_;
  float flags_[3] = {0.0f, 1.0f, 0.0f};  // [1]: the constant 1, [2]: the step's found-inf
  const float* inv_scale_ = nullptr;
};

// n local ranks as communicators, and body(rank, comm) on a thread each.
template <class Body>
void on_local_ranks(int n, Body body) {
  std::vector<std::unique_ptr<comm::Communicator>> comms;
  for (auto& t : comm::make_local_transports(n, gcommHostDevice(), 30.0))
    comms.push_back(std::make_unique<comm::Communicator>(std::move(t), 30.0));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { body(r, *comms[r]); });
  for (auto& t : threads) t.join();
}

}  // namespace gradcomm::reducer::test
