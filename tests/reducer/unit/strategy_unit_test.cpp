// Compression strategies driven call by call against a fake strategy context
// (strategy_context_fake.hpp: local-transport ranks, host memory, no Reducer): the
// all-reduce strategy's average, unscale and Inf/NaN flag, an unmarked gradient
// counting as zero, and a table-made strategy (the int8 wire) wrapping it: its
// layout, counters and state, all without the reducer's step state machine.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "reducer/strategies/allreduce.hpp"
#include "reducer/unit/strategy_context_fake.hpp"

namespace gradcomm::reducer::test {
namespace {

// Rank r's value for gradient k, element i.
float value(int r, size_t k, size_t i) {
  return static_cast<float>(r + 1) * 0.5f + static_cast<float>(k) + static_cast<float>(i % 7) * 0.125f;
}

void fill(FakeRank& rank, int r) {
  for (size_t k = 0; k < rank.data().size(); ++k)
    for (size_t i = 0; i < rank.data()[k].size(); ++i) rank.data()[k][i] = value(r, k, i);
}

TEST(StrategyUnit, AllReduceAveragesUnscalesAndFlagsOnEveryRank) {
  const std::vector<size_t> counts = {100, 37, 256};
  std::mutex m;
  std::vector<std::string> errors;
  on_local_ranks(2, [&](int r, comm::Communicator& comm) {
    FakeRank rank(comm, counts, 64);  // small cap: several buckets
    AllReduceStrategy s;
    fill(rank, r);
    const float half = 0.5f;
    rank.set_inv_scale(&half);
    rank.step(s);
    std::string e;
    for (size_t k = 0; k < counts.size() && e.empty(); ++k)
      for (size_t i = 0; i < counts[k]; ++i)
        if (const float want = (value(0, k, i) + value(1, k, i)) / 2 * 0.5f; rank.data()[k][i] != want) {
          e = "grad " + std::to_string(k) + "[" + std::to_string(i) +
              "] = " + std::to_string(rank.data()[k][i]) + ", not " + std::to_string(want);
          break;
        }
    if (e.empty() && rank.step_flag() != 0.0f) e = "a finite step raised the flag";
    fill(rank, r);
    if (r == 1) rank.data()[2][9] = std::numeric_limits<float>::quiet_NaN();
    rank.step(s);
    if (e.empty() && !(rank.step_flag() > 0.0f)) e = "rank " + std::to_string(r) + " did not see the NaN";
    std::lock_guard<std::mutex> lock(m);
    errors.push_back(e);
  });
  for (const std::string& e : errors) EXPECT_EQ(e, "");
}

TEST(StrategyUnit, AnUnmarkedGradientCountsAsZero) {
  const std::vector<size_t> counts = {50, 50};
  std::mutex m;
  std::vector<std::string> errors;
  on_local_ranks(2, [&](int r, comm::Communicator& comm) {
    FakeRank rank(comm, counts, 1 << 20);  // one bucket holds both
    AllReduceStrategy s;
    fill(rank, r);
    if (r == 1) rank.marked()[0] = 0;  // rank 1 never produced gradient 0
    const StrategyContext ctx = rank.context(s);
    s.begin_step(ctx);
    s.run_bucket(0, false, ctx);  // at finalize: the marked ones, the others zero
    s.end_step(ctx);
    std::string e;
    for (size_t i = 0; i < counts[0]; ++i)
      if (rank.data()[0][i] != value(0, 0, i) / 2) e = "gradient 0 is not rank 0's half";
    for (size_t i = 0; i < counts[1]; ++i)
      if (rank.data()[1][i] != (value(0, 1, i) + value(1, 1, i)) / 2) e = "gradient 1 is not the average";
    std::lock_guard<std::mutex> lock(m);
    errors.push_back(e);
  });
  for (const std::string& e : errors) EXPECT_EQ(e, "");
}

TEST(StrategyUnit, ATableMadeStrategyWrapsTheAllReduceAndKeepsItsOwnCountersAndState) {
  const std::vector<size_t> counts = {4096, 10};  // the 10 values: too few to save bytes, all-reduced
  std::mutex m;
  std::vector<std::string> errors;
  on_local_ranks(2, [&](int r, comm::Communicator& comm) {
    FakeRank rank(comm, counts, 4);  // one gradient per bucket
    std::string e;
    OptionText options("int8", "block_size=128");
    std::unique_ptr<CompressionStrategy> s =
        compression_entry(gcommCompressionInt8).from_text(options, rank.setup());
    s->set_layout(rank.plan());
    s->wrap(std::make_unique<AllReduceStrategy>());
    for (int t = 0; t < 2; ++t) {
      fill(rank, r);
      rank.step(*s);
    }
    const std::vector<Counter> c = s->counters();
    if (c.size() != 5 || std::string(c[0].name) != "compressed_steps" || c[0].value != 2 || c[1].value != 1)
      e = "counters: " + std::to_string(c.size()) + " of them, " +
          std::to_string(c.empty() ? 0 : c[0].value) + " steps";
    for (size_t i = 0; i < counts[1] && e.empty(); ++i)  // the small bucket: the all-reduce, exact
      if (rank.data()[1][i] != (value(0, 1, i) + value(1, 1, i)) / 2) e = "the wrapped all-reduce's bucket";
    for (size_t i = 0; i < counts[0] && e.empty(); ++i) {  // int8 codes: within 1% of the block's largest
      const float want = (value(0, 0, i) + value(1, 0, i)) / 2;
      if (std::fabs(rank.data()[0][i] - want) > 0.02f * 5.0f) e = "the int8 bucket is far from the average";
    }
    const std::vector<uint8_t> state = s->save(StatePart::kAll);
    OptionText again("int8", "block_size=128");
    std::unique_ptr<CompressionStrategy> twin =
        compression_entry(gcommCompressionInt8).from_text(again, rank.setup());
    twin->set_layout(rank.plan());
    twin->load(state.data(), state.size(), StateOrigin::kThisRank);
    if (e.empty() && twin->save(StatePart::kAll) != state) e = "a loaded state does not save as it was";
    std::lock_guard<std::mutex> lock(m);
    errors.push_back(e);
  });
  for (const std::string& e : errors) EXPECT_EQ(e, "");
}

}  // namespace
}  // namespace gradcomm::reducer::test
