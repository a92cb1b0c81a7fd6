// Command-line options of gradcomm-perf: nccl-tests' letters and long names with
// nccl-tests' meanings (2.19: -c a count of check rounds, -z 0..3, -C CPU time,
// -J a JSON file, -I per-iteration timing, -M the memory report), parsed with
// CLI11. What gradcomm cannot do (-G CUDA graphs, -R registration, -p, -x, -D,
// -V) is refused with the reason, never ignored. gradcomm's own: --collective,
// --local. docs/gradcomm-perf.md.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "gradcomm/gradcomm.h"

struct PerfOptions {
  size_t min_bytes = 8;                  // -b
  size_t max_bytes = size_t{128} << 20;  // -e
  double step_factor = 2.0;              // -f; 0 when -i is used
  size_t step_bytes = 0;                 // -i
  int threads = 1;                       // -t: threads of this process, each driving -g GPUs
  int gpus = -1;                         // -g: GPUs per thread (-1: every visible GPU, over -t threads)
  int local_ranks = 0;                   // --local N
  int iters = 20;                        // -n
  int agg_iters = 1;                     // -m: collectives per iteration, in one group
  int warmup = 5;                        // -w
  int cycles = 1;                        // -N: sweeps (0: until interrupted)
  int check = 1;                         // -c: check rounds per size (0: none, #wrong is N/A)
  int blocking = 0;                // -z: 0 none, 1 sync+barrier per call, 2 sync per call, 3 per iteration
  bool stream_null = false;        // -y: the legacy default stream
  int timeout_s = 0;               // -T: 0 keeps GRADCOMM_TIMEOUT_S (or its default)
  bool report_cputime = false;     // -C: the time to issue the calls, not to complete them
  bool report_timestamps = false;  // -S
  int average = 1;                 // -a: 0 rank 0's time, 1 the ranks' mean, 2 min, 3 max
  int unalign = 0;                 // -u: buffers start this many elements past alignment
  bool memory_report = false;      // -M: memory used by init, buffers and the sweep
  bool per_iter = false;           // -I: every iteration timed, i_* columns
  int per_iter_skip = 0;           // -K: leading iterations left out of -I's summary
  int root = 0;                    // -r
  std::vector<gcommDataType_t> dtypes{gcommFloat32};  // -d (all: every type)
  std::vector<gcommRedOp_t> ops{gcommSum};            // -o (all: every op)
  std::string collective = "all_reduce";              // --collective
  std::string json_path;                              // -J
  bool iters_given = false, warmup_given = false;
  std::vector<std::string> args;  // argv, for the JSON's "args"
};

// Parses argv; false with exit_code set (0 after --help, 2 on an error, printed).
bool parse_perf_options(int argc, char** argv, PerfOptions& o, int& exit_code);

const char* dtype_label(gcommDataType_t d);  // nccl-tests' names: "float", "half", "bfloat16"
const char* op_label(gcommRedOp_t op);       // "sum", "avg", "max", "min"
const char* average_label(int average);      // "rank0", "avg", "min", "max"
extern const char* const
    kCollectives[7];  // all_reduce, all_gather, reduce_scatter, broadcast, reduce, alltoall, sendrecv
