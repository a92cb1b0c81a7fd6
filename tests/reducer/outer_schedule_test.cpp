// Outer synchronization's schedule and fragments (reducer/outer_sync.hpp): which
// inner steps sync which fragment, and how tensors are cut into fragments.
#include <gtest/gtest.h>

#include "common/error.hpp"
#include "reducer/outer_sync.hpp"

namespace gradcomm::reducer {
namespace {

TEST(OuterSchedule, FragmentsTakeTurnsOncePerPeriodEach) {
  OuterSchedule s;
  s.sync_every = 8;
  s.fragments = 4;
  std::vector<int> due;
  for (uint64_t t = 1; t <= 16; ++t) due.push_back(s.due(t));
  EXPECT_EQ(due, (std::vector<int>{-1, 0, -1, 1, -1, 2, -1, 3, -1, 0, -1, 1, -1, 2, -1, 3}));
  s.fragments = 1;
  EXPECT_EQ(s.due(7), -1);
  EXPECT_EQ(s.due(8), 0);
  EXPECT_EQ(s.due(16), 0);
  s.sync_every = 5;
  s.fragments = 2;  // phases 2 and 5
  EXPECT_EQ(s.due(2), 0);
  EXPECT_EQ(s.due(5), 1);
  EXPECT_EQ(s.due(7), 0);
  EXPECT_EQ(s.due(10), 1);
}

TEST(OuterSchedule, FragmentsAreWholeTensorsOfAboutEqualSize) {
  using Cuts = std::vector<std::pair<size_t, size_t>>;
  EXPECT_EQ(cut_fragments({10, 10, 10, 10}, 2), (Cuts{{0, 2}, {2, 2}}));
  EXPECT_EQ(cut_fragments({100, 1, 1, 1}, 3), (Cuts{{0, 1}, {1, 1}, {2, 2}}));
  EXPECT_EQ(cut_fragments({1, 1, 1, 100}, 2), (Cuts{{0, 3}, {3, 1}}));
  EXPECT_EQ(cut_fragments({5}, 1), (Cuts{{0, 1}}));
  EXPECT_EQ(cut_fragments({0, 0, 0}, 3), (Cuts{{0, 1}, {1, 1}, {2, 1}}));
  EXPECT_THROW(cut_fragments({1, 2}, 3), Error);
}

}  // namespace
}  // namespace gradcomm::reducer
