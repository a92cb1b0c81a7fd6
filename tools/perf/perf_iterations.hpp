// -I (per-iteration timing), as nccl-tests 2.19 reports it: every timed
// iteration's time on every rank; per iteration the maximum over the ranks; over
// those (after -K leading ones) min, max, p50, p95, p99 (nearest rank), mean,
// standard deviation and its ratio to the mean. The table gets i_min, i_max,
// i_p99 and i_cv% after each half's #wrong; the JSON an
// out_of_place_per_iter / in_place_per_iter object.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

struct IterStats {
  double min = 0, max = 0, avg = 0, p50 = 0, p95 = 0, p99 = 0, stdev = 0;
  double cv_pct() const { return avg > 0 ? stdev / avg * 100.0 : 0.0; }
};

// Stats of times[skip..] (at least one left: the options guarantee it).
IterStats iteration_stats(const std::vector<double>& times, int skip);

// Per iteration, the maximum over the ranks' rows (rank-major: rows[r][i]).
std::vector<double> max_over_ranks(const std::vector<std::vector<double>>& rows);

// The four table columns ("  i_min  i_max  i_p99  i_cv%", nccl-tests' widths).
std::string iteration_columns(const IterStats& s);

// The JSON object of one half (times in µs; per-rank rows when there are several ranks).
nlohmann::json iteration_json(const IterStats& s, const std::vector<double>& times_us, int skip,
                              const std::vector<std::vector<double>>& rank_rows);
