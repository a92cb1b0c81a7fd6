#include "training_trace.hpp"

#include <algorithm>
#include <random>

namespace gradcomm {
namespace bench {

namespace {
class Builder {
 public:
  explicit Builder(std::vector<TraceOp>& ops) : ops_(ops) {}
  uint32_t alloc(size_t bytes, int stream) {
    uint32_t id = next_++;
    ops_.push_back(TraceOp{true, id, std::max<size_t>(bytes, 1), stream});
    return id;
  }
  void free(uint32_t id, int stream) { ops_.push_back(TraceOp{false, id, 0, stream}); }

 private:
  std::vector<TraceOp>& ops_;
  uint32_t next_ = 0;
};
}  // namespace

std::vector<TraceOp> make_training_trace(const TraceParams& p) {
  std::vector<TraceOp> ops;
  Builder b(ops);
  std::mt19937_64 rng(p.seed);
  std::vector<uint32_t> persistent;
  for (int i = 0; i < p.buckets; ++i) {
    persistent.push_back(b.alloc(p.bucket_bytes, 1));
    persistent.push_back(b.alloc(p.bucket_bytes / 2, 1));
  }
  std::uniform_real_distribution<double> seq(1.0 - p.jitter, 1.0);
  std::uniform_int_distribution<size_t> workspace(size_t{1} << 20, size_t{16} << 20);
  for (int step = 0; step < p.steps; ++step) {
    const double f = seq(rng);
    const auto h = static_cast<size_t>(f * static_cast<double>(p.hidden_bytes));
    std::vector<uint32_t> ws;
    for (int i = 0; i < p.workspaces; ++i) ws.push_back(b.alloc(workspace(rng), 0));
    std::vector<uint32_t> acts;
    for (int l = 0; l < p.layers; ++l) {
      acts.push_back(b.alloc(h, 0));
      acts.push_back(b.alloc(4 * h, 0));
      acts.push_back(b.alloc(h / 8, 0));
    }
    for (int l = p.layers - 1; l >= 0; --l) {
      uint32_t tmp = b.alloc(4 * h, 0);
      b.free(tmp, 0);
      for (int k = 2; k >= 0; --k) b.free(acts[static_cast<size_t>(3 * l + k)], 0);
      uint32_t flag = b.alloc(4096, 1);
      b.free(flag, 1);
    }
    for (uint32_t id : ws) b.free(id, 0);
  }
  for (uint32_t id : persistent) b.free(id, 1);
  return ops;
}

uint32_t trace_ids(const std::vector<TraceOp>& trace) {
  uint32_t n = 0;
  for (const TraceOp& op : trace) n = std::max(n, op.id + 1);
  return n;
}

}  // namespace bench
}  // namespace gradcomm
