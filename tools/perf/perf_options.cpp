#include "perf_options.hpp"

#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>

const char* const kCollectives[7] = {"all_reduce", "all_gather", "reduce_scatter", "broadcast",
                                     "reduce",     "alltoall",   "sendrecv"};

namespace {

// Sizes above this cannot be buffers (GCOMM_ADDRESS_LIMIT): refused, not wrapped.
constexpr double kMaxSize = static_cast<double>(GCOMM_ADDRESS_LIMIT);

// A byte count: a number (decimal point and exponent allowed) with an optional
// K/M/G suffix (nccl-tests' parsesize), finite, >= 0 and below kMaxSize.
size_t parse_size(const std::string& flag, const std::string& text) {
  const char* s = text.c_str();
  char* end = nullptr;
  double v = std::strtod(s, &end);
  const std::string what = flag + ": '" + text + "' ";
  if (end == s)
    throw CLI::ValidationError(what + "is not a size (a number of bytes, optionally with K, M or G)");
  switch (*end) {
    case 'K':
    case 'k':
      v *= 1024.0;
      ++end;
      break;
    case 'M':
    case 'm':
      v *= 1024.0 * 1024;
      ++end;
      break;
    case 'G':
    case 'g':
      v *= 1024.0 * 1024 * 1024;
      ++end;
      break;
    default:
      break;
  }
  if (*end != '\0')
    throw CLI::ValidationError(what + "is not a size (a number of bytes, optionally with K, M or G)");
  if (!std::isfinite(v)) throw CLI::ValidationError(what + "is not a finite size");
  if (v < 0) throw CLI::ValidationError(what + "is negative");
  if (v >= kMaxSize) throw CLI::ValidationError(what + "is larger than any buffer can be (2^57 bytes)");
  return static_cast<size_t>(v);
}

std::vector<gcommDataType_t> parse_dtypes(const std::string& d) {
  if (d == "all") return {gcommFloat32, gcommFloat16, gcommBfloat16};
  if (d == "float" || d == "f32" || d == "float32") return {gcommFloat32};
  if (d == "half" || d == "f16" || d == "float16") return {gcommFloat16};
  if (d == "bfloat16" || d == "bf16") return {gcommBfloat16};
  if (d == "double" || d == "int8" || d == "uint8" || d == "int32" || d == "uint32" || d == "int64" ||
      d == "uint64" || d == "f8e4m3" || d == "f8e5m2")
    throw CLI::ValidationError("-d " + d + ": gradcomm reduces float, half and bfloat16 gradients only");
  throw CLI::ValidationError("-d " + d + ": unknown datatype (float, half, bfloat16 or all)");
}

std::vector<gcommRedOp_t> parse_ops(const std::string& o) {
  if (o == "all") return {gcommSum, gcommAvg, gcommMax, gcommMin};
  if (o == "sum") return {gcommSum};
  if (o == "avg") return {gcommAvg};
  if (o == "max") return {gcommMax};
  if (o == "min") return {gcommMin};
  if (o == "prod" || o == "mulsum")
    throw CLI::ValidationError("-o " + o +
                               ": gradcomm has sum, avg, max and min (gradients are never multiplied)");
  throw CLI::ValidationError("-o " + o + ": unknown op (sum, avg, max, min or all)");
}

// An nccl-tests option gradcomm cannot honour: 0 is accepted (the default), any
// other value is refused with `why`.
struct Refused {
  const char* flags;
  const char* why;
  int value = 0;
};

const char* kFooter =
    "\nWith no arguments: all-reduce from 8 B to 128 MiB by factors of 2 on all visible GPUs;\n"
    "without a GPU, 2 host ranks on the local transport. The collective is --collective (one\n"
    "program serves every collective, where nccl-tests has one program each; -C means CPU time\n"
    "as in nccl-tests).\n"
    "Under a launcher (torchrun, mpirun, srun: a world size above 1), each process is one rank:\n"
    "gcommCommInitFromEnv on the GPU of its local rank (modulo the visible GPUs): NCCL, or\n"
    "cuda-ipc when every process is on one GPU; without a GPU, the shm\n"
    "transport between processes of one host (socket across hosts, or GRADCOMM_TRANSPORT);\n"
    "srun and single-host mpirun need no MASTER_ADDR.\n"
    "Rank 0 prints each row as it completes.\n";

}  // namespace

const char* average_label(int average) {
  static const char* const names[] = {"rank0", "avg", "min", "max"};
  return average >= 0 && average <= 3 ? names[average] : "?";
}

const char* dtype_label(gcommDataType_t d) {
  return d == gcommFloat16 ? "half" : d == gcommBfloat16 ? "bfloat16" : "float";
}

const char* op_label(gcommRedOp_t op) {
  return op == gcommAvg ? "avg" : op == gcommMax ? "max" : op == gcommMin ? "min" : "sum";
}

bool parse_perf_options(int argc, char** argv, PerfOptions& o, int& exit_code) {
  CLI::App app{"gradcomm-perf: collective bandwidth, with nccl-tests' options and table", "gradcomm-perf"};
  app.footer(kFooter);
  app.get_formatter()->column_width(34);
  // An option given twice: the last wins, as with nccl-tests' getopt.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  std::string minb, maxb, stepb, factor, dtype = "float", op = "sum";
  int parallel_init = 0;
  app.add_option("-t,--nthreads", o.threads, "threads of this process, each driving -g GPUs (default 1)")
      ->check(CLI::Range(1, 1024));
  app.add_option("-g,--ngpus", o.gpus, "GPUs per thread (default: every visible GPU)")
      ->check(CLI::Range(1, 1024));
  app.add_option("-b,--minbytes", minb, "smallest size (default 8; K/M/G suffixes)");
  app.add_option("-e,--maxbytes", maxb, "largest size (default 128M)");
  app.add_option("-i,--stepbytes", stepb, "add this many bytes each step (instead of -f)");
  app.add_option("-f,--stepfactor", factor, "multiply the size by this each step (default 2)");
  app.add_option("-n,--iters", o.iters, "timed iterations per size (default 20; 5 on the host)")
      ->check(CLI::Range(1, 1000000000));
  app.add_option("-m,--agg_iters", o.agg_iters, "collectives per iteration, issued in one group (default 1)")
      ->check(CLI::Range(1, 1000000));
  app.add_option("-w,--warmup_iters", o.warmup, "warm-up iterations (default 5; 1 on the host)")
      ->check(CLI::Range(0, 1000000000));
  app.add_option("-N,--run_cycles", o.cycles, "sweeps to run and print (default 1; 0: until interrupted)")
      ->check(CLI::Range(0, 1000000000));
  app.add_option("-c,--check", o.check, "check rounds per size, each on fresh data (default 1; 0: no check)")
      ->check(CLI::Range(0, 1000000));
  app.add_option("-o,--op", op, "sum, avg, max, min or all (default sum)");
  app.add_option("-d,--datatype", dtype, "float, half, bfloat16 or all (default float)");
  app.add_option("-r,--root", o.root, "root of broadcast and reduce (default 0)")
      ->check(CLI::Range(0, 1 << 30));
  app.add_option("-z,--blocking", o.blocking,
                 "1: wait and barrier after each call; 2: wait after each call; 3: wait and barrier after "
                 "each iteration, the barrier not timed (default 0)")
      ->check(CLI::Range(0, 3));
  app.add_option("-y,--stream_null", o.stream_null, "1: issue on the legacy default stream (default 0)");
  app.add_option("-T,--timeout", o.timeout_s,
                 "seconds before a stuck collective fails (default GRADCOMM_TIMEOUT_S)")
      ->check(CLI::Range(0, 1 << 30));
  app.add_option("-C,--report_cputime", o.report_cputime,
                 "1: report the time to issue the calls (default 0)");
  app.add_option("-S,--report_timestamps", o.report_timestamps, "1: a timestamp after each row (default 0)");
  app.add_option("-J,--output_file", o.json_path, "also write the results as JSON, in nccl-tests' layout");
  app.add_option("-a,--average", o.average,
                 "time reported: 0 rank 0's, 1 the ranks' mean, 2 min, 3 max (default 1)")
      ->check(CLI::Range(0, 3));
  app.add_option("-u,--unalign", o.unalign, "buffers start this many elements past alignment (default 0)")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("-p,--parallel_init", parallel_init,
                 "0 only: gradcomm creates a process's ranks in one call");
  std::vector<Refused> refused = {
      {"-G,--cudagraph",
       "CUDA graph capture of gradcomm's collectives is not supported (each call records a "
       "watchdog event and may allocate); run without -G"},
      {"-R,--local_register", "gradcomm does not register buffers with NCCL"},
      {"-x,--cta_policy", "gradcomm does not set NCCL's CTA policy"},
      {"-D,--device_implementation", "gradcomm has no device-side collectives"},
      {"-V,--device_cta_count", "gradcomm has no device-side collectives"},
  };
  int memory = 0, per_iter = 0;
  app.add_option("-M,--memory", memory,
                 "1: report the memory used by init, buffers and the sweep (default 0)")
      ->check(CLI::Range(0, 1));
  app.add_option(
         "-I,--per_iter_timing", per_iter,
         "1: time every iteration; i_min, i_max, i_p99, i_cv% columns over the ranks' maximum (default 0)")
      ->check(CLI::Range(0, 1));
  app.add_option("-K,--per_iter_skip", o.per_iter_skip,
                 "leading iterations left out of -I's summary (default 0)")
      ->check(CLI::Range(0, 1000000000));
  for (Refused& r : refused) app.add_option(r.flags, r.value, std::string("refused unless 0: ") + r.why);
  app.add_option("--collective", o.collective,
                 "all_reduce, all_gather, reduce_scatter, broadcast, reduce, alltoall or sendrecv "
                 "(nccl-tests' program names)")
      ->check(CLI::IsMember(std::vector<std::string>(std::begin(kCollectives), std::end(kCollectives))));
  app.add_option("--local", o.local_ranks, "N ranks as threads on the local transport (GPU 0, or the host)")
      ->check(CLI::Range(1, 1024));
  try {
    app.parse(argc, argv);
    for (const Refused& r : refused)
      if (r.value != 0)
        throw CLI::ValidationError(std::string(r.flags).substr(0, 2) + " " + std::to_string(r.value) + ": " +
                                   r.why);
    if (parallel_init != 0)
      throw CLI::ValidationError("-p " + std::to_string(parallel_init) +
                                 ": gradcomm creates this process's ranks in one call (there is no "
                                 "per-thread init to run in parallel)");
    o.memory_report = memory == 1;
    o.per_iter = per_iter == 1;
    if (o.per_iter_skip > 0 && !o.per_iter)
      throw CLI::ValidationError("-K " + std::to_string(o.per_iter_skip) + ": per-iteration skip needs -I 1");
    if (!minb.empty()) o.min_bytes = parse_size("-b", minb);
    if (!maxb.empty()) o.max_bytes = parse_size("-e", maxb);
    if (!factor.empty()) {
      char* end = nullptr;
      const double f = std::strtod(factor.c_str(), &end);
      if (end == factor.c_str() || *end != '\0' || !std::isfinite(f) || !(f > 1.0))
        throw CLI::ValidationError("-f: '" + factor + "' is not a step factor (a finite number > 1)");
      o.step_factor = f;
    }
    if (!stepb.empty()) {
      if (!factor.empty()) throw CLI::ValidationError("-i and -f: give one way of stepping");
      o.step_bytes = parse_size("-i", stepb);
      if (o.step_bytes == 0) throw CLI::ValidationError("-i 0: a step of 0 bytes never ends");
      o.step_factor = 0;
    }
    o.dtypes = parse_dtypes(dtype);
    o.ops = parse_ops(op);
    o.iters_given = app.count("-n") > 0;
    o.warmup_given = app.count("-w") > 0;
    if (o.min_bytes > o.max_bytes)
      throw CLI::ValidationError("invalid sizes for 'minbytes' and 'maxbytes': " +
                                 std::to_string(o.min_bytes) + " > " + std::to_string(o.max_bytes));
    if (o.min_bytes == 0 && o.step_factor > 0 && o.max_bytes > 0)
      throw CLI::ValidationError(
          "-b 0 with a step factor: 0 times any factor stays 0; start at -b 1 or more, or "
          "step with -i");
  } catch (const CLI::CallForHelp& e) {
    exit_code = app.exit(e);
    return false;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "gradcomm-perf: %s\nRun gradcomm-perf --help for the options.\n", e.what());
    exit_code = 2;
    return false;
  }
  for (int i = 0; i < argc; ++i) o.args.emplace_back(argv[i]);
  return true;
}
