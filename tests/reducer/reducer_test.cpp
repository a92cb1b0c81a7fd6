// The reducer against the plain reference (sum of the ranks' gradients / world
// size): random sizes, dtypes and ready orders, 1 to 8 ranks, the rebuild, f16 /
// bf16 wire, gradient accumulation, bucket views and the grad scaler. Host ranks
// everywhere; the same cases on GPU 0 where one is present.
#include "reducer/reducer_rig.hpp"

namespace gradcomm::test {
namespace {

struct Case {
  int world = 2;
  std::vector<std::pair<size_t, gcommDataType_t>> grads;
  gcommReducerConfig_t config = GCOMM_REDUCER_CONFIG_INITIALIZER;
  int steps = 3;
  unsigned seed = 1;
};

std::vector<std::pair<size_t, gcommDataType_t>> random_grads(std::mt19937& rng, size_t n, bool mixed_dtypes) {
  const gcommDataType_t dtypes[] = {gcommFloat32, gcommFloat16, gcommBfloat16};
  std::vector<std::pair<size_t, gcommDataType_t>> g;
  std::uniform_int_distribution<size_t> size(0, 3000);
  for (size_t i = 0; i < n; ++i)
    g.emplace_back(i % 7 == 3 ? 0 : size(rng), mixed_dtypes ? dtypes[rng() % 3] : gcommFloat32);
  return g;
}

// Runs c.steps synced steps; every rank checks every gradient against the reference.
void run_case(ReducerRig& rig, const Case& c, const std::function<void(int, gcommReducer_t)>& after = {}) {
  const size_t n = c.grads.size();
  const bool view = c.config.grad_as_bucket_view == 1;
  // values[step][rank][grad]: every rank knows all ranks' inputs, for the reference.
  std::vector<std::vector<std::vector<TypedBuffer>>> values(c.steps);
  std::mt19937 rng(c.seed);
  for (auto& step : values) {
    step.resize(c.world);
    for (auto& rank : step)
      for (const auto& [count, dtype] : c.grads) rank.push_back(random_buffer(rng, dtype, count));
  }
  double factor = c.config.average ? 1.0 / c.world : 1.0;
  gcommDataType_t wire_hint = c.config.wire_dtype == GCOMM_WIRE_SAME_AS_GRAD
                                  ? gcommFloat32
                                  : static_cast<gcommDataType_t>(c.config.wire_dtype);
  auto comms = rig.make_comms(c.world);
  bool gpu = rig.GetParam() == RigDevice::kGpu;
  rig.run(comms, [&](int rank, gcommComm_t comm, cudaStream_t stream) -> std::string {
    std::vector<GradMem> mem;
    std::vector<gcommTensor_t> tensors;
    for (const auto& [count, dtype] : c.grads) {
      if (!view) mem.emplace_back(dtype, count, gpu);
      tensors.push_back(gcommTensor_t{view ? nullptr : mem.back().data, count, dtype});
    }
    gcommReducer_t r = nullptr;
    RIG_CHECK(gcommReducerCreate(comm, tensors.data(), n, &c.config, &r));
    if (view)
      for (size_t i = 0; i < n; ++i) {
        void* p = nullptr;
        RIG_CHECK(gcommReducerGradData(r, i, &p));
        mem.push_back(GradMem::view(c.grads[i].second, c.grads[i].first, p, gpu));
      }
    std::mt19937 order_rng(c.seed * 31 + rank);
    for (int step = 0; step < c.steps; ++step) {
      std::vector<size_t> order(n);
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), order_rng);  // each rank its own order
      RIG_CHECK(gcommReducerBeginStep(r, 1));
      for (size_t i : order) {
        mem[i].upload(values[step][rank][i], stream);
        RIG_CHECK(gcommReducerMarkReady(r, i, stream));
      }
      int skip = -1;
      RIG_CHECK(gcommReducerFinalize(r, stream, &skip));
      if (skip != 0) return "step " + std::to_string(step) + " reported Inf/NaN";
      for (size_t i = 0; i < n; ++i) {
        std::vector<const TypedBuffer*> inputs;
        for (int q = 0; q < c.world; ++q) inputs.push_back(&values[step][q][i]);
        TypedBuffer got = mem[i].download(stream);
        std::string what =
            "rank " + std::to_string(rank) + " step " + std::to_string(step) + " grad " + std::to_string(i);
        expect_reduced(got, inputs, factor, wire_hint, what);
        if (::testing::Test::HasFailure()) return what + " differs from the reference";
      }
    }
    if (after) after(rank, r);
    RIG_CHECK(gcommReducerDestroy(r));
    return "";
  });
}

TEST_P(ReducerRig, MatchesTheReferenceForRandomSizesOrdersAndDtypes) {
  std::mt19937 rng(7);
  for (int world : {1, 2, 3}) {
    Case c;
    c.world = world;
    c.grads = random_grads(rng, 40, true);
    c.config.bucket_cap_bytes = 8 << 10;  // many buckets
    c.config.first_bucket_bytes = 1 << 10;
    c.seed = 100 + world;
    run_case(*this, c);
  }
}

TEST_P(ReducerRig, EightRanks) {
  std::mt19937 rng(8);
  Case c;
  c.world = 8;
  c.grads = random_grads(rng, 12, true);
  c.config.bucket_cap_bytes = 4 << 10;
  c.steps = 2;
  run_case(*this, c);
}

TEST_P(ReducerRig, PlanIsRebuiltOnceInRankZerosReadyOrderAndStaysCorrect) {
  std::mt19937 rng(9);
  Case c;
  c.world = 3;
  c.grads = random_grads(rng, 30, false);
  c.config.bucket_cap_bytes = 6 << 10;
  c.steps = 4;
  run_case(*this, c, [](int, gcommReducer_t r) {
    gcommReducerStats_t s{};
    ASSERT_EQ(gcommReducerGetStats(r, &s), gcommSuccess);
    EXPECT_EQ(s.rebuilt, 1);
    EXPECT_EQ(s.synced_steps, 4u);
    size_t needed = 0;
    ASSERT_EQ(gcommReducerDescribe(r, nullptr, 0, &needed), gcommSuccess);
    std::string text(needed, '\0');
    ASSERT_EQ(gcommReducerDescribe(r, text.data(), text.size(), nullptr), gcommSuccess);
    EXPECT_NE(text.find("rebuilt in ready order"), std::string::npos) << text;
  });
}

TEST_P(ReducerRig, WithoutRebuildAndWithoutAveraging) {
  std::mt19937 rng(10);
  Case c;
  c.world = 2;
  c.grads = random_grads(rng, 20, true);
  c.config.rebuild_buckets = 0;
  c.config.average = 0;
  run_case(*this, c, [](int, gcommReducer_t r) {
    gcommReducerStats_t s{};
    ASSERT_EQ(gcommReducerGetStats(r, &s), gcommSuccess);
    EXPECT_EQ(s.rebuilt, 0);
  });
}

TEST_P(ReducerRig, HalfAndBfloatWireStayWithinTheirRounding) {
  std::mt19937 rng(11);
  for (int wire : {static_cast<int>(gcommFloat16), static_cast<int>(gcommBfloat16)}) {
    Case c;
    c.world = 4;
    c.grads = random_grads(rng, 25, false);
    c.config.wire_dtype = wire;
    c.seed = 200 + wire;
    run_case(*this, c, [&](int, gcommReducer_t r) {
      gcommReducerStats_t s{};
      ASSERT_EQ(gcommReducerGetStats(r, &s), gcommSuccess);
      EXPECT_LE(s.wire_bytes_per_step,
                s.grad_bytes / 2 + s.num_buckets * 16 * 25);  // half the bytes, plus padding
    });
  }
}

TEST_P(ReducerRig, GradientsAsBucketViews) {
  std::mt19937 rng(12);
  Case c;
  c.world = 3;
  c.grads = random_grads(rng, 30, true);
  c.config.grad_as_bucket_view = 1;
  c.config.bucket_cap_bytes = 8 << 10;
  run_case(*this, c, [](int, gcommReducer_t r) {
    int x = 0;
    EXPECT_EQ(gcommReducerSetGradData(r, 0, &x), gcommInvalidState);
    EXPECT_NE(std::string(gcommGetLastError()).find("grad_as_bucket_view"), std::string::npos);
  });
}

// No-sync steps launch nothing; the synced step reduces what the ranks accumulated.
TEST_P(ReducerRig, AccumulationStepsSendNothingAndTheSyncedStepReducesTheSum) {
  const int world = 3, k = 3;
  const std::vector<std::pair<size_t, gcommDataType_t>> grads = {
      {1000, gcommFloat32}, {17, gcommFloat32}, {4096, gcommFloat32}};
  std::mt19937 rng(13);
  // parts[rank][micro-step][grad]; the rank's gradient is the running sum.
  std::vector<std::vector<std::vector<TypedBuffer>>> parts(world, std::vector<std::vector<TypedBuffer>>(k));
  for (auto& rank : parts)
    for (auto& micro : rank)
      for (const auto& [count, dtype] : grads) micro.push_back(random_buffer(rng, dtype, count));
  auto comms = make_comms(world);
  bool on_gpu = gpu();
  run(comms, [&](int rank, gcommComm_t comm, cudaStream_t stream) -> std::string {
    std::vector<GradMem> mem;
    std::vector<gcommTensor_t> tensors;
    for (const auto& [count, dtype] : grads) {
      mem.emplace_back(dtype, count, on_gpu);
      tensors.push_back(mem.back().tensor());
    }
    gcommReducer_t r = nullptr;
    RIG_CHECK(gcommReducerCreate(comm, tensors.data(), tensors.size(), nullptr, &r));
    std::vector<TypedBuffer> acc = parts[rank][0];
    for (int m = 0; m < k; ++m) {
      if (m > 0)
        for (size_t i = 0; i < grads.size(); ++i)
          for (size_t j = 0; j < acc[i].count; ++j) acc[i].set(j, acc[i].get(j) + parts[rank][m][i].get(j));
      RIG_CHECK(gcommReducerBeginStep(r, m == k - 1 ? 1 : 0));
      for (size_t i = grads.size(); i-- > 0;) {
        mem[i].upload(acc[i], stream);  // backward accumulates into the gradient
        RIG_CHECK(gcommReducerMarkReady(r, i, stream));
      }
      RIG_CHECK(gcommReducerFinalize(r, stream, nullptr));
      gcommReducerStats_t s{};
      RIG_CHECK(gcommReducerGetStats(r, &s));
      if (m < k - 1 && s.buckets_launched != 0) return "an accumulation step launched a collective";
    }
    gcommReducerStats_t s{};
    RIG_CHECK(gcommReducerGetStats(r, &s));
    if (s.accumulation_steps != k - 1 || s.synced_steps != 1) return "wrong step counters";
    for (size_t i = 0; i < grads.size(); ++i) {
      // The reference: sum over ranks of each rank's accumulated sum, / world.
      std::vector<TypedBuffer> sums;
      for (int q = 0; q < world; ++q) {
        TypedBuffer s_q = parts[q][0][i];
        for (int m = 1; m < k; ++m)
          for (size_t j = 0; j < s_q.count; ++j) s_q.set(j, s_q.get(j) + parts[q][m][i].get(j));
        sums.push_back(s_q);
      }
      std::vector<const TypedBuffer*> inputs;
      for (auto& s_q : sums) inputs.push_back(&s_q);
      expect_reduced(mem[i].download(stream), inputs, 1.0 / world, gcommFloat32, "accumulated grad");
      if (::testing::Test::HasFailure()) return "accumulated gradient differs";
    }
    RIG_CHECK(gcommReducerDestroy(r));
    return "";
  });
}

// With a scaler the epilogue divides by the loss scale too, and an overflow on
// one rank makes every rank skip the step and back the scale off.
TEST_P(ReducerRig, ScalerUnscalesAndAnOverflowOnOneRankSkipsTheStepEverywhere) {
  const int world = 2;
  auto comms = make_comms(world);
  bool on_gpu = gpu();
  gcommDevice_t dev = device();
  run(comms, [&](int rank, gcommComm_t comm, cudaStream_t stream) -> std::string {
    gcommGradScalerConfig_t sc = GCOMM_GRAD_SCALER_CONFIG_INITIALIZER;
    sc.init_scale = 1024.0f;
    gcommGradScaler_t scaler = nullptr;
    RIG_CHECK(gcommGradScalerCreate(dev, &sc, &scaler));
    GradMem g(gcommFloat32, 3001, on_gpu);
    gcommTensor_t t = g.tensor();
    gcommReducerConfig_t cfg = GCOMM_REDUCER_CONFIG_INITIALIZER;
    cfg.scaler = scaler;
    cfg.wire_dtype = gcommFloat16;
    gcommReducer_t r = nullptr;
    RIG_CHECK(gcommReducerCreate(comm, &t, 1, &cfg, &r));
    if (gcommGradScalerDestroy(scaler) != gcommInvalidState) return "a scaler in use was destroyed";
    std::mt19937 rng(50 + rank);
    // Step 1: loss-scaled gradients (x1024); the result is the plain average.
    TypedBuffer v = random_buffer(rng, gcommFloat32, 3001);
    TypedBuffer scaled = v;
    for (size_t j = 0; j < v.count; ++j) scaled.set(j, v.get(j) * 1024.0f);
    g.upload(scaled, stream);
    RIG_CHECK(gcommReducerBeginStep(r, 1));
    RIG_CHECK(gcommReducerMarkReady(r, 0, stream));
    int skip = -1;
    RIG_CHECK(gcommReducerFinalize(r, stream, &skip));
    if (skip != 0) return "a clean step was skipped";
    TypedBuffer got = g.download(stream);
    // Every rank used a different seed: compare with own value bounds only.
    for (size_t j = 0; j < got.count; ++j)
      if (!(std::fabs(got.get(j)) <= 4.0f)) return "unscaled value out of range at " + std::to_string(j);
    // Step 2: rank 1 overflows the f16 wire (1e9 * 1024 / 2 > 65504).
    if (rank == 1) scaled.set(5, 1e9f);
    g.upload(scaled, stream);
    RIG_CHECK(gcommReducerBeginStep(r, 1));
    RIG_CHECK(gcommReducerMarkReady(r, 0, stream));
    RIG_CHECK(gcommReducerFinalize(r, stream, &skip));
    if (skip != 1) return "rank " + std::to_string(rank) + " did not see the overflow";
    float scale = 0;
    RIG_CHECK(gcommGradScalerGetScale(scaler, stream, &scale));
    if (scale != 512.0f) return "scale after an overflow is " + std::to_string(scale) + ", not 512";
    const float* flag = nullptr;
    RIG_CHECK(gcommReducerFoundInf(r, &flag));
    if (flag == nullptr) return "no device flag";
    // Step 3: clean again. The flag is this step's alone, and the new scale (512) is
    // what the epilogue divides by.
    for (size_t j = 0; j < v.count; ++j) scaled.set(j, v.get(j) * 512.0f);
    g.upload(scaled, stream);
    RIG_CHECK(gcommReducerBeginStep(r, 1));
    RIG_CHECK(gcommReducerMarkReady(r, 0, stream));
    RIG_CHECK(gcommReducerFinalize(r, stream, &skip));
    if (skip != 0) return "rank " + std::to_string(rank) + ": the flag of the overflow step was still set";
    got = g.download(stream);
    std::mt19937 other_rng(50 + (1 - rank));
    TypedBuffer other = random_buffer(other_rng, gcommFloat32, 3001);
    for (size_t j = 0; j < got.count; ++j) {
      const float want = (v.get(j) + other.get(j)) / 2.0f;  // within the f16 wire's rounding
      if (!(std::fabs(got.get(j) - want) <= 2e-3f * std::fabs(want) + 1e-3f))
        return "step 3 at " + std::to_string(j) + ": " + std::to_string(got.get(j)) + ", want " +
               std::to_string(want) + " (not unscaled by the backed-off scale?)";
    }
    RIG_CHECK(gcommReducerDestroy(r));
    RIG_CHECK(gcommGradScalerDestroy(scaler));
    return "";
  });
}

// ---- Buckets sized for the link (reducer/bucket_autotune.hpp) ----

gcommBucketAutotuneReport_t autotune_report(gcommReducer_t r) {
  gcommBucketAutotuneReport_t out = GCOMM_BUCKET_AUTOTUNE_REPORT_INITIALIZER;
  EXPECT_EQ(gcommReducerGetBucketAutotune(r, &out), gcommSuccess) << gcommGetLastError();
  return out;
}

std::vector<std::pair<size_t, gcommDataType_t>> autotuned_grads() {
  return std::vector<std::pair<size_t, gcommDataType_t>>(24, {40000, gcommFloat32});  // 3.84 MB
}

TEST_P(ReducerRig, TheBucketAutotuneChoosesOneCapOnEveryRankAndStaysCorrect) {
  Case c;
  c.world = 3;
  c.grads = autotuned_grads();
  c.steps = 6;
  c.config.bucket_autotune = gcommBucketAutotuneOn;
  if (gpu()) {  // a mark on a GPU is when the gradient's kernel was enqueued: nothing to measure
    auto comms = make_comms(1);
    GradMem g(gcommFloat32, 16, true);
    gcommTensor_t t = g.tensor();
    gcommReducer_t r = nullptr;
    EXPECT_EQ(gcommReducerCreate(comms[0], &t, 1, &c.config, &r), gcommInvalidArgument);
    EXPECT_NE(std::string(gcommGetLastError()).find("set bucket_cap_bytes instead"), std::string::npos)
        << gcommGetLastError();
    destroy(comms);
    return;
  }
  std::vector<gcommBucketAutotuneReport_t> reports(c.world);
  std::vector<size_t> buckets(c.world);
  run_case(*this, c, [&](int rank, gcommReducer_t r) {
    reports[rank] = autotune_report(r);
    gcommReducerStats_t s{};
    ASSERT_EQ(gcommReducerGetStats(r, &s), gcommSuccess);
    buckets[rank] = s.num_buckets;
  });
  for (int rank = 0; rank < c.world; ++rank) {
    const gcommBucketAutotuneReport_t& got = reports[rank];
    EXPECT_EQ(got.state, gcommBucketAutotuneStateChosen) << "rank " << rank;
    EXPECT_EQ(got.chosen_at_step, 4u);
    EXPECT_EQ(got.configured_cap_bytes, size_t{25} << 20);
    EXPECT_EQ(got.bucket_cap_bytes, reports[0].bucket_cap_bytes) << "rank " << rank << " chose another cap";
    EXPECT_EQ(got.first_bucket_bytes, std::min<size_t>(size_t{1} << 20, got.bucket_cap_bytes));
    EXPECT_EQ(buckets[rank], buckets[0]) << "rank " << rank << " has another plan";
    EXPECT_GT(got.link_bytes_per_s, 0);
    EXPECT_GE(got.backward_us, 0);
    EXPECT_GT(got.predicted_us, 0);
    EXPECT_LE(got.predicted_us, got.predicted_configured_us * 1.0001f) << "the choice predicts no worse";
  }
}

// Runs `steps` synced steps of `world` host ranks over autotuned_grads(), after
// `setup` (a call on the new reducer; none if empty), every gradient marked except
// those skip(rank, i) names, then hands each rank's reducer to `check`.
void run_autotuned(ReducerRig& rig, const gcommReducerConfig_t& config, int steps,
                   const std::function<bool(int, size_t)>& skip,
                   const std::function<void(int, gcommReducer_t)>& check, int world = 2,
                   const std::function<gcommStatus_t(gcommReducer_t)>& setup = {},
                   const std::function<void(int, gcommReducerConfig_t&)>& per_rank = {}) {
  auto comms = rig.make_comms(world);
  rig.run(comms, [&](int rank, gcommComm_t comm, cudaStream_t) -> std::string {
    std::vector<GradMem> mem;
    std::vector<gcommTensor_t> tensors;
    for (const auto& [count, dtype] : autotuned_grads()) {
      mem.emplace_back(dtype, count, false);
      tensors.push_back(mem.back().tensor());
    }
    gcommReducerConfig_t own = config;
    if (per_rank) per_rank(rank, own);
    gcommReducer_t r = nullptr;
    RIG_CHECK(gcommReducerCreate(comm, tensors.data(), tensors.size(), &own, &r));
    if (setup) RIG_CHECK(setup(r));
    for (int step = 0; step < steps; ++step) {
      RIG_CHECK(gcommReducerBeginStep(r, 1));
      for (size_t i = tensors.size(); i-- > 0;)
        if (!skip(rank, i)) RIG_CHECK(gcommReducerMarkReady(r, i, nullptr));
      RIG_CHECK(gcommReducerFinalize(r, nullptr, nullptr));
    }
    check(rank, r);
    RIG_CHECK(gcommReducerDestroy(r));
    return "";
  });
}

TEST_P(ReducerRig, TheBucketAutotuneIsOnByDefaultOnlyOnHostLinksWithTheDefaultCaps) {
  if (gpu()) GTEST_SKIP() << "the host's defaults (a GPU's: off, TheBucketAutotuneChooses...'s refusal)";
  const auto none = [](int, size_t) { return false; };
  gcommReducerConfig_t c = GCOMM_REDUCER_CONFIG_INITIALIZER;
  run_autotuned(*this, c, 0, none, [](int, gcommReducer_t r) {
    EXPECT_EQ(autotune_report(r).state, gcommBucketAutotuneStateMeasuring);
  });
  c.bucket_cap_bytes = size_t{4} << 20;  // the caller chose: kept
  run_autotuned(*this, c, 5, none, [](int, gcommReducer_t r) {
    const gcommBucketAutotuneReport_t got = autotune_report(r);
    EXPECT_EQ(got.state, gcommBucketAutotuneStateOff);
    EXPECT_EQ(got.bucket_cap_bytes, size_t{4} << 20);
  });
  c = GCOMM_REDUCER_CONFIG_INITIALIZER;
  c.bucket_autotune = gcommBucketAutotuneOff;
  run_autotuned(*this, c, 5, none, [](int, gcommReducer_t r) {
    EXPECT_EQ(autotune_report(r).state, gcommBucketAutotuneStateOff);
  });
  c.bucket_autotune = gcommBucketAutotuneAuto;
  run_autotuned(
      *this, c, 0, none,
      [](int, gcommReducer_t r) { EXPECT_EQ(autotune_report(r).state, gcommBucketAutotuneStateSkipped); },
      /*world=*/1);
}

TEST_P(ReducerRig, TheBucketAutotuneSkipsWhenARankNeverMarksEveryGradientOrACompressionTakesTheBuckets) {
  if (gpu()) GTEST_SKIP() << "host-only: the autotune is refused on a GPU";
  gcommReducerConfig_t c = GCOMM_REDUCER_CONFIG_INITIALIZER;
  c.bucket_autotune = gcommBucketAutotuneOn;
  c.unused_grads = gcommUnusedAsZero;
  // Rank 1 never marks gradient 5: its arrivals are incomplete, so every rank skips
  // at the same step (a rank choosing alone would leave the others' plan behind).
  run_autotuned(
      *this, c, 5, [](int rank, size_t i) { return rank == 1 && i == 5; },
      [&](int rank, gcommReducer_t r) {
        const gcommBucketAutotuneReport_t got = autotune_report(r);
        EXPECT_EQ(got.state, gcommBucketAutotuneStateSkipped) << "rank " << rank;
        EXPECT_EQ(got.chosen_at_step, 0u) << "skipped: nothing was chosen";
        EXPECT_EQ(got.bucket_cap_bytes, size_t{25} << 20);
      });
  run_autotuned(
      *this, c, 0, [](int, size_t) { return false; },
      [](int, gcommReducer_t r) { EXPECT_EQ(autotune_report(r).state, gcommBucketAutotuneStateSkipped); }, 2,
      [](gcommReducer_t r) { return gcommReducerEnableCompressionText(r, "int8", nullptr); });
}

// Each rank reads its own config and environment; the autotune's probe and
// all-gather are collectives, so every rank takes rank 0's decision at the first
// synced step. Before that, a rank with it on probed at step 4 while a rank with it
// off went on to step 5's buckets: they paired different collectives (review of
// bb2c099; this test failed with a timeout then).
TEST_P(ReducerRig, RanksThatDisagreeOnTheBucketAutotuneTakeRankZerosDecision) {
  if (gpu()) GTEST_SKIP() << "host-only: the autotune is refused on a GPU";
  gcommReducerConfig_t c = GCOMM_REDUCER_CONFIG_INITIALIZER;
  for (const int rank0 : {gcommBucketAutotuneOn, gcommBucketAutotuneOff}) {
    const int others = rank0 == gcommBucketAutotuneOn ? gcommBucketAutotuneOff : gcommBucketAutotuneOn;
    std::vector<gcommBucketAutotuneReport_t> got(3);
    run_autotuned(
        *this, c, 5, [](int, size_t) { return false; },
        [&](int rank, gcommReducer_t r) { got[rank] = autotune_report(r); }, 3, {},
        [&](int rank, gcommReducerConfig_t& own) { own.bucket_autotune = rank == 0 ? rank0 : others; });
    for (int rank = 0; rank < 3; ++rank) {
      EXPECT_EQ(got[rank].state,
                rank0 == gcommBucketAutotuneOn ? gcommBucketAutotuneStateChosen : gcommBucketAutotuneStateOff)
          << "rank " << rank << ", rank 0's setting " << rank0;
      EXPECT_EQ(got[rank].bucket_cap_bytes, got[0].bucket_cap_bytes) << "rank " << rank;
    }
  }
}

TEST_P(ReducerRig, BadBucketAutotuneSettingsAreRefusedWithTheReason) {
  if (gpu()) GTEST_SKIP() << "host-only: the GPU refusal is in TheBucketAutotuneChooses...";
  auto comms = make_comms(1);
  GradMem g(gcommFloat32, 16, false);
  gcommTensor_t t = g.tensor();
  auto refused = [&](gcommReducerConfig_t c, const char* words) {
    gcommReducer_t r = nullptr;
    gcommTensor_t tensor = t;
    if (c.grad_as_bucket_view) tensor.data = nullptr;
    EXPECT_EQ(gcommReducerCreate(comms[0], &tensor, 1, &c, &r), gcommInvalidArgument) << words;
    EXPECT_NE(std::string(gcommGetLastError()).find(words), std::string::npos) << gcommGetLastError();
    EXPECT_EQ(r, nullptr);
  };
  gcommReducerConfig_t c = GCOMM_REDUCER_CONFIG_INITIALIZER;
  c.bucket_autotune = 7;
  refused(c, "bucket_autotune 7 is not a gcommBucketAutotune_t");
  c = GCOMM_REDUCER_CONFIG_INITIALIZER;
  c.reserved_v2 = 1;
  refused(c, "reserved_v2 must be 0");
  c = GCOMM_REDUCER_CONFIG_INITIALIZER;
  c.bucket_autotune = gcommBucketAutotuneOn;
  c.grad_as_bucket_view = 1;
  refused(c, "the caller holds addresses into the first plan");
  c.grad_as_bucket_view = 0;
  c.mode = gcommReducerSharded;
  refused(c, "the optimizer's shards are laid out by the first plan");
  gcommBucketAutotuneReport_t bad = GCOMM_BUCKET_AUTOTUNE_REPORT_INITIALIZER;
  bad.magic = 0;
  gcommReducer_t r = nullptr;
  ASSERT_EQ(gcommReducerCreate(comms[0], &t, 1, nullptr, &r), gcommSuccess);
  EXPECT_EQ(gcommReducerGetBucketAutotune(r, &bad), gcommInvalidArgument);
  EXPECT_EQ(gcommReducerGetBucketAutotune(r, nullptr), gcommInvalidArgument);
  EXPECT_EQ(gcommReducerDestroy(r), gcommSuccess);
  destroy(comms);
}

INSTANTIATE_TEST_SUITE_P(, ReducerRig, ::testing::Values(RigDevice::kHost, RigDevice::kGpu), rig_name);

}  // namespace
}  // namespace gradcomm::test
