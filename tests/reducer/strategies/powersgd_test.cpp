// PowerSGD through the reducer: on several ranks the result equals the
// single-process math on the summed gradients; the warm-up steps are plain
// averages; the compression statistics follow the formula; an Inf/NaN step
// leaves Q and E as they were; the state survives a save/restore round trip;
// bad configurations are refused. Host ranks everywhere, one GPU where present.
#include "kernels/powersgd/low_rank.hpp"
#include "reducer/reducer_rig.hpp"

namespace gradcomm::test {
namespace {

using ReducerPowerSgd = ReducerRig;
namespace kp = kernels::powersgd;

struct Shape {
  size_t rows, cols;  // rows 0: a vector (not compressed)
};
const std::vector<Shape> kShapes = {{64, 48}, {0, 37}, {40, 100}, {33, 7}, {128, 16}};
constexpr int kRank = 4;

size_t count_of(const Shape& s) {
  return s.rows == 0 ? s.cols : s.rows * s.cols;
}
bool worth(const Shape& s) {
  return s.rows > 0 && (s.rows + s.cols) * kRank * 2.0 < static_cast<double>(s.rows) * s.cols;
}

std::vector<float> values(unsigned seed, size_t n) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = g(rng);
  return v;
}

// Everything a rank needs: gradients where the device wants them, and a reducer
// with PowerSGD on. With `views` the gradients are the reducer's
// (grad_as_bucket_view), looked up after PowerSGD moved them.
struct Rank {
  bool gpu;
  std::vector<GradMem> mem;
  gcommReducer_t r = nullptr;
  std::string init(gcommComm_t comm, bool on_gpu, const gcommPowerSgdConfig_t& pc, bool views = false) {
    gpu = on_gpu;
    std::vector<gcommTensor_t> tensors;
    std::vector<size_t> rows;
    for (const Shape& s : kShapes) {
      if (views) {
        tensors.push_back(gcommTensor_t{nullptr, count_of(s), gcommFloat32});
      } else {
        mem.emplace_back(gcommFloat32, count_of(s), gpu);
        tensors.push_back(mem.back().tensor());
      }
      rows.push_back(s.rows);
    }
    gcommReducerConfig_t rc = GCOMM_REDUCER_CONFIG_INITIALIZER;
    rc.bucket_cap_bytes = 16 << 10;
    rc.first_bucket_bytes = 4 << 10;
    rc.grad_as_bucket_view = views ? 1 : 0;
    RIG_CHECK(gcommReducerCreate(comm, tensors.data(), tensors.size(), &rc, &r));
    RIG_CHECK(gcommReducerEnableCompression(r, gcommCompressionPowerSgd, &pc, rows.data()));
    for (size_t i = 0; views && i < kShapes.size(); ++i) {
      void* p = nullptr;
      RIG_CHECK(gcommReducerGradData(r, i, &p));
      mem.push_back(GradMem::view(gcommFloat32, count_of(kShapes[i]), p, gpu));
    }
    return "";
  }
  void set(size_t i, const std::vector<float>& v, cudaStream_t stream) {
    TypedBuffer b{gcommFloat32, v.size(), 0, std::vector<unsigned char>((v.size() + 8) * 4)};
    for (size_t j = 0; j < v.size(); ++j) b.set(j, v[j]);
    mem[i].upload(b, stream);
  }
  std::vector<float> get(size_t i, cudaStream_t stream) const {
    TypedBuffer b = mem[i].download(stream);
    std::vector<float> v(b.count);
    for (size_t j = 0; j < v.size(); ++j) v[j] = b.get(j);
    return v;
  }
  std::string step(cudaStream_t stream, int* skip) {
    RIG_CHECK(gcommReducerBeginStep(r, 1));
    for (size_t i = kShapes.size(); i-- > 0;) RIG_CHECK(gcommReducerMarkReady(r, i, stream));
    RIG_CHECK(gcommReducerFinalize(r, stream, skip));
    return "";
  }
};

// The single-process math: one PowerSGD round on the summed matrix, / world.
std::vector<float> expected_round(const std::vector<float>& summed, const Shape& s, uint64_t seed,
                                  size_t slot, int world) {
  std::vector<float> m = summed, p(s.rows * kRank), q(s.cols * kRank);
  kp::initial_q(seed, slot, s.cols, kRank, q.data());
  kp::LowRankMatrix a{m.data(), nullptr, p.data(), q.data(), s.rows, s.cols};
  const kernels::Target host{gcommHostDevice(), nullptr};
  kp::multiply_mq(&a, 1, kRank, host);
  kp::orthogonalize(&a, 1, kRank, 1e-8f, host);
  kp::multiply_mtp(&a, 1, kRank, nullptr, host);
  kp::decompress(&a, 1, kRank, 1.0f / world, nullptr, host);
  return m;
}

double rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t k = 0; k < a.size(); ++k) num += (a[k] - b[k]) * (a[k] - b[k]), den += b[k] * b[k];
  return std::sqrt(num / (den + 1e-30));
}

TEST_P(ReducerPowerSgd, RanksGetTheSingleProcessMathOnTheSummedGradients) {
  const int world = 3;
  gcommPowerSgdConfig_t pc = GCOMM_POWERSGD_CONFIG_INITIALIZER;
  pc.rank = kRank;
  pc.start_iter = 2;  // two plain steps first
  auto comms = make_comms(world);
  bool on_gpu = gpu();
  run(comms, [&](int rank, gcommComm_t comm, cudaStream_t stream) -> std::string {
    for (bool views : {true}) {
      const std::string variant = views ? "views: " : "";
      Rank me;
      std::string e = me.init(comm, on_gpu, pc, views);
      if (!e.empty()) return variant + e;
      for (int step = 0; step < 3; ++step) {
        for (size_t i = 0; i < kShapes.size(); ++i)
          me.set(i, values(1000 * step + 10 * i + rank, count_of(kShapes[i])), stream);
        int skip = -1;
        if (!(e = me.step(stream, &skip)).empty()) return variant + e;
        if (skip != 0) return variant + "a finite step was flagged";
        size_t slot = 0;
        for (size_t i = 0; i < kShapes.size(); ++i) {
          std::vector<float> summed(count_of(kShapes[i]), 0.0f);
          for (int q = 0; q < world; ++q) {
            std::vector<float> v = values(1000 * step + 10 * i + q, summed.size());
            for (size_t j = 0; j < v.size(); ++j) summed[j] += v[j];
          }
          std::vector<float> got = me.get(i, stream), want;
          bool compressed_now = worth(kShapes[i]) && step >= 2;
          if (compressed_now) {
            want = expected_round(summed, kShapes[i], pc.seed, slot, world);
          } else {
            want = summed;
            for (float& x : want) x /= world;
          }
          if (worth(kShapes[i])) ++slot;
          double d = rel_diff(got, want);
          if (!(d < (compressed_now ? 2e-4 : 1e-6)))
            return variant + "step " + std::to_string(step) + " grad " + std::to_string(i) +
                   ": relative difference " + std::to_string(d);
        }
      }
      gcommPowerSgdStats_t st = GCOMM_POWERSGD_STATS_INITIALIZER;
      RIG_CHECK(gcommReducerGetCompressionStats(me.r, gcommCompressionPowerSgd, &st));
      size_t bytes = 0, full = 0, matrices = 0;
      for (const Shape& s : kShapes)
        if (worth(s)) bytes += (s.rows + s.cols) * kRank * 4, full += s.rows * s.cols * 4, ++matrices;
      if (st.compressed_matrices != matrices || st.uncompressed_tensors != kShapes.size() - matrices)
        return variant + "wrong matrix counts";
      if (st.bytes_last_step != bytes || st.uncompressed_bytes_equivalent != full)
        return variant + "wrong byte counts";
      if (st.compressed_steps != 1) return variant + "wrong compressed step count";
      RIG_CHECK(gcommReducerDestroy(me.r));
    }
    return "";
  });
}

std::vector<uint8_t> save(gcommReducer_t r) {
  size_t n = 0;
  EXPECT_EQ(gcommReducerSaveCompressionState(r, nullptr, 0, &n), gcommSuccess) << gcommGetLastError();
  std::vector<uint8_t> s(n);
  EXPECT_EQ(gcommReducerSaveCompressionState(r, s.data(), s.size(), nullptr), gcommSuccess)
      << gcommGetLastError();
  return s;
}

// Past the header's step counter: Q and E.
std::vector<uint8_t> body(const std::vector<uint8_t>& s) {
  return std::vector<uint8_t>(s.begin() + 24, s.end());
}

// With the gradients in the buckets (views: PowerSGD moves the matrices it carries
// out of them): an Inf step keeps Q and E and the state round-trips, corrupt and
// truncated states refused. Without views this is the strategy contract's
// (tests/reducer/unit/strategy_contract_test.cpp).
TEST_P(ReducerPowerSgd, WithViewsAnInfStepKeepsTheStateAndTheStateRoundTrips) {
  gcommPowerSgdConfig_t pc = GCOMM_POWERSGD_CONFIG_INITIALIZER;
  pc.rank = kRank;
  pc.start_iter = 0;
  auto comms = make_comms(2);
  bool on_gpu = gpu();
  run(comms, [&](int rank, gcommComm_t comm, cudaStream_t stream) -> std::string {
    for (bool views : {false, true}) {
      const std::string variant = views ? "views: " : "";
      Rank me, twin;
      std::string e = me.init(comm, on_gpu, pc, views);
      if (!e.empty()) return variant + e;
      auto fill = [&](Rank& x, int step) {
        for (size_t i = 0; i < kShapes.size(); ++i)
          x.set(i, values(77 * step + 10 * i + rank, count_of(kShapes[i])), stream);
      };
      int skip = -1;
      fill(me, 0);
      if (!(e = me.step(stream, &skip)).empty()) return e;
      std::vector<uint8_t> s1 = save(me.r);
      // Rank 1 puts `bad` at element `at` of gradient `grad` (seeded with `seed`):
      // every rank must skip the step, and Q and E must stay as they were.
      auto bad_step = [&](int step, size_t grad, unsigned seed, size_t at, float bad) -> std::string {
        fill(me, step);
        if (rank == 1) {
          std::vector<float> v = values(seed, count_of(kShapes[grad]));
          v[at] = bad;
          me.set(grad, v, stream);
        }
        std::string err = me.step(stream, &skip);
        if (!err.empty()) return err;
        if (skip != 1) return variant + "the step with " + std::to_string(bad) + " was not flagged";
        if (body(save(me.r)) != body(s1))
          return variant + "a step with " + std::to_string(bad) + " in gradient " + std::to_string(grad) +
                 " changed Q or E";
        return "";
      };
      // In a compressed matrix.
      if (!(e = bad_step(1, 0, 5, 3, std::numeric_limits<float>::infinity())).empty()) return e;
      // Issue 17 #4: in a gradient that is not compressed (a bias). Q and E used to
      // change: the compressed buckets committed before the NaN was seen.
      if (!(e = bad_step(3, 1, 6, 5, std::numeric_limits<float>::quiet_NaN())).empty()) return e;
      // A state restored into a second reducer behaves identically.
      if (!(e = twin.init(comm, on_gpu, pc, views)).empty()) return variant + e;
      std::vector<uint8_t> bad = s1;
      bad[0] ^= 1;
      if (gcommReducerLoadCompressionState(twin.r, bad.data(), bad.size()) != gcommInvalidArgument)
        return "a corrupt state was accepted";
      if (gcommReducerLoadCompressionState(twin.r, s1.data(), s1.size() - 1) != gcommInvalidArgument)
        return "a truncated state was accepted";
      RIG_CHECK(gcommReducerLoadCompressionState(me.r, s1.data(), s1.size()));
      RIG_CHECK(gcommReducerLoadCompressionState(twin.r, s1.data(), s1.size()));
      fill(me, 2);
      if (!(e = me.step(stream, &skip)).empty()) return e;
      fill(twin, 2);
      if (!(e = twin.step(stream, &skip)).empty()) return e;
      for (size_t i = 0; i < kShapes.size(); ++i)
        if (me.get(i, stream) != twin.get(i, stream))
          return variant + "restored reducers differ on gradient " + std::to_string(i);
      if (save(me.r) != save(twin.r)) return variant + "restored reducers' states differ";
      RIG_CHECK(gcommReducerDestroy(twin.r));
      RIG_CHECK(gcommReducerDestroy(me.r));
    }
    return "";
  });
}

// Without warm start every step draws a fresh Q (seed + step + 1); without error
// feedback nothing is carried over; an unused compressed gradient contributes zero.
TEST_P(ReducerPowerSgd, ColdStartNoErrorFeedbackAndUnusedGradients) {
  const int world = 2;
  gcommPowerSgdConfig_t pc = GCOMM_POWERSGD_CONFIG_INITIALIZER;
  pc.rank = kRank;
  pc.start_iter = 0;
  pc.warm_start = 0;
  pc.error_feedback = 0;
  auto comms = make_comms(world);
  bool on_gpu = gpu();
  run(comms, [&](int rank, gcommComm_t comm, cudaStream_t stream) -> std::string {
    std::vector<GradMem> mem;
    std::vector<gcommTensor_t> tensors;
    std::vector<size_t> rows;
    for (const Shape& s : kShapes) {
      mem.emplace_back(gcommFloat32, count_of(s), on_gpu);
      tensors.push_back(mem.back().tensor());
      rows.push_back(s.rows);
    }
    gcommReducerConfig_t rc = GCOMM_REDUCER_CONFIG_INITIALIZER;
    rc.unused_grads = gcommUnusedAsZero;
    gcommReducer_t r = nullptr;
    RIG_CHECK(gcommReducerCreate(comm, tensors.data(), tensors.size(), &rc, &r));
    RIG_CHECK(gcommReducerEnableCompression(r, gcommCompressionPowerSgd, &pc, rows.data()));
    for (int step = 0; step < 3; ++step) {
      // Step 1: rank 1 never marks gradient 0 (a compressed one).
      const bool drop = step == 1;
      for (size_t i = 0; i < kShapes.size(); ++i) {
        std::vector<float> v = values(500 * step + 10 * i + rank, count_of(kShapes[i]));
        TypedBuffer b{gcommFloat32, v.size(), 0, std::vector<unsigned char>((v.size() + 8) * 4)};
        for (size_t j = 0; j < v.size(); ++j) b.set(j, v[j]);
        mem[i].upload(b, stream);
      }
      RIG_CHECK(gcommReducerBeginStep(r, 1));
      for (size_t i = kShapes.size(); i-- > 0;)
        if (!(drop && rank == 1 && i == 0)) RIG_CHECK(gcommReducerMarkReady(r, i, stream));
      RIG_CHECK(gcommReducerFinalize(r, stream, nullptr));
      size_t slot = 0;
      for (size_t i = 0; i < kShapes.size(); ++i) {
        std::vector<float> summed(count_of(kShapes[i]), 0.0f);
        for (int q = 0; q < world; ++q) {
          if (drop && q == 1 && i == 0) continue;
          std::vector<float> v = values(500 * step + 10 * i + q, summed.size());
          for (size_t j = 0; j < v.size(); ++j) summed[j] += v[j];
        }
        TypedBuffer b = mem[i].download(stream);
        std::vector<float> got(b.count);
        for (size_t j = 0; j < got.size(); ++j) got[j] = b.get(j);
        std::vector<float> want;
        if (worth(kShapes[i])) {
          want = expected_round(summed, kShapes[i], pc.seed + step + 1, slot++, world);
        } else {
          want = summed;
          for (float& x : want) x /= world;
        }
        double d = rel_diff(got, want);
        if (!(d < 2e-4))
          return "step " + std::to_string(step) + " grad " + std::to_string(i) + ": relative difference " +
                 std::to_string(d);
      }
    }
    // No error feedback: the saved state has no E, and a state with E is refused.
    size_t n = 0;
    RIG_CHECK(gcommReducerSaveCompressionState(r, nullptr, 0, &n));
    size_t q_bytes = 0;
    for (const Shape& s : kShapes)
      if (worth(s)) q_bytes += 3 * 8 + s.cols * kRank * 4;
    if (n != 8 + 4 + 1 + 4 + 8 + 8 + 1 + q_bytes) return "unexpected state size " + std::to_string(n);
    // A version 1 state (a checkpoint from before the part byte) still loads.
    std::vector<uint8_t> v2(n);
    RIG_CHECK(gcommReducerSaveCompressionState(r, v2.data(), n, nullptr));
    std::vector<uint8_t> v1(v2.begin(), v2.end());
    v1.erase(v1.begin() + 12);  // the part, after the magic and the version
    const uint32_t one = 1;
    std::memcpy(v1.data() + 8, &one, 4);
    RIG_CHECK(gcommReducerLoadCompressionState(r, v1.data(), v1.size()));
    std::vector<uint8_t> again(n);
    RIG_CHECK(gcommReducerSaveCompressionState(r, again.data(), n, nullptr));
    if (again != v2) return "a version 1 state did not load as the version 2 one it was";
    RIG_CHECK(gcommReducerDestroy(r));
    return "";
  });
}

TEST_P(ReducerPowerSgd, BadConfigurationsAreRefused) {
  auto comms = make_comms(1);
  bool on_gpu = gpu();
  run(comms, [&](int, gcommComm_t comm, cudaStream_t) -> std::string {
    GradMem a(gcommFloat32, 600, on_gpu);
    gcommTensor_t t = a.tensor();
    gcommReducer_t r = nullptr;
    RIG_CHECK(gcommReducerCreate(comm, &t, 1, nullptr, &r));
    size_t rows = 7;  // does not divide 600
    if (gcommReducerEnableCompression(r, gcommCompressionPowerSgd, nullptr, &rows) != gcommInvalidArgument)
      return "rows 7 accepted";
    gcommPowerSgdConfig_t pc = GCOMM_POWERSGD_CONFIG_INITIALIZER;
    pc.rank = 33;
    rows = 20;
    if (gcommReducerEnableCompression(r, gcommCompressionPowerSgd, &pc, &rows) != gcommInvalidArgument)
      return "rank 33 accepted";
    if (gcommReducerEnableCompression(r, gcommCompressionPowerSgd, nullptr, nullptr) != gcommInvalidArgument)
      return "NULL rows accepted";
    gcommPowerSgdStats_t st = GCOMM_POWERSGD_STATS_INITIALIZER;
    if (gcommReducerGetCompressionStats(r, gcommCompressionPowerSgd, &st) != gcommInvalidState)
      return "stats without PowerSGD";
    RIG_CHECK(gcommReducerEnableCompression(r, gcommCompressionPowerSgd, nullptr, &rows));
    if (gcommReducerEnableCompression(r, gcommCompressionPowerSgd, nullptr, &rows) != gcommInvalidState)
      return "enabled twice";
    RIG_CHECK(gcommReducerDestroy(r));
    return "";
  });
}

// With grad_as_bucket_view, enabling PowerSGD moves the compressed gradients out
// of the buckets (and re-plans the others): addresses change, contents do not.
TEST_P(ReducerPowerSgd, ViewsKeepTheirContentsWhenPowerSgdMovesThem) {
  auto comms = make_comms(1);
  bool on_gpu = gpu();
  run(comms, [&](int, gcommComm_t comm, cudaStream_t stream) -> std::string {
    std::vector<gcommTensor_t> tensors;
    std::vector<size_t> rows;
    for (const Shape& s : kShapes) {
      tensors.push_back(gcommTensor_t{nullptr, count_of(s), gcommFloat32});
      rows.push_back(s.rows);
    }
    gcommReducerConfig_t rc = GCOMM_REDUCER_CONFIG_INITIALIZER;
    rc.grad_as_bucket_view = 1;
    gcommReducer_t r = nullptr;
    RIG_CHECK(gcommReducerCreate(comm, tensors.data(), tensors.size(), &rc, &r));
    std::vector<void*> before(kShapes.size());
    for (size_t i = 0; i < kShapes.size(); ++i) {
      RIG_CHECK(gcommReducerGradData(r, i, &before[i]));
      GradMem m = GradMem::view(gcommFloat32, count_of(kShapes[i]), before[i], on_gpu);
      std::vector<float> v = values(900 + i, m.count);
      TypedBuffer b{gcommFloat32, v.size(), 0, std::vector<unsigned char>((v.size() + 8) * 4)};
      for (size_t j = 0; j < v.size(); ++j) b.set(j, v[j]);
      m.upload(b, stream);
    }
    if (on_gpu && cudaStreamSynchronize(stream) != cudaSuccess) return "sync failed";
    RIG_CHECK(gcommReducerEnableCompression(r, gcommCompressionPowerSgd, nullptr, rows.data()));
    std::vector<std::pair<uintptr_t, uintptr_t>> ranges;
    for (size_t i = 0; i < kShapes.size(); ++i) {
      void* p = nullptr;
      RIG_CHECK(gcommReducerGradData(r, i, &p));
      if (worth(kShapes[i]) && p == before[i])
        return "compressed gradient " + std::to_string(i) + " did not move";
      if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
        return "gradient " + std::to_string(i) + " is not 16-byte aligned";
      ranges.emplace_back(reinterpret_cast<uintptr_t>(p),
                          reinterpret_cast<uintptr_t>(p) + count_of(kShapes[i]) * 4);
      TypedBuffer b = GradMem::view(gcommFloat32, count_of(kShapes[i]), p, on_gpu).download(stream);
      std::vector<float> want = values(900 + i, b.count);
      for (size_t j = 0; j < b.count; ++j)
        if (b.get(j) != want[j])
          return "gradient " + std::to_string(i) + " lost its contents at " + std::to_string(j);
    }
    std::sort(ranges.begin(), ranges.end());
    for (size_t k = 1; k < ranges.size(); ++k)
      if (ranges[k].first < ranges[k - 1].second) return "two gradients overlap after the move";
    RIG_CHECK(gcommReducerDestroy(r));
    return "";
  });
}

INSTANTIATE_TEST_SUITE_P(, ReducerPowerSgd, ::testing::Values(RigDevice::kHost, RigDevice::kGpu), rig_name);

}  // namespace
}  // namespace gradcomm::test
