// Sharded mode (gcommReducerSharded): each rank's shard equals the matching slice
// of the all-reduce mode's result bit for bit, the shards cover every gradient
// element exactly once (padding never), a step with Inf/NaN on one rank is
// skipped on every rank, the norm over shards is the whole gradient's norm (and
// the clip scales the shard), and the parameter all-gather leaves every rank with
// the owners' values. On the local transport (host; GPU 0 where one is present) and
// the socket transport (host ranks over loopback TCP).
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>

#include "reducer/where_rig.hpp"

namespace gradcomm::test {
namespace {

using Grads = std::vector<std::pair<size_t, gcommDataType_t>>;

// Odd sizes, empty ones, mixed dtypes: every bucket needs padding.
Grads odd_grads() {
  return {{1001, gcommFloat32}, {0, gcommFloat32}, {3, gcommFloat16},   {4099, gcommFloat32},
          {17, gcommBfloat16},  {1, gcommFloat32}, {777, gcommFloat16}, {2048, gcommFloat32}};
}

using Sharded = WhereRig;

// One synced step of `config` over the rank's `inputs`; returns the gradients after it.
std::string one_step(gcommComm_t comm, const Grads& grads, const std::vector<TypedBuffer>& inputs,
                     const gcommReducerConfig_t& config, bool gpu, cudaStream_t stream,
                     std::vector<TypedBuffer>& out,
                     std::vector<std::vector<gcommShardPiece_t>>* pieces = nullptr, int* skip = nullptr,
                     const std::function<std::string(gcommReducer_t)>& after_finalize = {}) {
  std::vector<GradMem> mem;
  std::vector<gcommTensor_t> tensors;
  for (size_t i = 0; i < grads.size(); ++i) {
    mem.emplace_back(grads[i].second, grads[i].first, gpu);
    mem.back().upload(inputs[i], stream);
    tensors.push_back(mem.back().tensor());
  }
  gcommReducer_t r = nullptr;
  RIG_CHECK(gcommReducerCreate(comm, tensors.data(), tensors.size(), &config, &r));
  RIG_CHECK(gcommReducerBeginStep(r, 1));
  for (size_t i = grads.size(); i-- > 0;) RIG_CHECK(gcommReducerMarkReady(r, i, stream));
  int skip_step = -1;
  RIG_CHECK(gcommReducerFinalize(r, stream, &skip_step));
  if (skip != nullptr) *skip = skip_step;
  if (after_finalize) {
    std::string e = after_finalize(r);
    if (!e.empty()) return e;
  }
  if (pieces != nullptr) {
    gcommReducerStats_t stats;
    RIG_CHECK(gcommReducerGetStats(r, &stats));
    pieces->assign(stats.num_buckets, {});
    for (size_t b = 0; b < stats.num_buckets; ++b) {
      size_t n = 0;
      RIG_CHECK(gcommReducerGetShard(r, b, nullptr, nullptr, 0, &n));
      (*pieces)[b].resize(n);
      RIG_CHECK(gcommReducerGetShard(r, b, nullptr, (*pieces)[b].data(), n, &n));
    }
  }
  out.clear();
  for (auto& m : mem) out.push_back(m.download(stream));
  RIG_CHECK(gcommReducerDestroy(r));
  return "";
}

std::vector<std::vector<TypedBuffer>> random_inputs(const Grads& grads, int world, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<TypedBuffer>> v(world);
  for (auto& rank : v)
    for (const auto& [count, dtype] : grads) rank.push_back(random_buffer(rng, dtype, count));
  return v;
}

TEST_P(Sharded, EachShardIsTheAllReduceResultBitForBitAndTheShardsCoverEveryElementOnce) {
  const Grads grads = odd_grads();
  for (int world : {2, 3}) {
    for (int wire : {GCOMM_WIRE_SAME_AS_GRAD, static_cast<int>(gcommFloat16)}) {
      SCOPED_TRACE(testing::Message() << "world " << world << ", wire " << wire);
      auto inputs = random_inputs(grads, world, 7u + static_cast<unsigned>(world));
      std::mutex m;
      std::vector<std::vector<int>> covered(grads.size());
      for (size_t i = 0; i < grads.size(); ++i) covered[i].assign(grads[i].first, 0);
      run(world, [&](int rank, gcommComm_t comm, cudaStream_t stream) -> std::string {
        gcommReducerConfig_t all = GCOMM_REDUCER_CONFIG_INITIALIZER;
        all.bucket_cap_bytes = 8192;  // several buckets
        all.first_bucket_bytes = 2048;
        all.wire_dtype = wire;
        gcommReducerConfig_t sharded = all;
        sharded.mode = gcommReducerSharded;
        std::vector<TypedBuffer> reference, got;
        std::vector<std::vector<gcommShardPiece_t>> pieces;
        std::string e = one_step(comm, grads, inputs[rank], all, gpu(), stream, reference);
        if (e.empty()) e = one_step(comm, grads, inputs[rank], sharded, gpu(), stream, got, &pieces);
        if (!e.empty()) return e;
        // Outside this rank's shard the gradients keep their own values: the step was
        // a reduce-scatter, not an all-reduce.
        std::vector<std::vector<char>> mine(grads.size());
        for (size_t i = 0; i < grads.size(); ++i) mine[i].assign(grads[i].first, 0);
        for (const auto& bucket : pieces)
          for (const gcommShardPiece_t& p : bucket)
            for (size_t j = p.grad_offset; j < p.grad_offset + p.count && j < grads[p.grad].first; ++j)
              mine[p.grad][j] = 1;
        for (size_t i = 0; i < grads.size(); ++i)
          for (size_t j = 0; j < grads[i].first; ++j)
            if (!mine[i][j] && got[i].get(j) != inputs[rank][i].get(j))
              return "gradient " + std::to_string(i) + " element " + std::to_string(j) +
                     " outside the shard changed";
        std::lock_guard<std::mutex> lock(m);
        for (const auto& bucket : pieces)
          for (const gcommShardPiece_t& p : bucket) {
            const size_t es = elem_size(grads[p.grad].second);
            if (p.count == 0 || p.grad_offset + p.count > grads[p.grad].first)
              return "a piece outside its gradient";
            if (std::memcmp(got[p.grad].bytes.data() + p.grad_offset * es,
                            reference[p.grad].bytes.data() + p.grad_offset * es, p.count * es) != 0)
              return "gradient " + std::to_string(p.grad) +
                     " differs from the all-reduce result in its shard";
            for (size_t j = p.grad_offset; j < p.grad_offset + p.count; ++j) ++covered[p.grad][j];
          }
        return "";
      });
      for (size_t i = 0; i < grads.size(); ++i)
        for (size_t j = 0; j < grads[i].first; ++j)
          ASSERT_EQ(covered[i][j], 1)
              << "gradient " << i << " element " << j << " is in " << covered[i][j] << " shards";
    }
  }
}

// Rank 0 alone has an Inf, in an element whichever rank owns: every rank skips.
TEST_P(Sharded, AStepWithInfOnOneRankIsSkippedOnEveryRank) {
  const Grads grads = odd_grads();
  const int world = 3;
  for (size_t where : {size_t{0}, size_t{2047}, size_t{4098}}) {
    auto inputs = random_inputs(grads, world, 11u);
    inputs[0][3].set(where, std::numeric_limits<double>::infinity());
    run(world, [&](int rank, gcommComm_t comm, cudaStream_t stream) -> std::string {
      gcommReducerConfig_t c = GCOMM_REDUCER_CONFIG_INITIALIZER;
      c.mode = gcommReducerSharded;
      c.bucket_cap_bytes = 8192;
      std::vector<TypedBuffer> got;
      int skip = -1;
      std::string e = one_step(comm, grads, inputs[rank], c, gpu(), stream, got, nullptr, &skip);
      if (!e.empty()) return e;
      return skip == 1 ? ""
                       : "rank " + std::to_string(rank) + " did not skip the step (element " +
                             std::to_string(where) + ")";
    });
  }
}

// Every rank writes its pieces of the parameters (and NaN elsewhere); after the
// all-gather, bucket by bucket or all at once, every rank holds every owner's values.
TEST_P(Sharded, TheParameterAllGatherLeavesEveryRankWithTheOwnersValues) {
  const Grads grads = odd_grads();
  auto value = [](size_t g, size_t j) { return static_cast<double>((g * 131 + j) % 1000); };
  for (bool per_bucket : {false, true}) {
    run(3, [&](int, gcommComm_t comm, cudaStream_t stream) -> std::string {
      std::vector<GradMem> g, p;
      std::vector<gcommTensor_t> gt, pt;
      for (const auto& [count, dtype] : grads) {
        g.emplace_back(dtype, count, gpu());
        p.emplace_back(dtype, count, gpu());
        gt.push_back(g.back().tensor());
        pt.push_back(p.back().tensor());
      }
      gcommReducerConfig_t c = GCOMM_REDUCER_CONFIG_INITIALIZER;
      c.mode = gcommReducerSharded;
      c.bucket_cap_bytes = 8192;
      gcommReducer_t r = nullptr;
      RIG_CHECK(gcommReducerCreate(comm, gt.data(), gt.size(), &c, &r));
      RIG_CHECK(gcommReducerSetParams(r, pt.data(), pt.size()));
      gcommReducerStats_t stats;
      RIG_CHECK(gcommReducerGetStats(r, &stats));
      // NaN everywhere, then this rank's pieces (an optimizer's update of its shard).
      std::vector<TypedBuffer> host;
      for (size_t i = 0; i < grads.size(); ++i) {
        host.push_back(
            TypedBuffer{grads[i].second, grads[i].first, 0,
                        std::vector<unsigned char>((grads[i].first + 8) * elem_size(grads[i].second))});
        for (size_t j = 0; j < grads[i].first; ++j) host[i].set(j, std::nan(""));
      }
      for (size_t b = 0; b < stats.num_buckets; ++b) {
        std::vector<gcommShardPiece_t> pieces(64);
        size_t n = 0;
        RIG_CHECK(gcommReducerGetShard(r, b, nullptr, pieces.data(), pieces.size(), &n));
        if (n > pieces.size()) return "more than 64 pieces";
        for (size_t k = 0; k < n; ++k)
          for (size_t j = pieces[k].grad_offset; j < pieces[k].grad_offset + pieces[k].count; ++j)
            host[pieces[k].grad].set(j, value(pieces[k].grad, j));
      }
      for (size_t i = 0; i < grads.size(); ++i) p[i].upload(host[i], stream);
      if (per_bucket) {
        for (size_t b = 0; b < stats.num_buckets; ++b) RIG_CHECK(gcommReducerAllGatherParams(r, b, stream));
      } else {
        RIG_CHECK(gcommReducerAllGatherParams(r, GCOMM_ALL_BUCKETS, stream));
      }
      for (size_t i = 0; i < grads.size(); ++i) {
        TypedBuffer after = p[i].download(stream);
        for (size_t j = 0; j < grads[i].first; ++j) {
          // The values pass through the dtype: compare with the dtype's rounding of them.
          TypedBuffer expect{grads[i].second, 1, 0, std::vector<unsigned char>(16)};
          expect.set(0, value(i, j));
          if (after.get(j) != expect.get(0))
            return "param " + std::to_string(i) + " element " + std::to_string(j) + " is " +
                   std::to_string(after.get(j)) + ", not " + std::to_string(expect.get(0));
        }
      }
      RIG_CHECK(gcommReducerDestroy(r));
      return "";
    });
  }
}

float read_scalar(const float* p, bool gpu, cudaStream_t stream) {
  float v = 0.0f;
  if (!gpu) return *p;
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(&v, p, sizeof v, cudaMemcpyDeviceToHost), cudaSuccess);
  return v;
}

double host_norm(const std::vector<TypedBuffer>& grads) {
  double sum = 0.0;
  for (const TypedBuffer& g : grads)
    for (size_t j = 0; j < g.count; ++j) sum += g.get(j) * g.get(j);
  return std::sqrt(sum);
}

// The norm over shards (partial norms combined across ranks) equals the norm of
// the all-reduce mode's whole result, on every rank the same bits; the clip then
// scales exactly this rank's pieces, and the all-reduce mode's clip every element.
TEST_P(Sharded, TheNormOverShardsIsTheWholeNormAndTheClipScalesTheShard) {
  const Grads grads = odd_grads();
  for (int world : {2, 3}) {
    SCOPED_TRACE(testing::Message() << "world " << world);
    auto inputs = random_inputs(grads, world, 23u + static_cast<unsigned>(world));
    std::mutex m;
    std::vector<uint32_t> sharded_bits;
    run(world, [&](int rank, gcommComm_t comm, cudaStream_t stream) -> std::string {
      gcommReducerConfig_t all = GCOMM_REDUCER_CONFIG_INITIALIZER;
      all.bucket_cap_bytes = 8192;
      all.first_bucket_bytes = 2048;
      gcommReducerConfig_t sharded = all;
      sharded.mode = gcommReducerSharded;
      float whole = 0.0f, shards = 0.0f, whole_clipped = 0.0f;
      std::vector<TypedBuffer> reference, clipped_all, clipped;
      std::vector<std::vector<gcommShardPiece_t>> pieces;
      auto norm_of = [&](float* out) {
        return [&, out](gcommReducer_t r) -> std::string {
          const float* norm = nullptr;
          RIG_CHECK(gcommReducerGradNorm(r, stream, &norm));
          *out = read_scalar(norm, gpu(), stream);
          return "";
        };
      };
      std::string e = one_step(comm, grads, inputs[rank], all, gpu(), stream, reference, nullptr, nullptr,
                               norm_of(&whole));
      const float max_norm = 0.25f * whole;
      auto clip = [&](float* out) {
        return [&, out](gcommReducer_t r) -> std::string {
          const float* norm = nullptr;
          RIG_CHECK(gcommReducerClipGradNorm(r, max_norm, stream, &norm));
          *out = read_scalar(norm, gpu(), stream);
          return "";
        };
      };
      if (e.empty())
        e = one_step(comm, grads, inputs[rank], all, gpu(), stream, clipped_all, nullptr, nullptr,
                     clip(&whole_clipped));
      if (e.empty())
        e = one_step(comm, grads, inputs[rank], sharded, gpu(), stream, clipped, &pieces, nullptr,
                     clip(&shards));
      if (!e.empty()) return e;
      const double exact = host_norm(reference);
      if (std::fabs(whole - exact) > 1e-6 * exact || whole_clipped != whole)
        return "the all-reduce mode's norm is " + std::to_string(whole) + ", the gradients' " +
               std::to_string(exact);
      // The same float but in a tie of the final rounding (the double sums differ only in order).
      if (shards != whole && shards != std::nextafter(whole, 0.0f) && shards != std::nextafter(whole, 1e30f))
        return "the norm over shards is " + std::to_string(shards) + ", the whole norm " +
               std::to_string(whole);
      // The clipped values, against the reference scaled on the host (one rounding to the dtype).
      const double factor = max_norm / (static_cast<double>(shards) + 1e-6);
      auto expect_scaled = [&](const std::vector<TypedBuffer>& got, size_t i, size_t j, double f) -> bool {
        TypedBuffer expect{grads[i].second, 1, 0, std::vector<unsigned char>(16)};
        expect.set(0, reference[i].get(j) * f);
        const double tolerance = grads[i].second == gcommFloat32 ? 1e-6 : 1e-2;
        return std::fabs(got[i].get(j) - expect.get(0)) <= tolerance * std::fabs(expect.get(0)) + 1e-30;
      };
      std::vector<std::vector<char>> mine(grads.size());
      for (size_t i = 0; i < grads.size(); ++i) mine[i].assign(grads[i].first, 0);
      for (const auto& bucket : pieces)
        for (const gcommShardPiece_t& p : bucket)
          for (size_t j = p.grad_offset; j < p.grad_offset + p.count; ++j) mine[p.grad][j] = 1;
      for (size_t i = 0; i < grads.size(); ++i)
        for (size_t j = 0; j < grads[i].first; ++j) {
          if (!expect_scaled(clipped_all, i, j, factor))
            return "all-reduce mode: gradient " + std::to_string(i) + " element " + std::to_string(j) +
                   " was not clipped";
          const bool ok =
              mine[i][j] ? expect_scaled(clipped, i, j, factor) : clipped[i].get(j) == inputs[rank][i].get(j);
          if (!ok)
            return "sharded mode: gradient " + std::to_string(i) + " element " + std::to_string(j) +
                   (mine[i][j] ? " (in the shard) was not clipped" : " (outside the shard) changed");
        }
      uint32_t bits;
      std::memcpy(&bits, &shards, sizeof bits);
      std::lock_guard<std::mutex> lock(m);
      sharded_bits.push_back(bits);
      return "";
    });
    ASSERT_EQ(sharded_bits.size(), static_cast<size_t>(world));
    for (uint32_t b : sharded_bits) EXPECT_EQ(b, sharded_bits[0]) << "the ranks' norms differ";
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, Sharded,
                         ::testing::Values(Where::kLocalHost, Where::kSocketHost, Where::kLocalGpu),
                         where_name);

// On the wire (the socket transport counts each rank's payload): a sharded step
// sends one reduce-scatter of the padded buckets (plus the 4-byte found-inf
// agreement and, at a reducer's first synced step, the 12-byte broadcast of rank
// 0's straggler and bucket autotune settings), about half of what the all-reduce mode's step sends, and the
// parameter all-gather sends each rank's shard to every peer.
TEST(ShardedWire, AStepSendsAReduceScatterAndTheGatherAnAllGather) {
  const Grads grads = odd_grads();
  const int world = 3;
  auto inputs = random_inputs(grads, world, 31u);
  auto comms = make_socket(world, 60.0, "sharded-wire");
  auto errors = run_rank_bodies(comms, false, [&](int rank, gcommComm_t comm, cudaStream_t) -> std::string {
    auto sent = [&](uint64_t* bytes) { return gcommCommBytesSent(comm, bytes); };
    gcommReducerConfig_t c = GCOMM_REDUCER_CONFIG_INITIALIZER;
    c.bucket_cap_bytes = 8192;
    c.rebuild_buckets = 0;  // no plan broadcast after the first step
    uint64_t b0, b1, b2, b3, b4, b5;
    std::vector<TypedBuffer> out;
    RIG_CHECK(sent(&b0));
    std::string e = one_step(comm, grads, inputs[rank], c, false, nullptr, out);
    if (!e.empty()) return e;
    RIG_CHECK(sent(&b1));
    // The found-inf agreement alone: one float, all-reduced; and the straggler and
    // bucket autotune settings every reducer takes from rank 0 at its first synced
    // step: three floats, broadcast.
    float flag = 0.0f, settings[3] = {0.0f, 0.0f, 0.0f};
    RIG_CHECK(gcommAllReduce(comm, &flag, &flag, 1, gcommFloat32, gcommMax, nullptr));
    uint64_t b_settings = 0;
    RIG_CHECK(sent(&b_settings));
    RIG_CHECK(gcommBroadcast(comm, settings, settings, 3, gcommFloat32, 0, nullptr));
    RIG_CHECK(sent(&b2));
    c.mode = gcommReducerSharded;
    std::vector<GradMem> g, p;
    std::vector<gcommTensor_t> gt, pt;
    for (size_t i = 0; i < grads.size(); ++i) {
      g.emplace_back(grads[i].second, grads[i].first, false);
      p.emplace_back(grads[i].second, grads[i].first, false);
      g.back().upload(inputs[rank][i], nullptr);
      gt.push_back(g.back().tensor());
      pt.push_back(p.back().tensor());
    }
    gcommReducer_t r = nullptr;
    RIG_CHECK(gcommReducerCreate(comm, gt.data(), gt.size(), &c, &r));
    RIG_CHECK(gcommReducerSetParams(r, pt.data(), pt.size()));
    RIG_CHECK(sent(&b3));
    RIG_CHECK(gcommReducerBeginStep(r, 1));
    for (size_t i = grads.size(); i-- > 0;) RIG_CHECK(gcommReducerMarkReady(r, i, nullptr));
    RIG_CHECK(gcommReducerFinalize(r, nullptr, nullptr));
    RIG_CHECK(sent(&b4));
    RIG_CHECK(gcommReducerAllGatherParams(r, GCOMM_ALL_BUCKETS, nullptr));
    RIG_CHECK(sent(&b5));
    gcommReducerStats_t stats;
    RIG_CHECK(gcommReducerGetStats(r, &stats));
    uint64_t shard_bytes = 0;  // one rank's shards, all buckets (wire dtype = gradient dtype here)
    for (size_t b = 0; b < stats.num_buckets; ++b) {
      gcommTensor_t shard;
      RIG_CHECK(gcommReducerGetShard(r, b, &shard, nullptr, 0, nullptr));
      shard_bytes += shard.count * elem_size(shard.dtype);
    }
    RIG_CHECK(gcommReducerDestroy(r));
    const uint64_t all_reduce = b1 - b0, agreement = b2 - b1, sharded = b4 - b3, gather = b5 - b4;
    // agreement: the found-inf max and the first step's settings broadcast (above).
    const uint64_t peers = world - 1;
    if (sharded != peers * shard_bytes + agreement)
      return "the sharded step sent " + std::to_string(sharded) + " bytes, not a reduce-scatter's " +
             std::to_string(peers * shard_bytes) + " + " + std::to_string(agreement);
    if (gather != peers * shard_bytes)
      return "the parameter all-gather sent " + std::to_string(gather) + " bytes, not " +
             std::to_string(peers * shard_bytes);
    const double ratio = static_cast<double>(sharded) / static_cast<double>(all_reduce);
    if (ratio > 0.55 || ratio < 0.45)
      return "sharded / all-reduce bytes = " + std::to_string(ratio) + " (" + std::to_string(sharded) +
             " / " + std::to_string(all_reduce) + ")";
    return "";
  });
  for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  destroy_together(comms);
}

// What sharded mode refuses, and what the all-reduce mode refuses of it.
TEST(ShardedErrors, RefusedCallsSayWhy) {
  auto comms = make_local(2);
  run_ranks(comms, [&](int, gcommComm_t comm) -> std::string {
    std::vector<float> a(10), b(10);
    gcommTensor_t t[1] = {{a.data(), 10, gcommFloat32}};
    gcommTensor_t params[1] = {{b.data(), 10, gcommFloat32}};
    gcommReducerConfig_t c = GCOMM_REDUCER_CONFIG_INITIALIZER;
    c.mode = 7;
    gcommReducer_t r = nullptr;
    EXPECT_EQ(gcommReducerCreate(comm, t, 1, &c, &r), gcommInvalidArgument);
    EXPECT_NE(std::string(gcommGetLastError()).find("mode 7 is not a gcommReducerMode_t"), std::string::npos);
    // All-reduce mode: no shards, no parameters.
    c.mode = gcommReducerAllReduce;
    EXPECT_EQ(gcommReducerCreate(comm, t, 1, &c, &r), gcommSuccess);
    size_t n = 0;
    EXPECT_EQ(gcommReducerGetShard(r, 0, nullptr, nullptr, 0, &n), gcommInvalidState);
    EXPECT_NE(std::string(gcommGetLastError()).find("sharded mode"), std::string::npos);
    EXPECT_EQ(gcommReducerSetParams(r, params, 1), gcommInvalidState);
    EXPECT_EQ(gcommReducerDestroy(r), gcommSuccess);
    // Sharded mode: PowerSGD is refused; bad shard and parameter calls change nothing.
    c.mode = gcommReducerSharded;
    EXPECT_EQ(gcommReducerCreate(comm, t, 1, &c, &r), gcommSuccess);
    size_t rows[1] = {2};
    EXPECT_EQ(gcommReducerEnableCompression(r, gcommCompressionPowerSgd, nullptr, rows), gcommNotSupported);
    EXPECT_NE(std::string(gcommGetLastError()).find("PowerSGD with sharded gradients"), std::string::npos);
    EXPECT_EQ(gcommReducerGetShard(r, 5, nullptr, nullptr, 0, &n), gcommInvalidArgument);
    EXPECT_EQ(gcommReducerAllGatherParams(r, GCOMM_ALL_BUCKETS, nullptr),
              gcommInvalidState);  // none registered
    gcommTensor_t wrong[1] = {{b.data(), 9, gcommFloat32}};
    EXPECT_EQ(gcommReducerSetParams(r, wrong, 1), gcommInvalidArgument);
    EXPECT_EQ(gcommReducerSetParams(r, params, 2), gcommInvalidArgument);
    // The norm is of a synced step's result: not before one, not after an accumulation step.
    const float* norm = nullptr;
    EXPECT_EQ(gcommReducerGradNorm(r, nullptr, &norm), gcommInvalidState);
    EXPECT_NE(std::string(gcommGetLastError()).find("synced step"), std::string::npos);
    EXPECT_EQ(gcommReducerBeginStep(r, 0), gcommSuccess);
    EXPECT_EQ(gcommReducerMarkReady(r, 0, nullptr), gcommSuccess);
    EXPECT_EQ(gcommReducerFinalize(r, nullptr, nullptr), gcommSuccess);
    EXPECT_EQ(gcommReducerClipGradNorm(r, 1.0f, nullptr, &norm), gcommInvalidState);
    EXPECT_EQ(gcommReducerBeginStep(r, 1), gcommSuccess);
    EXPECT_EQ(gcommReducerMarkReady(r, 0, nullptr), gcommSuccess);
    EXPECT_EQ(gcommReducerGradNorm(r, nullptr, &norm), gcommInvalidState);  // during the step
    EXPECT_EQ(gcommReducerFinalize(r, nullptr, nullptr), gcommSuccess);
    for (float bad : {0.0f, -1.0f, std::nanf(""), std::numeric_limits<float>::infinity()})
      EXPECT_EQ(gcommReducerClipGradNorm(r, bad, nullptr, &norm), gcommInvalidArgument) << bad;
    EXPECT_EQ(gcommReducerGradNorm(r, nullptr, &norm), gcommSuccess) << gcommGetLastError();
    EXPECT_EQ(gcommReducerDestroy(r), gcommSuccess);
    return "";
  });
  destroy(comms);
}

}  // namespace
}  // namespace gradcomm::test
