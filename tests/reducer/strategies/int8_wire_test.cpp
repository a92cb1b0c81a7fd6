// The int8 wire (gcommReducerEnableCompression with gcommCompressionInt8): every rank's result equals
// a single-process model of the algorithm bit for bit (local and socket transports,
// GPU 0 where one is present), exactly representable gradients round-trip, the
// error stays within the documented bound and the error feedback telescopes, the
// bytes on the wire, a state of another block size refused, and the refusals. An
// Inf/NaN step and the state's round trip are the strategy contract's
// (tests/reducer/unit/strategy_contract_test.cpp).
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>

#include "kernels/quant/int8.hpp"
#include "reducer/strategies/block_wire_model.hpp"

namespace gradcomm::test {
namespace {

namespace kq = kernels::quant;
using Int8Wire = WhereRig;

std::string enable(gcommReducer_t r, int block, int error_feedback, uint64_t start_iter = 0) {
  gcommInt8Config_t q = GCOMM_INT8_CONFIG_INITIALIZER;
  q.block_size = block;
  q.error_feedback = error_feedback;
  q.start_iter = start_iter;
  RIG_CHECK(gcommReducerEnableCompression(r, gcommCompressionInt8, &q, nullptr));
  return "";
}

TEST_P(Int8Wire, EveryRankGetsTheSingleProcessModelsResultBitForBit) {
  const std::vector<size_t> sizes = {1000, 37, 5000, 256};
  for (int world : {1, 2, 3, 4}) {
    const int steps = 4, start = world == 3 ? 2 : 0;  // world 3: two f32 warm-up steps first
    const StepInputs inputs = random_inputs(steps, world, sizes);
    // The model, per gradient (= bucket), from the first quantized step on; buckets
    // too small to save bytes (here 37 values beyond one rank) stay f32.
    size_t quantized_buckets = 0;
    for (size_t k = 0; k < sizes.size(); ++k) quantized_buckets += is_quantized(sizes[k], world, 128) ? 1 : 0;
    if (world > 1) {
      ASSERT_FALSE(is_quantized(37, world, 128)) << "the rule's small bucket";
    }
    const auto expected = model_results(kq::int8_codec(), world, sizes, 128, inputs, start);
    run(world, [&](int rank, gcommComm_t comm, cudaStream_t stream) -> std::string {
      std::string e;
      RankReducer rr(comm, sizes, gpu(), one_grad_per_bucket(), &e);
      if (!e.empty()) return e;
      if (!(e = enable(rr.r, 128, 1, static_cast<uint64_t>(start))).empty()) return e;
      for (int t = 0; t < steps; ++t) {
        std::vector<std::vector<float>> out;
        if (!(e = rr.step(inputs[t][rank], stream, &out)).empty()) return e;
        for (size_t k = 0; k < sizes.size(); ++k) {
          const std::string where =
              "world " + std::to_string(world) + " step " + std::to_string(t) + " grad " + std::to_string(k);
          if (t >= start && is_quantized(sizes[k], world, 128)) {
            if (!same_bits(out[k], expected[t][k])) return where + ": differs from the model";
          } else {
            for (size_t i = 0; i < sizes[k]; ++i) {  // the f32 all-reduce of the warm-up
              double avg = 0;
              for (int r = 0; r < world; ++r) avg += inputs[t][r][k][i];
              avg /= world;
              if (std::fabs(out[k][i] - avg) > 1e-5 * (1 + std::fabs(avg)))
                return where + ": warm-up not f32";
            }
          }
        }
      }
      gcommInt8Stats_t st = GCOMM_INT8_STATS_INITIALIZER;
      RIG_CHECK(gcommReducerGetCompressionStats(rr.r, gcommCompressionInt8, &st));
      if (st.compressed_steps != static_cast<uint64_t>(steps - start) ||
          st.compressed_buckets != quantized_buckets)
        return "stats: " + std::to_string(st.compressed_steps) + " quantized steps, " +
               std::to_string(st.compressed_buckets) + " buckets";
      return "";
    });
  }
}

TEST_P(Int8Wire, RepresentableGradientsRoundTripBitForBit) {
  // Codes in -127..127 times 2^-3, one of them 127 in every 32 values (the block),
  // the same on every rank: every block's scale is exactly 2^-3 at each stage.
  const std::vector<size_t> sizes = {64, 320, 4096};
  std::vector<std::vector<float>> g;
  std::mt19937 rng(4);
  std::uniform_int_distribution<int> code(-127, 127);
  for (size_t n : sizes) {
    g.emplace_back(n);
    for (size_t i = 0; i < n; ++i) g.back()[i] = static_cast<float>(i % 32 == 0 ? 127 : code(rng)) * 0.125f;
  }
  for (int world : {1, 2, 4})
    run(world, [&](int, gcommComm_t comm, cudaStream_t stream) -> std::string {
      std::string e;
      RankReducer rr(comm, sizes, gpu(), one_grad_per_bucket(), &e);
      if (!e.empty()) return e;
      if (!(e = enable(rr.r, 32, 1)).empty()) return e;
      for (int t = 0; t < 2; ++t) {
        std::vector<std::vector<float>> out;
        if (!(e = rr.step(g, stream, &out)).empty()) return e;
        for (size_t k = 0; k < sizes.size(); ++k)
          if (!same_bits(out[k], g[k]))
            return "world " + std::to_string(world) + " grad " + std::to_string(k) + " did not round-trip";
      }
      return "";
    });
}

TEST_P(Int8Wire, ErrorStaysWithinTheBoundAndTheErrorFeedbackTelescopes) {
  const int world = 4, steps = 40;
  const size_t n = 2000, block = 64;
  std::vector<std::vector<float>> g;  // the same gradient every step, different per rank
  for (int r = 0; r < world; ++r) g.push_back(randoms(n, 50 + static_cast<unsigned>(r)));
  std::vector<double> avg(n, 0.0);
  for (int r = 0; r < world; ++r)
    for (size_t i = 0; i < n; ++i) avg[i] += g[r][i] / world;
  // One step's bound per block: half a step of each rank's contribution and of the sum.
  std::vector<double> bound(n);
  for (size_t b0 = 0; b0 < n; b0 += block) {
    double sum_amax = 0, avg_amax = 0;
    for (int r = 0; r < world; ++r) {
      double a = 0;
      for (size_t i = b0; i < std::min(n, b0 + block); ++i)
        a = std::max(a, std::fabs(static_cast<double>(g[r][i]) / world));
      sum_amax += a;
    }
    for (size_t i = b0; i < std::min(n, b0 + block); ++i) avg_amax = std::max(avg_amax, std::fabs(avg[i]));
    for (size_t i = b0; i < std::min(n, b0 + block); ++i) bound[i] = (sum_amax + avg_amax) / 254.0;
  }
  std::vector<double> worst_sum_error(2, 0.0);  // [error feedback off, on]
  for (int ef : {0, 1})
    run(world, [&](int rank, gcommComm_t comm, cudaStream_t stream) -> std::string {
      std::string e;
      RankReducer rr(comm, {n}, gpu(), one_grad_per_bucket(), &e);
      if (!e.empty()) return e;
      if (!(e = enable(rr.r, static_cast<int>(block), ef)).empty()) return e;
      std::vector<double> sum(n, 0.0);
      for (int t = 0; t < steps; ++t) {
        std::vector<std::vector<float>> out;
        if (!(e = rr.step({g[rank]}, stream, &out)).empty()) return e;
        for (size_t i = 0; i < n; ++i) {
          // Error feedback can carry up to a step's worth into v: twice the bound, plus rounding.
          if (std::fabs(out[0][i] - avg[i]) > 2.0 * bound[i] * (1 + 1e-3) + 1e-6)
            return "step " + std::to_string(t) + " element " + std::to_string(i) + " off by " +
                   std::to_string(out[0][i] - avg[i]) + ", bound " + std::to_string(2 * bound[i]);
          sum[i] += out[0][i];
        }
      }
      double worst = 0, worst_ratio = 0;
      for (size_t i = 0; i < n; ++i) {
        const double err = std::fabs(sum[i] - steps * avg[i]);
        worst = std::max(worst, err);
        worst_ratio = std::max(worst_ratio, err / bound[i]);
      }
      if (rank == 0) worst_sum_error[ef] = worst;
      // Telescoping: the sum over the steps is off by the last E and E2 only (each
      // within a bound's worth), not by `steps` bounds.
      if (ef == 1 && worst_ratio > 3.0)
        return "error feedback does not telescope: the sum over " + std::to_string(steps) +
               " steps is off by " + std::to_string(worst_ratio) + " one-step bounds";
      return "";
    });
  // Without it, round-to-nearest's bias adds up step after step.
  EXPECT_GT(worst_sum_error[0], 5.0 * worst_sum_error[1])
      << "sum error without error feedback " << worst_sum_error[0] << ", with " << worst_sum_error[1];
}

// An Inf or NaN step (skipped everywhere, the error feedback untouched) and the
// state's round trip are the strategy contract's, held for every table entry:
// tests/reducer/unit/strategy_contract_test.cpp.

TEST_P(Int8Wire, BytesOnTheWireAreAboutAQuarterOfAnF32AllReduce) {
  const size_t n = 1 << 20;
  run(4, [&](int rank, gcommComm_t comm, cudaStream_t stream) -> std::string {
    std::string e;
    gcommReducerConfig_t c = GCOMM_REDUCER_CONFIG_INITIALIZER;
    c.rebuild_buckets = 0;
    RankReducer rr(comm, {n}, gpu(), c, &e);
    if (!e.empty()) return e;
    if (!(e = enable(rr.r, 256, 1)).empty()) return e;
    uint64_t sent_before = 0, sent_after = 0;
    const bool counts = GetParam() == Where::kSocketHost;
    if (counts) RIG_CHECK(gcommCommBytesSent(comm, &sent_before));
    std::vector<std::vector<float>> out;
    if (!(e = rr.step({randoms(n, 9 + rank)}, stream, &out)).empty()) return e;
    if (counts) RIG_CHECK(gcommCommBytesSent(comm, &sent_after));
    gcommInt8Stats_t st = GCOMM_INT8_STATS_INITIALIZER;
    RIG_CHECK(gcommReducerGetCompressionStats(rr.r, gcommCompressionInt8, &st));
    const double ratio =
        static_cast<double>(st.bytes_last_step) / static_cast<double>(st.f32_allreduce_bytes);
    if (!(ratio <= 0.27 && ratio > 0.24)) return "bytes ratio " + std::to_string(ratio);
    // f32 ring all-reduce: 2 (W-1)/W 4 bytes a value.
    if (st.f32_allreduce_bytes != 2 * 3 * n * 4 / 4)
      return "f32 equivalent " + std::to_string(st.f32_allreduce_bytes);
    // The first synced step also takes rank 0's straggler and bucket autotune
    // settings: three floats, broadcast (measured here the same way).
    uint64_t settings = 0;
    if (counts) {
      float three[3] = {0.0f, 0.0f, 0.0f};
      uint64_t before = 0, after = 0;
      RIG_CHECK(gcommCommBytesSent(comm, &before));
      RIG_CHECK(gcommBroadcast(comm, three, three, 3, gcommFloat32, 0, stream));
      RIG_CHECK(gcommCommBytesSent(comm, &after));
      settings = after - before;
    }
    if (counts && sent_after - sent_before != st.bytes_last_step + settings)
      return "the socket transport sent " + std::to_string(sent_after - sent_before) +
             " bytes, the stats say " + std::to_string(st.bytes_last_step) + " + the settings' " +
             std::to_string(settings);
    // A caller built against an older, smaller stats struct gets the fields it knows
    // and nothing is written past its size.
    struct {
      gcommInt8Stats_t stats;
      uint64_t guard;
    } older{GCOMM_INT8_STATS_INITIALIZER, 0xABCD};
    older.stats.size = offsetof(gcommInt8Stats_t, bytes_last_step);
    older.stats.bytes_last_step = 77;
    RIG_CHECK(gcommReducerGetCompressionStats(rr.r, gcommCompressionInt8, &older.stats));
    if (older.stats.compressed_steps != st.compressed_steps ||
        older.stats.compressed_buckets != st.compressed_buckets || older.stats.bytes_last_step != 77 ||
        older.guard != 0xABCD)
      return "an older stats struct was not filled up to its size only";
    // The same statistics as JSON, named as the struct's fields.
    size_t need = 0;
    RIG_CHECK(gcommReducerDescribeCompression(rr.r, nullptr, 0, &need));
    std::string json(need, '\0');
    RIG_CHECK(gcommReducerDescribeCompression(rr.r, json.data(), json.size(), nullptr));
    if (json.find("\"kind\":\"int8\"") == std::string::npos ||
        json.find("\"bytes_last_step\":" + std::to_string(st.bytes_last_step)) == std::string::npos)
      return "describe: " + json;
    gcommPowerSgdStats_t other = GCOMM_POWERSGD_STATS_INITIALIZER;
    if (gcommReducerGetCompressionStats(rr.r, gcommCompressionPowerSgd, &other) != gcommInvalidState)
      return "PowerSGD's stats from an int8 reducer were not refused";
    return "";
  });
}

TEST_P(Int8Wire, AStateOfAnotherBlockSizeOrGarbageIsRefused) {
  const std::vector<size_t> sizes = {500, 129};
  run(2, [&](int rank, gcommComm_t comm, cudaStream_t stream) -> std::string {
    std::string e;
    std::vector<uint8_t> saved;
    std::vector<std::vector<float>> got;
    RankReducer first(comm, sizes, gpu(), one_grad_per_bucket(), &e);
    if (!e.empty()) return e;
    if (!(e = enable(first.r, 64, 1)).empty()) return e;
    if (!(e = first.step({randoms(500, 21 + rank), randoms(129, 23 + rank)}, stream, &got)).empty()) return e;
    size_t need = 0;
    RIG_CHECK(gcommReducerSaveCompressionState(first.r, nullptr, 0, &need));
    saved.resize(need);
    RIG_CHECK(gcommReducerSaveCompressionState(first.r, saved.data(), saved.size(), nullptr));
    RankReducer other(comm, sizes, gpu(), one_grad_per_bucket(), &e);
    if (!e.empty()) return e;
    if (!(e = enable(other.r, 128, 1)).empty()) return e;
    if (gcommReducerLoadCompressionState(other.r, saved.data(), saved.size()) != gcommInvalidArgument ||
        std::string(gcommGetLastError()).find("block_size 64") == std::string::npos)
      return std::string("a state of another block size: ") + gcommGetLastError();
    const uint8_t junk[16] = {1, 2, 3};
    if (gcommReducerLoadCompressionState(other.r, junk, sizeof junk) != gcommInvalidArgument)
      return "garbage was loaded";
    return "";
  });
}

// A fault-tolerant job's survivor (docs/fault-tolerance.md): its state from a world
// of three is refused as "its own" by its reducer in a world of two, naming the call
// that carries it; carried, its own residual goes on shaping its next step (the
// result differs from a fresh survivor's), and a shared state loads on any rank.
TEST_P(Int8Wire, ASurvivorCarriesItsResidualToASmallerWorld) {
  const std::vector<size_t> sizes = {4096, 3000};
  std::vector<std::vector<uint8_t>> saved(3), shared(3);
  run(3, [&](int rank, gcommComm_t comm, cudaStream_t stream) -> std::string {
    std::string e;
    std::vector<std::vector<float>> got;
    RankReducer rr(comm, sizes, gpu(), one_grad_per_bucket(), &e);
    if (!e.empty() || !(e = enable(rr.r, 128, 1)).empty()) return e;
    for (unsigned t = 0; t < 2; ++t)
      if (!(e = rr.step({randoms(4096, 10 * t + rank), randoms(3000, 50 + 10 * t + rank)}, stream, &got))
               .empty())
        return e;
    for (auto [part, out] :
         {std::pair{gcommCompressionStateAll, &saved}, std::pair{gcommCompressionStateShared, &shared}}) {
      size_t need = 0;
      RIG_CHECK(gcommReducerSaveCompressionStatePart(rr.r, part, nullptr, 0, &need));
      (*out)[rank].resize(need);
      RIG_CHECK(gcommReducerSaveCompressionStatePart(rr.r, part, (*out)[rank].data(), need, nullptr));
    }
    return "";
  });
  ASSERT_EQ(shared[0], shared[2]) << "the shared state differs between ranks";
  // Bad arguments to the two calls are refused, naming what is wrong.
  run(1, [&](int, gcommComm_t comm, cudaStream_t) -> std::string {
    std::string e;
    RankReducer rr(comm, sizes, gpu(), one_grad_per_bucket(), &e);
    if (!e.empty() || !(e = enable(rr.r, 128, 1)).empty()) return e;
    size_t need = 0;
    if (gcommReducerSaveCompressionStatePart(rr.r, static_cast<gcommCompressionStatePart_t>(7), nullptr, 0,
                                             &need) != gcommInvalidArgument ||
        std::string(gcommGetLastError()).find("part 7") == std::string::npos)
      return std::string("part 7: ") + gcommGetLastError();
    if (gcommReducerSaveCompressionStatePart(rr.r, gcommCompressionStateShared, nullptr, 8, &need) !=
        gcommInvalidArgument)
      return "a NULL buffer of 8 bytes was taken";
    if (gcommReducerCarryCompressionState(rr.r, nullptr, 4) != gcommInvalidArgument)
      return "NULL data of 4 bytes was carried";
    const uint8_t junk[16] = {9};
    if (gcommReducerCarryCompressionState(rr.r, junk, sizeof junk) != gcommInvalidArgument)
      return "garbage was carried";
    return "";
  });
  // World 2: rank 0 is the old rank 1 (the survivor), rank 1 starts fresh; the same
  // step run twice, with the survivor's residual carried and without.
  std::vector<std::vector<float>> carried, fresh;
  run(2, [&](int rank, gcommComm_t comm, cudaStream_t stream) -> std::string {
    std::string e;
    for (bool carry : {true, false}) {
      std::vector<std::vector<float>> got;
      RankReducer rr(comm, sizes, gpu(), one_grad_per_bucket(), &e);
      if (!e.empty() || !(e = enable(rr.r, 128, 1)).empty()) return e;
      const std::vector<uint8_t>& mine = saved[1];
      if (rank == 0 && carry) {
        if (gcommReducerLoadCompressionState(rr.r, mine.data(), mine.size()) != gcommInvalidArgument ||
            std::string(gcommGetLastError()).find("gcommReducerCarryCompressionState") == std::string::npos)
          return std::string("another world's state loaded as this rank's own: ") + gcommGetLastError();
        RIG_CHECK(gcommReducerCarryCompressionState(rr.r, mine.data(), mine.size()));
      } else {
        RIG_CHECK(gcommReducerLoadCompressionState(rr.r, shared[0].data(), shared[0].size()));
      }
      if (!(e = rr.step({randoms(4096, 90 + rank), randoms(3000, 95 + rank)}, stream, &got)).empty())
        return e;
      if (rank == 0) (carry ? carried : fresh) = got;
    }
    return "";
  });
  ASSERT_EQ(carried.size(), 2u);
  EXPECT_FALSE(same_bits(carried[0], fresh[0])) << "the carried residual changed nothing";
}

TEST_P(Int8Wire, BadConfigurationsAndCombinationsAreRefusedWithTheReason) {
  run(1, [&](int, gcommComm_t comm, cudaStream_t stream) -> std::string {
    std::string e;
    auto expect = [](gcommStatus_t got, gcommStatus_t want, const char* needle,
                     const char* what) -> std::string {
      if (got == want && std::string(gcommGetLastError()).find(needle) != std::string::npos) return "";
      return std::string(what) + ": " + gcommGetStatusString(got) + ": " + gcommGetLastError();
    };
    RankReducer rr(comm, {256, 64}, gpu(), one_grad_per_bucket(), &e);
    if (!e.empty()) return e;
    gcommInt8Stats_t st = GCOMM_INT8_STATS_INITIALIZER;
    if (!(e = expect(gcommReducerGetCompressionStats(rr.r, gcommCompressionInt8, &st), gcommInvalidState,
                     "not enabled", "stats first"))
             .empty())
      return e;
    for (int bad_block : {0, 16, 100, 8192}) {
      gcommInt8Config_t q = GCOMM_INT8_CONFIG_INITIALIZER;
      q.block_size = bad_block;
      if (!(e = expect(gcommReducerEnableCompression(rr.r, gcommCompressionInt8, &q, nullptr),
                       gcommInvalidArgument, "block_size", "block"))
               .empty())
        return e;
    }
    gcommInt8Config_t q = GCOMM_INT8_CONFIG_INITIALIZER;
    q.error_feedback = 2;
    if (!(e = expect(gcommReducerEnableCompression(rr.r, gcommCompressionInt8, &q, nullptr),
                     gcommInvalidArgument, "error_feedback", "error_feedback 2"))
             .empty())
      return e;
    q = GCOMM_INT8_CONFIG_INITIALIZER;
    q.magic = 0;
    if (!(e = expect(gcommReducerEnableCompression(rr.r, gcommCompressionInt8, &q, nullptr),
                     gcommInvalidArgument, "INITIALIZER", "raw config"))
             .empty())
      return e;
    // The generic API's refusals, each leaving the reducer without compression.
    if (!(e = expect(
              gcommReducerEnableCompression(rr.r, static_cast<gcommCompression_t>(7), nullptr, nullptr),
              gcommInvalidArgument, "gcommCompressionInt8", "kind 7"))
             .empty())
      return e;
    if (!(e = expect(gcommReducerEnableCompression(rr.r, gcommCompressionNone, nullptr, nullptr),
                     gcommInvalidArgument, "no compression", "kind none"))
             .empty())
      return e;
    if (!(e = expect(gcommReducerEnableCompressionText(rr.r, "int9", nullptr), gcommInvalidArgument,
                     "none, powersgd, int8", "text int9"))
             .empty())
      return e;
    if (!(e = expect(gcommReducerEnableCompressionText(rr.r, "int8:block=128", nullptr), gcommInvalidArgument,
                     "block_size, error_feedback, start_iter", "unknown option"))
             .empty())
      return e;
    if (!(e = expect(gcommReducerEnableCompressionText(rr.r, "int8:block_size=12x", nullptr),
                     gcommInvalidArgument, "not an integer", "bad value"))
             .empty())
      return e;
    if (!(e = expect(gcommReducerEnableCompressionText(rr.r, "int8:block_size=100", nullptr),
                     gcommInvalidArgument, "power of two", "text block 100"))
             .empty())
      return e;
    if (!(e = expect(gcommReducerEnableCompressionText(rr.r, nullptr, nullptr), gcommInvalidArgument, "spec",
                     "NULL spec"))
             .empty())
      return e;
    gcommCompression_t kind = gcommCompressionInt8;
    RIG_CHECK(gcommReducerGetCompression(rr.r, &kind));
    if (kind != gcommCompressionNone) return "a refused enable left a compression on";
    if (!(e = expect(gcommReducerSaveCompressionState(rr.r, nullptr, 0, nullptr), gcommInvalidState,
                     "no compression", "save without compression"))
             .empty())
      return e;
    RIG_CHECK(gcommReducerBeginStep(rr.r, 1));
    if (!(e = expect(gcommReducerEnableCompression(rr.r, gcommCompressionInt8, nullptr, nullptr),
                     gcommInvalidState, "between steps", "mid-step"))
             .empty())
      return e;
    for (size_t k = 0; k < 2; ++k) RIG_CHECK(gcommReducerMarkReady(rr.r, k, stream));
    RIG_CHECK(gcommReducerFinalize(rr.r, stream, nullptr));
    RIG_CHECK(gcommReducerEnableCompression(rr.r, gcommCompressionInt8, nullptr, nullptr));  // defaults
    if (!(e = expect(gcommReducerEnableCompression(rr.r, gcommCompressionInt8, nullptr, nullptr),
                     gcommInvalidState, "int8", "twice"))
             .empty())
      return e;
    const size_t rows[2] = {16, 8};
    if (!(e = expect(gcommReducerEnableCompression(rr.r, gcommCompressionPowerSgd, nullptr, rows),
                     gcommInvalidState, "one compression strategy", "PowerSGD after int8"))
             .empty())
      return e;
    gcommInt8Stats_t raw{};
    if (!(e = expect(gcommReducerGetCompressionStats(rr.r, gcommCompressionInt8, &raw), gcommInvalidArgument,
                     "INITIALIZER", "raw stats"))
             .empty())
      return e;
    // The other way round, views and sharded mode.
    RankReducer psgd(comm, {256, 64}, gpu(), one_grad_per_bucket(), &e);
    if (!e.empty()) return e;
    RIG_CHECK(gcommReducerEnableCompression(psgd.r, gcommCompressionPowerSgd, nullptr, rows));
    if (!(e = expect(gcommReducerEnableCompression(psgd.r, gcommCompressionInt8, nullptr, nullptr),
                     gcommInvalidState, "powersgd", "int8 after PowerSGD"))
             .empty())
      return e;
    gcommReducerConfig_t views = one_grad_per_bucket();
    views.grad_as_bucket_view = 1;
    gcommReducer_t view_reducer = nullptr;
    const gcommTensor_t view_grads[1] = {{nullptr, 256, gcommFloat32}};
    RIG_CHECK(gcommReducerCreate(comm, view_grads, 1, &views, &view_reducer));
    e = expect(gcommReducerEnableCompression(view_reducer, gcommCompressionInt8, nullptr, nullptr),
               gcommNotSupported, "grad_as_bucket_view", "views");
    gcommReducerDestroy(view_reducer);
    if (!e.empty()) return e;
    gcommReducerConfig_t sharded = one_grad_per_bucket();
    sharded.mode = gcommReducerSharded;
    RankReducer sh(comm, {256}, gpu(), sharded, &e);
    if (!e.empty()) return e;
    if (!(e = expect(gcommReducerEnableCompression(sh.r, gcommCompressionInt8, nullptr, nullptr),
                     gcommNotSupported, "sharded", "sharded"))
             .empty())
      return e;
    return "";
  });
}

// The wire unscales before quantizing, so E and E2 hold true gradient units: with a
// loss scale that doubles every step (powers of two, exact), the results equal an
// unscaled run's bit for bit. Were E kept in scaled units, step 2 on would differ.
TEST_P(Int8Wire, AChangingLossScaleDoesNotReweighTheErrorFeedback) {
  const std::vector<size_t> sizes = {1000, 3000};
  run(2, [&](int rank, gcommComm_t comm, cudaStream_t stream) -> std::string {
    std::string e;
    gcommGradScalerConfig_t sc = GCOMM_GRAD_SCALER_CONFIG_INITIALIZER;
    sc.init_scale = 1024.0f;
    sc.growth_interval = 1;  // x2 after every clean step
    gcommGradScaler_t scaler = nullptr;
    RIG_CHECK(gcommGradScalerCreate(gpu() ? gcommCudaDevice(0) : gcommHostDevice(), &sc, &scaler));
    gcommReducerConfig_t scaled_config = one_grad_per_bucket();
    scaled_config.scaler = scaler;
    {
      RankReducer plain(comm, sizes, gpu(), one_grad_per_bucket(), &e);
      if (!e.empty()) return e;
      RankReducer scaled(comm, sizes, gpu(), scaled_config, &e);
      if (!e.empty()) return e;
      if (!(e = enable(plain.r, 64, 1)).empty() || !(e = enable(scaled.r, 64, 1)).empty()) return e;
      for (int t = 0; t < 5 && e.empty(); ++t) {
        std::vector<std::vector<float>> g = {randoms(1000, 60 + 10 * t + rank),
                                             randoms(3000, 61 + 10 * t + rank)};
        float scale = 0.0f;
        RIG_CHECK(gcommGradScalerGetScale(scaler, stream, &scale));
        std::vector<std::vector<float>> gs = g, want, got;
        for (auto& v : gs)
          for (float& x : v) x *= scale;
        if (!(e = plain.step(g, stream, &want)).empty() || !(e = scaled.step(gs, stream, &got)).empty())
          break;
        for (size_t k = 0; k < sizes.size() && e.empty(); ++k)
          if (!same_bits(got[k], want[k]))
            e = "step " + std::to_string(t) + " (loss scale " + std::to_string(scale) + ") gradient " +
                std::to_string(k) + " differs from the unscaled run";
      }
    }
    gcommGradScalerDestroy(scaler);
    return e;
  });
}

INSTANTIATE_TEST_SUITE_P(, Int8Wire,
                         ::testing::Values(Where::kLocalHost, Where::kSocketHost, Where::kLocalGpu),
                         where_name);

}  // namespace
}  // namespace gradcomm::test
