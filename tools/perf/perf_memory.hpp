// -M, as nccl-tests reports it after the footer: the memory the communicators'
// creation took ("Initialization"), the test buffers ("User-Allocated") and what
// the sweep added ("Collective": the transports' scratch, NCCL's buffers), with
// their total. On a GPU, device memory in use on rank 0's GPU of this process
// (cudaMemGetInfo, as nccl-tests; under a launcher that GPU is known only once
// the communicator exists, so Initialization then includes the CUDA context).
// On the host, this process's resident memory (/proc/self/statm), and the
// buffers counted at their allocated size (pages not yet touched are not
// resident).
#pragma once

#include <cstdint>
#include <string>

struct MemoryReport {
  bool gpu = false;
  int64_t init = 0, buffers = 0, collective = 0;
};

// Bytes in use now: on GPU `ordinal` (device-wide), or this process's resident set (ordinal < 0).
int64_t memory_in_use(int ordinal);

// "# GPU memory usage     : Initialization 1.23 GB | User-Allocated 512.00 MB | Collective 2.00 MB |
// Total  1.73 GB"
std::string memory_report_line(const MemoryReport& m);
