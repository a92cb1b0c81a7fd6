#include "perf_memory.hpp"

#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdio>

#include "perf_format.hpp"

int64_t memory_in_use(int ordinal) {
  if (ordinal >= 0) {
    size_t free_bytes = 0, total = 0;
    if (cudaSetDevice(ordinal) != cudaSuccess || cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return static_cast<int64_t>(total - free_bytes);
  }
  long pages = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  const int got = std::fscanf(f, "%ld %ld", &pages, &resident);
  std::fclose(f);
  return got == 2 ? static_cast<int64_t>(resident) * sysconf(_SC_PAGESIZE) : 0;
}

std::string memory_report_line(const MemoryReport& m) {
  char line[256];
  std::snprintf(line, sizeof(line),
                "# %-20s : Initialization %s | User-Allocated %s | Collective %s | Total  %s\n",
                m.gpu ? "GPU memory usage" : "Host memory usage", memory_text(m.init).c_str(),
                memory_text(m.buffers).c_str(), memory_text(m.collective).c_str(),
                memory_text(m.init + m.buffers + m.collective).c_str());
  return line;
}
