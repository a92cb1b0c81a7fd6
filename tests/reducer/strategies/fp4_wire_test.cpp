// The fp4 wire (gcommReducerEnableCompression with gcommCompressionFp4): every rank's
// result equals the single-process model of the algorithm with e2m1 codes bit for
// bit (local and socket transports, GPU 0 where one is present; an odd block count
// and a bucket too small to quantize), the bytes are about half the int8 wire's,
// the text form's state is the struct's (an int8 or fp8 state refused), and the
// refusals. An Inf/NaN step and the state's round trip are the strategy contract's
// (tests/reducer/unit/strategy_contract_test.cpp).
#include <string>
#include <vector>

#include "kernels/quant/fp4.hpp"
#include "reducer/strategies/block_wire_model.hpp"

namespace gradcomm::test {
namespace {

namespace kq = kernels::quant;
using Fp4Wire = WhereRig;

std::string enable(gcommReducer_t r, int block) {
  gcommFp4Config_t c = GCOMM_FP4_CONFIG_INITIALIZER;
  c.block_size = block;
  RIG_CHECK(gcommReducerEnableCompression(r, gcommCompressionFp4, &c, nullptr));
  return "";
}

TEST_P(Fp4Wire, EveryRankGetsTheSingleProcessModelsResultBitForBit) {
  const std::vector<size_t> sizes = {1000, 37, 5001};
  for (size_t block : {32u, 64u})
    for (int world : {1, 3}) {
      const int steps = 3;
      const StepInputs inputs = random_inputs(steps, world, sizes);
      const auto expected = model_results(kq::fp4_e2m1_codec(), world, sizes, block, inputs);
      run(world, [&](int rank, gcommComm_t comm, cudaStream_t stream) -> std::string {
        std::string e;
        RankReducer rr(comm, sizes, gpu(), one_grad_per_bucket(), &e);
        if (!e.empty()) return e;
        if (!(e = enable(rr.r, static_cast<int>(block))).empty()) return e;
        for (int t = 0; t < steps; ++t) {
          std::vector<std::vector<float>> out;
          if (!(e = rr.step(inputs[t][rank], stream, &out)).empty()) return e;
          for (size_t k = 0; k < sizes.size(); ++k) {
            if (!is_quantized(sizes[k], world, block, 4)) continue;  // the f32 all-reduce
            if (!same_bits(out[k], expected[t][k]))
              return "block " + std::to_string(block) + ", world " + std::to_string(world) + ", step " +
                     std::to_string(t) + ", grad " + std::to_string(k) + ": differs from the model";
          }
        }
        return "";
      });
    }
}

TEST_P(Fp4Wire, TheBytesAreAboutHalfTheInt8Wires) {
  const std::vector<size_t> sizes = {4096, 1024};
  run(2, [&](int rank, gcommComm_t comm, cudaStream_t stream) -> std::string {
    std::string e;
    RankReducer fp4(comm, sizes, gpu(), one_grad_per_bucket(), &e),
        int8(comm, sizes, gpu(), one_grad_per_bucket(), &e);
    if (!e.empty()) return e;
    if (!(e = enable(fp4.r, 64)).empty()) return e;
    RIG_CHECK(gcommReducerEnableCompressionText(int8.r, "int8:block_size=64", nullptr));
    std::vector<std::vector<float>> in = {randoms(4096, 5 + rank), randoms(1024, 7 + rank)}, out;
    if (!(e = fp4.step(in, stream, &out)).empty()) return e;
    if (!(e = int8.step(in, stream, &out)).empty()) return e;
    gcommFp4Stats_t st = GCOMM_FP4_STATS_INITIALIZER;
    gcommInt8Stats_t st8 = GCOMM_INT8_STATS_INITIALIZER;
    RIG_CHECK(gcommReducerGetCompressionStats(fp4.r, gcommCompressionFp4, &st));
    RIG_CHECK(gcommReducerGetCompressionStats(int8.r, gcommCompressionInt8, &st8));
    // Per value: half a byte plus a 4-byte scale per 64 values, against 4 bytes.
    const double ratio =
        static_cast<double>(st.bytes_last_step) / static_cast<double>(st.f32_allreduce_bytes);
    const double expected = (0.5 + 4.0 / 64) / 4;
    if (st.compressed_buckets != 2 || st.compressed_steps != 1 || std::abs(ratio - expected) > 1e-9)
      return "bytes ratio " + std::to_string(ratio) + ", expected " + std::to_string(expected);
    if (st.bytes_last_step * 17 != st8.bytes_last_step * 9)  // a block of 64: 36 bytes against 68
      return "against int8: " + std::to_string(st.bytes_last_step) + " and " +
             std::to_string(st8.bytes_last_step);
    return "";
  });
}

TEST_P(Fp4Wire, TheTextFormsStateIsTheStructsAndAnotherWiresIsRefused) {
  const std::vector<size_t> sizes = {2048};
  run(2, [&](int rank, gcommComm_t comm, cudaStream_t stream) -> std::string {
    std::string e;
    RankReducer first(comm, sizes, gpu(), one_grad_per_bucket(), &e),
        second(comm, sizes, gpu(), one_grad_per_bucket(), &e);
    RankReducer int8(comm, sizes, gpu(), one_grad_per_bucket(), &e),
        fp8(comm, sizes, gpu(), one_grad_per_bucket(), &e);
    if (!e.empty()) return e;
    if (!(e = enable(first.r, 64)).empty()) return e;
    RIG_CHECK(gcommReducerEnableCompressionText(second.r, "fp4:block_size=64", nullptr));
    RIG_CHECK(gcommReducerEnableCompressionText(int8.r, "int8:block_size=64", nullptr));
    RIG_CHECK(gcommReducerEnableCompressionText(fp8.r, "fp8:block_size=64", nullptr));
    std::vector<std::vector<float>> out;
    if (!(e = first.step({randoms(2048, 9 + rank)}, stream, &out)).empty()) return e;
    std::vector<uint8_t> state, reloaded;
    if (!(e = saved_state(first.r, &state)).empty()) return e;
    RIG_CHECK(gcommReducerLoadCompressionState(second.r, state.data(), state.size()));
    if (!(e = saved_state(second.r, &reloaded)).empty()) return e;
    if (reloaded != state) return "the text-enabled twin did not take the state as saved";
    for (RankReducer* wrong : {&int8, &fp8})
      if (gcommReducerLoadCompressionState(wrong->r, state.data(), state.size()) != gcommInvalidArgument ||
          std::string(gcommGetLastError()).find("wrong magic") == std::string::npos)
        return std::string("an fp4 state was not refused: ") + gcommGetLastError();
    return "";
  });
}

TEST_P(Fp4Wire, BadConfigurationsAreRefusedWithTheReason) {
  run(1, [&](int, gcommComm_t comm, cudaStream_t) -> std::string {
    std::string e;
    RankReducer rr(comm, {1024}, gpu(), one_grad_per_bucket(), &e);
    if (!e.empty()) return e;
    gcommFp4Config_t c = GCOMM_FP4_CONFIG_INITIALIZER;
    c.block_size = 16;
    if (!(e = refused(gcommReducerEnableCompression(rr.r, gcommCompressionFp4, &c, nullptr),
                      gcommInvalidArgument, "power of two"))
             .empty())
      return e;
    if (!(e = refused(gcommReducerEnableCompressionText(rr.r, "fp4:format=int4", nullptr),
                      gcommInvalidArgument, "format"))
             .empty())
      return e;
    gcommCompression_t kind = gcommCompressionInt8;
    RIG_CHECK(gcommReducerGetCompression(rr.r, &kind));
    if (kind != gcommCompressionNone) return "a refused enable left a compression on";
    RIG_CHECK(gcommReducerEnableCompressionText(rr.r, "fp4", nullptr));
    RIG_CHECK(gcommReducerGetCompression(rr.r, &kind));
    return kind == gcommCompressionFp4 ? "" : "fp4 by name was not enabled";
  });
}

INSTANTIATE_TEST_SUITE_P(, Fp4Wire,
                         ::testing::Values(Where::kLocalHost, Where::kSocketHost, Where::kLocalGpu),
                         where_name);

}  // namespace
}  // namespace gradcomm::test
