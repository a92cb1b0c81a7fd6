// The fp8 wire (gcommReducerEnableCompression with gcommCompressionFp8), both
// formats: every rank's result equals the single-process model of the algorithm
// with fp8 codes bit for bit (local and socket transports, GPU 0 where one is
// present), the bytes equal the int8 wire's, the text form's state is the struct's
// (another format's refused), and the refusals. An Inf/NaN step and the state's
// round trip are the strategy contract's (tests/reducer/unit/strategy_contract_test.cpp).
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/quant/fp8.hpp"
#include "reducer/strategies/block_wire_model.hpp"

namespace gradcomm::test {
namespace {

namespace kq = kernels::quant;
using Fp8Wire = WhereRig;

std::string enable(gcommReducer_t r, int format, int block = 128) {
  gcommFp8Config_t c = GCOMM_FP8_CONFIG_INITIALIZER;
  c.format = format;
  c.block_size = block;
  RIG_CHECK(gcommReducerEnableCompression(r, gcommCompressionFp8, &c, nullptr));
  return "";
}

TEST_P(Fp8Wire, EveryRankGetsTheSingleProcessModelsResultBitForBit) {
  const std::vector<size_t> sizes = {1000, 37, 5000};
  for (int format : {gcommFp8E4M3, gcommFp8E5M2}) {
    const kq::Codec& codec = format == gcommFp8E4M3 ? kq::fp8_e4m3_codec() : kq::fp8_e5m2_codec();
    for (int world : {1, 3}) {
      const int steps = 3;
      const StepInputs inputs = random_inputs(steps, world, sizes);
      const auto expected = model_results(codec, world, sizes, 128, inputs);
      run(world, [&](int rank, gcommComm_t comm, cudaStream_t stream) -> std::string {
        std::string e;
        RankReducer rr(comm, sizes, gpu(), one_grad_per_bucket(), &e);
        if (!e.empty()) return e;
        if (!(e = enable(rr.r, format)).empty()) return e;
        for (int t = 0; t < steps; ++t) {
          std::vector<std::vector<float>> out;
          if (!(e = rr.step(inputs[t][rank], stream, &out)).empty()) return e;
          for (size_t k = 0; k < sizes.size(); ++k) {
            if (!is_quantized(sizes[k], world, 128)) continue;  // the f32 all-reduce (the int8 wire's rule)
            if (!same_bits(out[k], expected[t][k]))
              return std::string(codec.name) + ", world " + std::to_string(world) + ", step " +
                     std::to_string(t) + ", grad " + std::to_string(k) + ": differs from the model";
          }
        }
        return "";
      });
    }
  }
}

TEST_P(Fp8Wire, TheBytesAreTheInt8Wires) {
  const std::vector<size_t> sizes = {4096, 1000};
  run(2, [&](int rank, gcommComm_t comm, cudaStream_t stream) -> std::string {
    std::string e;
    RankReducer rr(comm, sizes, gpu(), one_grad_per_bucket(), &e);
    if (!e.empty()) return e;
    if (!(e = enable(rr.r, gcommFp8E5M2)).empty()) return e;
    std::vector<std::vector<float>> in = {randoms(4096, 5 + rank), randoms(1000, 7 + rank)}, out;
    if (!(e = rr.step(in, stream, &out)).empty()) return e;
    gcommFp8Stats_t st = GCOMM_FP8_STATS_INITIALIZER;
    RIG_CHECK(gcommReducerGetCompressionStats(rr.r, gcommCompressionFp8, &st));
    const double ratio =
        static_cast<double>(st.bytes_last_step) / static_cast<double>(st.f32_allreduce_bytes);
    if (st.compressed_buckets != 2 || !(ratio > 0.25 && ratio < 0.27))
      return "bytes ratio " + std::to_string(ratio);
    return "";
  });
}

TEST_P(Fp8Wire, TheTextFormsStateIsTheStructsAndAnotherFormatsIsRefused) {
  const std::vector<size_t> sizes = {2048};
  run(2, [&](int rank, gcommComm_t comm, cudaStream_t stream) -> std::string {
    std::string e;
    RankReducer first(comm, sizes, gpu(), one_grad_per_bucket(), &e),
        second(comm, sizes, gpu(), one_grad_per_bucket(), &e);
    RankReducer other(comm, sizes, gpu(), one_grad_per_bucket(), &e),
        int8(comm, sizes, gpu(), one_grad_per_bucket(), &e);
    if (!e.empty()) return e;
    if (!(e = enable(first.r, gcommFp8E4M3)).empty()) return e;
    RIG_CHECK(gcommReducerEnableCompressionText(second.r, "fp8:format=e4m3,block_size=128", nullptr));
    RIG_CHECK(gcommReducerEnableCompressionText(other.r, "fp8:format=e5m2,block_size=128", nullptr));
    RIG_CHECK(gcommReducerEnableCompressionText(int8.r, "int8:block_size=128", nullptr));
    std::vector<std::vector<float>> out;
    if (!(e = first.step({randoms(2048, 9 + rank)}, stream, &out)).empty()) return e;
    std::vector<uint8_t> state, reloaded;
    if (!(e = saved_state(first.r, &state)).empty()) return e;
    RIG_CHECK(gcommReducerLoadCompressionState(second.r, state.data(), state.size()));
    if (!(e = saved_state(second.r, &reloaded)).empty()) return e;
    if (reloaded != state) return "the text-enabled twin did not take the state as saved";
    for (RankReducer* wrong : {&other, &int8})
      if (gcommReducerLoadCompressionState(wrong->r, state.data(), state.size()) != gcommInvalidArgument ||
          std::string(gcommGetLastError()).find("wrong magic") == std::string::npos)
        return std::string("an e4m3 state was not refused: ") + gcommGetLastError();
    return "";
  });
}

TEST_P(Fp8Wire, BadConfigurationsAreRefusedWithTheReason) {
  run(1, [&](int, gcommComm_t comm, cudaStream_t) -> std::string {
    std::string e;
    RankReducer rr(comm, {1024}, gpu(), one_grad_per_bucket(), &e);
    if (!e.empty()) return e;
    gcommFp8Config_t c = GCOMM_FP8_CONFIG_INITIALIZER;
    c.format = 2;
    if (!(e = refused(gcommReducerEnableCompression(rr.r, gcommCompressionFp8, &c, nullptr),
                      gcommInvalidArgument, "gcommFp8E4M3, gcommFp8E5M2"))
             .empty())
      return e;
    c = GCOMM_FP8_CONFIG_INITIALIZER;
    c.reserved_v1 = 1;
    if (!(e = refused(gcommReducerEnableCompression(rr.r, gcommCompressionFp8, &c, nullptr),
                      gcommInvalidArgument, "reserved_v1"))
             .empty())
      return e;
    if (!(e = refused(gcommReducerEnableCompressionText(rr.r, "fp8:format=e3m4", nullptr),
                      gcommInvalidArgument, "not one of e4m3, e5m2"))
             .empty())
      return e;
    if (!(e = refused(gcommReducerEnableCompressionText(rr.r, "fp8:block_size=48", nullptr),
                      gcommInvalidArgument, "power of two"))
             .empty())
      return e;
    gcommCompression_t kind = gcommCompressionInt8;
    RIG_CHECK(gcommReducerGetCompression(rr.r, &kind));
    if (kind != gcommCompressionNone) return "a refused enable left a compression on";
    RIG_CHECK(gcommReducerEnableCompressionText(rr.r, "fp8", nullptr));
    RIG_CHECK(gcommReducerGetCompression(rr.r, &kind));
    return kind == gcommCompressionFp8 ? "" : "fp8 by name was not enabled";
  });
}

INSTANTIATE_TEST_SUITE_P(, Fp8Wire,
                         ::testing::Values(Where::kLocalHost, Where::kSocketHost, Where::kLocalGpu),
                         where_name);

}  // namespace
}  // namespace gradcomm::test
