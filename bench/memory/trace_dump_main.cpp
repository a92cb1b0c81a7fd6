// gradcomm-training-trace: writes the training-like allocation trace that
// gradcomm_memory_trace_bench replays (training_trace.hpp), one op a line, so
// that a peer (bench/memory/torch_alloc_peer.py) replays exactly the same ops:
//   a <id> <bytes> <stream>     allocate
//   f <id> <stream>             free
// stream 0 is the compute stream, 1 the communication stream.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "training_trace.hpp"

int main(int argc, char** argv) {
  gradcomm::bench::TraceParams params;
  std::string out = "-";
  CLI::App app{"Writes the training-like allocation trace that gradcomm_memory_trace_bench replays."};
  app.add_option("--jitter", params.jitter, "sequence-length jitter (0: static shapes)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.99));
  app.add_option("--steps", params.steps, "training steps")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app.add_option("--seed", params.seed, "generator seed")->capture_default_str();
  app.add_option("-o,--out", out, "output file ('-': standard output)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  FILE* f = out == "-" ? stdout : std::fopen(out.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "gradcomm-training-trace: cannot write %s\n", out.c_str());
    return 1;
  }
  for (const gradcomm::bench::TraceOp& op : gradcomm::bench::make_training_trace(params)) {
    if (op.alloc) {
      std::fprintf(f, "a %u %zu %d\n", op.id, op.bytes, op.stream);
    } else {
      std::fprintf(f, "f %u %d\n", op.id, op.stream);
    }
  }
  const bool ok = std::fflush(f) == 0 && !std::ferror(f);
  if (f != stdout) std::fclose(f);
  if (!ok) std::fprintf(stderr, "gradcomm-training-trace: writing %s failed\n", out.c_str());
  return ok ? 0 : 1;
}
