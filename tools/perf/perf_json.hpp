// gradcomm-perf's -J file, in nccl-tests' layout (2.19, JSON file version 3):
//   {"version", "start_time", "args", "env", "nccl_version",
//    "config": {"nthreads", "ngpus", "minimum_bytes", ..., "devices": [{"rank",
//               "group", "pid", "hostname", "device", "device_hex", "device_info"}]},
//    "results": [{"size", "count", "type", "redop", "root",
//                 "out_of_place": {"time" | "cpu_time", "alg_bw", "bus_bw", "nwrong"},
//                 "in_place": {...}, "actual_iterations", "experiment_name"}],
//    "out_of_bounds": {"count", "okay"}, "average_bus_bandwidth": {"bandwidth", "okay"},
//    "errors": [], "end_time"}
// with nccl-tests' quirks kept for the tools that read its files: booleans are the
// strings "true"/"false", "root" is the 6-wide text of the table's column, and
// "nwrong" is a number (null with -c 0). gradcomm adds one key, "gradcomm"
// (transport, ranks, each rank's times). Written with nlohmann-json; the file is
// rewritten after every row, so it is valid JSON with every row so far even if a
// later size fails.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>

class PerfJson {
 public:
  // Creates the file exclusively, as nccl-tests does: if `path` exists, path.0,
  // path.1, ... (nothing is overwritten). False with `error` set when no file can
  // be created there (checked before the sweep starts).
  bool create(const std::string& path, std::string& error);
  bool active() const { return !path_.empty(); }
  const std::string& path() const { return path_; }

  nlohmann::json& doc() { return doc_; }
  void add_result(nlohmann::json row);
  // Rewrites the file with the document as it stands; false (and a message on
  // stderr, once) when writing fails.
  bool flush();

  static std::string now();  // "%Y-%m-%d %H:%M:%S", local time, as nccl-tests
  static const char* flag(bool b) { return b ? "true" : "false"; }

 private:
  std::string path_;
  nlohmann::json doc_ = nlohmann::json::object();
  bool warned_ = false;
};
