#include <gtest/gtest.h>

#include "comm/nccl/nccl_check.hpp"

namespace gradcomm {
namespace {

TEST(NcclVersion, LoadedVersionIsKnownAndFormatted) {
  EXPECT_GT(nccl_loaded_version(), 20000);
  EXPECT_EQ(nccl_built_version(), NCCL_VERSION_CODE);
  EXPECT_EQ(nccl_version_string(22809), "2.28.9");
}

TEST(NcclVersion, FeaturesAreGatedByTheLoadedVersion) {
  for (auto f : {NcclFeature::kNonBlockingInit, NcclFeature::kCommSplit, NcclFeature::kCommShrink}) {
    bool expected = nccl_loaded_version() >= nccl_feature_min_version(f) &&
                    nccl_built_version() >= nccl_feature_min_version(f);
    EXPECT_EQ(nccl_has(f), expected) << nccl_feature_name(f);
  }
}

TEST(NcclCheck, FailureBecomesAnErrorWithTheCallSite) {
  try {
    GCOMM_NCCL_CHECK(ncclInvalidArgument);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), gcommInvalidArgument);
    EXPECT_NE(e.message().find("nccl_version_test.cpp"), std::string::npos) << e.message();
  }
  try {
    GCOMM_NCCL_CHECK(ncclSystemError);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), gcommNcclError);
  }
}

}  // namespace
}  // namespace gradcomm
