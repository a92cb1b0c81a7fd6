#include "perf_options.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

std::string cat_reason(const char* text, const char* why) { return std::string("'") + text + "' " + why; }

const char* kUsage =
    "usage: gradcomm-perf [options]\n"
    "  -b, --minbytes SIZE      smallest size (default 8; K/M/G suffixes)\n"
    "  -e, --maxbytes SIZE      largest size (default 128M)\n"
    "  -f, --stepfactor F       multiply the size by F (default 2)\n"
    "  -i, --stepbytes SIZE     or add SIZE each step\n"
    "  -g, --ngpus N            GPUs of this process (default: all visible)\n"
    "      --local N            N ranks as threads on the local transport (GPU 0, or the host)\n"
    "  -n, --iters N            timed iterations per size (default 20; 5 on the host)\n"
    "  -w, --warmup_iters N     warm-up iterations (default 5; 1 on the host)\n"
    "  -c, --check 0|1          validate results and count #wrong (default 1)\n"
    "  -d, --datatype T         float|half|bfloat16 (or f32|f16|bf16)\n"
    "  -o, --op OP              sum|avg|max|min\n"
    "  -r, --root R             root of broadcast/reduce (default 0)\n"
    "  -z, --blocking 0|1       1: wait for each collective before issuing the next (default 0)\n"
    "  -a, --average 0|1|2|3    time reported: 0 rank 0's, 1 mean of the ranks (default), 2 min, 3 max\n"
    "  -C, --collective C       all_reduce|all_gather|reduce_scatter|broadcast|reduce\n"
    "  -J, --json FILE          also write the results as JSON\n"
    "  -h, --help               this text\n"
    "With no arguments: all-reduce from 8 B to 128 MiB by factors of 2 on all visible GPUs;\n"
    "without a GPU, 2 host ranks on the local transport.\n"
    "Under a launcher (torchrun, mpirun, srun: WORLD_SIZE, OMPI_COMM_WORLD_SIZE or SLURM_NTASKS\n"
    "above 1), each process is one rank: gcommCommInitFromEnv, NCCL on the GPU of its local rank,\n"
    "or, without a GPU, the socket transport between host processes. MASTER_ADDR and MASTER_PORT\n"
    "name rank 0's store. Rank 0 prints the table.\n";

// Sizes above this cannot be buffers (GCOMM_ADDRESS_LIMIT): refused, not wrapped.
constexpr double kMaxSize = static_cast<double>(GCOMM_ADDRESS_LIMIT);

// A byte count: a number (decimal point and exponent allowed) with an optional
// K/M/G suffix, finite, >= 0 and below kMaxSize. "" on success, else the reason.
std::string parse_size(const char* text, size_t& out) {
  char* end = nullptr;
  double v = std::strtod(text, &end);
  if (end == text) return cat_reason(text, "is not a size (a number of bytes, optionally with K, M or G)");
  switch (*end) {
    case 'K': case 'k': v *= 1024.0; ++end; break;
    case 'M': case 'm': v *= 1024.0 * 1024; ++end; break;
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; ++end; break;
    default: break;
  }
  if (*end != '\0') return cat_reason(text, "is not a size (a number of bytes, optionally with K, M or G)");
  if (!std::isfinite(v)) return cat_reason(text, "is not a finite size");
  if (v < 0) return cat_reason(text, "is negative");
  if (v >= kMaxSize) return cat_reason(text, "is larger than any buffer can be (2^57 bytes)");
  out = static_cast<size_t>(v);
  return "";
}

// A factor > 1 and finite (2, 1.5); "" on success, else the reason.
std::string parse_factor(const char* text, double& out) {
  char* end = nullptr;
  double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || !std::isfinite(v) || !(v > 1.0))
    return cat_reason(text, "is not a step factor (a finite number > 1)");
  out = v;
  return "";
}

bool parse_int(const char* text, int& out, int min) {
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < min || v > 1000000000) return false;
  out = static_cast<int>(v);
  return true;
}

}  // namespace

const char* average_label(int average) {
  static const char* const names[] = {"rank0", "avg", "min", "max"};
  return average >= 0 && average <= 3 ? names[average] : "?";
}

const char* dtype_label(gcommDataType_t d) {
  return d == gcommFloat16 ? "half" : d == gcommBfloat16 ? "bfloat16" : "float";
}

bool parse_perf_options(int argc, char** argv, PerfOptions& o, int& exit_code) {
  auto bad = [&](const std::string& why) {
    std::fprintf(stderr, "gradcomm-perf: %s\n%s", why.c_str(), kUsage);
    exit_code = 2;
    return false;
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      exit_code = 0;
      return false;
    }
    if (i + 1 >= argc) return bad("option " + a + " needs a value");
    const char* v = argv[++i];
    int n = 0;
    std::string why;
    if (a == "-b" || a == "--minbytes") {
      if (!(why = parse_size(v, o.min_bytes)).empty()) return bad(a + ": " + why);
    } else if (a == "-e" || a == "--maxbytes") {
      if (!(why = parse_size(v, o.max_bytes)).empty()) return bad(a + ": " + why);
    } else if (a == "-f" || a == "--stepfactor") {
      if (!(why = parse_factor(v, o.step_factor)).empty()) return bad(a + ": " + why);
    } else if (a == "-i" || a == "--stepbytes") {
      if (!(why = parse_size(v, o.step_bytes)).empty()) return bad(a + ": " + why);
      if (o.step_bytes == 0) return bad(a + ": a step of 0 bytes never ends");
      o.step_factor = 0;
    } else if (a == "-g" || a == "--ngpus") {
      if (!parse_int(v, o.gpus, 1)) return bad("bad GPU count " + std::string(v));
    } else if (a == "--local") {
      if (!parse_int(v, o.local_ranks, 1)) return bad("bad rank count " + std::string(v));
    } else if (a == "-n" || a == "--iters") {
      if (!parse_int(v, o.iters, 1)) return bad("bad iteration count " + std::string(v));
      o.iters_given = true;
    } else if (a == "-w" || a == "--warmup_iters") {
      if (!parse_int(v, o.warmup, 0)) return bad("bad warm-up count " + std::string(v));
    } else if (a == "-c" || a == "--check") {
      if (!parse_int(v, n, 0)) return bad("bad -c value");
      o.check = n != 0;
    } else if (a == "-z" || a == "--blocking") {
      if (!parse_int(v, n, 0)) return bad("bad -z value");
      o.blocking = n != 0;
    } else if (a == "-a" || a == "--average") {
      if (!parse_int(v, o.average, 0) || o.average > 3) return bad("bad -a value (0, 1, 2 or 3)");
    } else if (a == "-r" || a == "--root") {
      if (!parse_int(v, o.root, 0)) return bad("bad root " + std::string(v));
    } else if (a == "-d" || a == "--datatype") {
      std::string d = v;
      if (d == "float" || d == "f32" || d == "float32") o.dtype = gcommFloat32;
      else if (d == "half" || d == "f16" || d == "float16") o.dtype = gcommFloat16;
      else if (d == "bfloat16" || d == "bf16") o.dtype = gcommBfloat16;
      else return bad("unknown datatype " + d);
    } else if (a == "-o" || a == "--op") {
      std::string d = v;
      if (d == "sum") o.op = gcommSum;
      else if (d == "avg") o.op = gcommAvg;
      else if (d == "max") o.op = gcommMax;
      else if (d == "min") o.op = gcommMin;
      else return bad("unknown op " + d);
    } else if (a == "-C" || a == "--collective") {
      o.collective = v;
      if (o.collective != "all_reduce" && o.collective != "all_gather" && o.collective != "reduce_scatter" &&
          o.collective != "broadcast" && o.collective != "reduce")
        return bad("unknown collective " + o.collective);
    } else if (a == "-J" || a == "--json") {
      o.json_path = v;
    } else {
      return bad("unknown option " + a);
    }
  }
  if (o.min_bytes > o.max_bytes)
    return bad("minbytes (" + std::to_string(o.min_bytes) + ") is larger than maxbytes (" +
               std::to_string(o.max_bytes) + ")");
  if (o.min_bytes == 0 && o.step_factor > 0 && o.max_bytes > 0)
    return bad("-b 0 with a step factor: 0 times any factor stays 0; start at -b 1 or more, or step with -i");
  return true;
}
