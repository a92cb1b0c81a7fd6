// Where NCCL is looked for (comm/nccl/nccl_search.hpp) and what loading it gives.
#include <gtest/gtest.h>

#include "comm/nccl/nccl_library.hpp"
#include "comm/nccl/nccl_search.hpp"
#include "common/error.hpp"

namespace gradcomm {
namespace {

std::vector<std::string> files(const std::vector<NcclCandidate>& list) {
  std::vector<std::string> out;
  for (const auto& c : list) out.push_back(c.file);
  return out;
}

GlobFiles no_files() {
  return [](const std::string&) { return std::vector<std::string>{}; };
}

TEST(NcclSearch, AlreadyLoadedFirstThenRootsWheelLoaderEnvironmentsBuild) {
  NcclSearchPlaces p;
  p.roots = {{"NCCL_ROOT", "/r"}, {"NCCL_HOME", "/h"}};
  p.own_folder = "/sp/gradcomm";
  p.environments = {{"VIRTUAL_ENV", "/venv"}};
  p.build_folder = "/usr/local/cuda/lib";
  std::vector<std::string> globbed;
  auto list = nccl_candidates(p, [&](const std::string& pattern) {
    globbed.push_back(pattern);
    return std::vector<std::string>{"/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2"};
  });
  EXPECT_EQ(files(list),
            (std::vector<std::string>{"libnccl.so.2", "/r/lib/libnccl.so.2", "/r/lib64/libnccl.so.2",
                                      "/h/lib/libnccl.so.2", "/h/lib64/libnccl.so.2",
                                      "/sp/gradcomm/../nvidia/nccl/lib/libnccl.so.2", "libnccl.so.2",
                                      "/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2",
                                      "/usr/local/cuda/lib/libnccl.so.2"}));
  EXPECT_TRUE(list[0].already_loaded);
  for (size_t i = 1; i < list.size(); ++i) {
    EXPECT_FALSE(list[i].already_loaded) << i;
    EXPECT_FALSE(list[i].final) << i;
  }
  EXPECT_EQ(globbed,
            (std::vector<std::string>{"/venv/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2"}));
  EXPECT_EQ(list[1].where, "NCCL_ROOT=/r");
}

TEST(NcclSearch, AnExplicitFileIsTheOnlyPlaceAfterTheProcessOwn) {
  NcclSearchPlaces p;
  p.explicit_file = "/opt/nccl/libnccl.so.2";
  p.roots = {{"NCCL_ROOT", "/r"}};
  p.build_folder = "/b";
  auto list = nccl_candidates(p, no_files());
  ASSERT_EQ(list.size(), 2u);
  EXPECT_TRUE(list[0].already_loaded);
  EXPECT_EQ(list[1].file, "/opt/nccl/libnccl.so.2");
  EXPECT_TRUE(list[1].final) << "no silent fallback from the user's explicit choice";
}

TEST(NcclSearch, AFolderNamedTwiceIsTriedOnce) {
  NcclSearchPlaces p;
  p.roots = {{"NCCL_ROOT", "/same"}, {"NCCL_HOME", "/same"}};
  p.build_folder = "/same/lib";
  auto list = nccl_candidates(p, no_files());
  EXPECT_EQ(files(list), (std::vector<std::string>{"libnccl.so.2", "/same/lib/libnccl.so.2",
                                                   "/same/lib64/libnccl.so.2", "libnccl.so.2"}));
}

// On this machine the build's NCCL is found; where none is (tools/check_without_nccl.sh
// hides it) the same call fails with every place named.
TEST(NcclLibrary, LoadsOrExplainsWhy) {
  std::string why;
  const NcclLibrary* lib = nccl_if_loaded(&why);
  if (lib == nullptr) {
    EXPECT_NE(why.find("Searched, in order"), std::string::npos) << why;
    EXPECT_THROW(nccl(), Error);
    return;
  }
  EXPECT_GE(lib->version, 21000);
  EXPECT_FALSE(lib->path.empty());
  EXPECT_NE(lib->AllReduce, nullptr);
  EXPECT_NE(lib->GroupEnd, nullptr);
  EXPECT_EQ(&nccl(), lib);
  EXPECT_NE(lib->last_error(nullptr), nullptr);
}

}  // namespace
}  // namespace gradcomm
