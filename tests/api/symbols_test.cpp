// libgradcomm.so exports only the C API, and its SONAME carries the major version.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "gradcomm/gradcomm.h"

namespace {

std::vector<std::string> run_lines(const std::string& command) {
  std::vector<std::string> lines;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return lines;
  char buf[1024];
  while (fgets(buf, sizeof(buf), pipe) != nullptr) {
    std::string line(buf);
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
    lines.push_back(line);
  }
  pclose(pipe);
  return lines;
}

TEST(Symbols, OnlyGcommSymbolsAreExported) {
  auto lines = run_lines(std::string("nm -D --defined-only '") + GRADCOMM_LIBRARY_FILE + "' 2>&1");
  ASSERT_FALSE(lines.empty()) << "nm printed nothing";
  int exported = 0;
  for (const auto& line : lines) {
    // "<address> <type> <name>"; the version node GRADCOMM_0 appears as an absolute symbol.
    auto pos = line.rfind(' ');
    ASSERT_NE(pos, std::string::npos) << line;
    std::string name = line.substr(pos + 1);
    if (name == "GRADCOMM_0") continue;
    EXPECT_EQ(name.rfind("gcomm", 0), 0u) << "unexpected exported symbol: " << line;
    ++exported;
  }
  EXPECT_GT(exported, 5);
}

TEST(Symbols, SonameCarriesTheMajorVersion) {
  auto lines = run_lines(std::string("readelf -d '") + GRADCOMM_LIBRARY_FILE + "' 2>&1");
  bool found = false;
  for (const auto& line : lines)
    if (line.find("SONAME") != std::string::npos) {
      found = true;
      EXPECT_NE(line.find("libgradcomm.so." + std::to_string(GCOMM_VERSION_MAJOR) + "]"), std::string::npos)
          << line;
    }
  EXPECT_TRUE(found);
}

}  // namespace
