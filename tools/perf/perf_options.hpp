// Command-line options of gradcomm-perf: nccl-tests' core flags plus gradcomm's.
#pragma once

#include <cstddef>
#include <string>

#include "gradcomm/gradcomm.h"

struct PerfOptions {
  size_t min_bytes = 8;
  size_t max_bytes = size_t{128} << 20;
  double step_factor = 2.0;  // -f; 0 when -i is used
  size_t step_bytes = 0;     // -i
  int gpus = -1;             // -g: GPUs in this process (-1: all visible)
  int local_ranks = 0;       // --local N
  int iters = 20;            // -n
  int warmup = 5;            // -w
  bool check = true;         // -c
  bool blocking = false;     // -z 1: synchronize the stream after every collective (host transports block anyway)
  int root = 0;              // -r
  int average = 1;           // -a: the time reported: 0 rank 0's, 1 the ranks' mean, 2 min, 3 max
  gcommDataType_t dtype = gcommFloat32;  // -d
  gcommRedOp_t op = gcommSum;            // -o
  std::string collective = "all_reduce";  // -C
  std::string json_path;                  // -J
  bool iters_given = false;
};

// Parses argv; on error or -h prints to stderr/stdout and returns false with exit_code set.
bool parse_perf_options(int argc, char** argv, PerfOptions& o, int& exit_code);
const char* dtype_label(gcommDataType_t d);
const char* average_label(int average);  // "rank0", "avg", "min", "max"
