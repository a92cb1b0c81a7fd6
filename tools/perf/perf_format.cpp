#include "perf_format.hpp"

#include <cmath>
#include <cstdio>

std::string fit(double v, int width) {
  char buf[64];
  for (const char* f : {"%*.2f", "%*.1f", "%*.0f"})
    if (std::snprintf(buf, sizeof(buf), f, width, v) <= width) return buf;
  std::snprintf(buf, sizeof(buf), width >= 7 ? "%*.1e" : "%*.0e", width, v);
  return buf;
}

std::string memory_text(int64_t bytes) {
  double amount = static_cast<double>(bytes);
  const char* unit = " B";
  for (const char* u : {" KB", " MB", " GB"}) {
    if (std::fabs(amount) < 1024.0) break;
    amount /= 1024.0;
    unit = u;
  }
  const int decimals = std::fabs(amount) < 10.0 ? 2 : std::fabs(amount) < 100.0 ? 1 : 0;
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f%s", unit[1] == 'B' ? 0 : decimals, amount, unit);
  return buf;
}
