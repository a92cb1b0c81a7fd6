#include "memory/size_classes.hpp"

#include <gtest/gtest.h>

namespace gradcomm {
namespace memory {
namespace {

TEST(SizeClasses, RequestsRoundTo512Bytes) {
  EXPECT_EQ(round_size(1), 512u);
  EXPECT_EQ(round_size(512), 512u);
  EXPECT_EQ(round_size(513), 1024u);
  EXPECT_EQ(round_size(kMiB + 1), kMiB + 512);
  EXPECT_EQ(round_size(kMaxRequest) % 512, 0u);
  EXPECT_GE(round_size(kMaxRequest), kMaxRequest);
}

TEST(SizeClasses, SmallAndLargePools) {
  EXPECT_TRUE(is_small(round_size(1)));
  EXPECT_TRUE(is_small(kMiB));
  EXPECT_FALSE(is_small(kMiB + 512));
}

TEST(SizeClasses, SegmentSizes) {
  EXPECT_EQ(segment_size(512), 2 * kMiB);
  EXPECT_EQ(segment_size(kMiB), 2 * kMiB);
  EXPECT_EQ(segment_size(kMiB + 512), 20 * kMiB);
  EXPECT_EQ(segment_size(10 * kMiB - 512), 20 * kMiB);
  EXPECT_EQ(segment_size(10 * kMiB), 10 * kMiB);
  EXPECT_EQ(segment_size(10 * kMiB + 512), 12 * kMiB);
  EXPECT_EQ(segment_size(101 * kMiB), 102 * kMiB);
}

TEST(SizeClasses, SplitRules) {
  // Small pool: any remainder of at least one minimal block is split off.
  EXPECT_TRUE(should_split(2 * kMiB, 512, kUnlimited));
  EXPECT_FALSE(should_split(1024, 1024, kUnlimited));
  EXPECT_TRUE(should_split(1024, 512, kUnlimited));
  // Large pool: only remainders above 1 MiB, and never for oversize requests.
  EXPECT_TRUE(should_split(20 * kMiB, 2 * kMiB, kUnlimited));
  EXPECT_FALSE(should_split(3 * kMiB, 2 * kMiB, kUnlimited));
  EXPECT_FALSE(should_split(100 * kMiB, 64 * kMiB, 64 * kMiB));
  EXPECT_TRUE(should_split(100 * kMiB, 32 * kMiB, 64 * kMiB));
}

TEST(SizeClasses, MaxSplitFit) {
  const size_t max_split = 64 * kMiB;
  EXPECT_TRUE(block_fits_max_split(40 * kMiB, 2 * kMiB, max_split));
  EXPECT_FALSE(block_fits_max_split(64 * kMiB, 2 * kMiB, max_split)) << "small request, oversize block";
  EXPECT_TRUE(block_fits_max_split(80 * kMiB, 64 * kMiB, max_split));
  EXPECT_FALSE(block_fits_max_split(84 * kMiB, 64 * kMiB, max_split)) << "wastes 20 MiB or more";
  EXPECT_TRUE(block_fits_max_split(size_t{1} << 40, kMiB, kUnlimited));
}

}  // namespace
}  // namespace memory
}  // namespace gradcomm
