#include "perf_iterations.hpp"

#include "perf_format.hpp"

#include <algorithm>
#include <cmath>

namespace {
// nccl-tests' percentile: the nearest rank, so p99 of fewer than 100 samples may be the maximum.
size_t percentile_index(size_t n, size_t percentile) {
  return std::min(n - 1, (n * percentile + 99) / 100 - 1);
}
}  // namespace

IterStats iteration_stats(const std::vector<double>& times, int skip) {
  std::vector<double> t(times.begin() + skip, times.end());
  std::sort(t.begin(), t.end());
  IterStats s;
  const size_t n = t.size();
  s.min = t.front();
  s.max = t.back();
  s.p50 = t[n / 2];
  s.p95 = t[percentile_index(n, 95)];
  s.p99 = t[percentile_index(n, 99)];
  double sum = 0;
  for (double v : t) sum += v;
  s.avg = sum / n;
  double var = 0;
  for (double v : t) var += (v - s.avg) * (v - s.avg);
  s.stdev = std::sqrt(var / n);
  return s;
}

std::vector<double> max_over_ranks(const std::vector<std::vector<double>>& rows) {
  std::vector<double> out(rows.front());
  for (const auto& row : rows)
    for (size_t i = 0; i < out.size(); ++i) out[i] = std::max(out[i], row[i]);
  return out;
}

std::string iteration_columns(const IterStats& s) {
  return "  " + fit(s.min, 7) + "  " + fit(s.max, 7) + "  " + fit(s.p99, 7) + "  " + fit(s.cv_pct(), 7);
}

nlohmann::json iteration_json(const IterStats& s, const std::vector<double>& times_us, int skip,
                              const std::vector<std::vector<double>>& rank_rows) {
  nlohmann::json j = {{"skipped_iterations", skip},
                      {"min_us", s.min},
                      {"max_us", s.max},
                      {"avg_us", s.avg},
                      {"p50_us", s.p50},
                      {"p95_us", s.p95},
                      {"p99_us", s.p99},
                      {"stdev_us", s.stdev},
                      {"cv_pct", s.cv_pct()},
                      {"times_us", times_us}};
  if (rank_rows.size() > 1) j["per_process_max_times_us"] = rank_rows;  // gradcomm: one row per rank
  return j;
}
