// NCCL, loaded with dlopen the first time something needs it. libgradcomm.so has
// no load-time dependency on libnccl.so.2: a program that only uses the host and
// local transports starts and runs on a machine without NCCL, and a program that
// asks for NCCL there gets an error naming every place that was searched.
//
// Where NCCL is looked for, first match wins (docs/install.md):
//   1. an NCCL already loaded in the process (PyTorch's, say: a communicator it
//      created can only be driven by the same library);
//   2. GRADCOMM_NCCL_LIBRARY, a file path: that file and nothing else;
//   3. NCCL_ROOT, then NCCL_HOME: <dir>/lib/libnccl.so.2, <dir>/lib64/libnccl.so.2;
//   4. the nvidia-nccl-cu* Python package in the site-packages that holds the
//      gradcomm wheel (PyTorch's NCCL: it must win over a system one);
//   5. the dynamic loader's own search (LD_LIBRARY_PATH, ld.so.cache, system folders);
//   6. the nvidia-nccl-cu* Python package under $VIRTUAL_ENV, then $CONDA_PREFIX;
//   7. the folder where the build found NCCL.
// The entry points are resolved by name; those newer than the oldest supported
// NCCL (2.10) may be null, and callers gate them on nccl_has() (nccl_version.hpp).
#pragma once

#include <nccl.h>

#include <string>

namespace gradcomm {

struct NcclLibrary {
  std::string path;  // the file loaded (or "already loaded: <path>")
  int version = 0;   // ncclGetVersion's code

  decltype(&::ncclGetVersion) GetVersion = nullptr;
  decltype(&::ncclGetErrorString) GetErrorString = nullptr;
  decltype(&::ncclGetLastError) GetLastError = nullptr;  // 2.13; null before
  decltype(&::ncclGetUniqueId) GetUniqueId = nullptr;
  decltype(&::ncclCommInitRank) CommInitRank = nullptr;
  decltype(&::ncclCommInitRankConfig) CommInitRankConfig = nullptr;  // 2.14
  decltype(&::ncclCommInitAll) CommInitAll = nullptr;
  decltype(&::ncclCommDestroy) CommDestroy = nullptr;
  decltype(&::ncclCommAbort) CommAbort = nullptr;
  decltype(&::ncclCommGetAsyncError) CommGetAsyncError = nullptr;
  decltype(&::ncclCommCount) CommCount = nullptr;
  decltype(&::ncclCommCuDevice) CommCuDevice = nullptr;
  decltype(&::ncclCommUserRank) CommUserRank = nullptr;
  decltype(&::ncclAllReduce) AllReduce = nullptr;
  decltype(&::ncclBroadcast) Broadcast = nullptr;
  decltype(&::ncclReduce) Reduce = nullptr;
  decltype(&::ncclAllGather) AllGather = nullptr;
  decltype(&::ncclReduceScatter) ReduceScatter = nullptr;
  decltype(&::ncclSend) Send = nullptr;  // 2.7
  decltype(&::ncclRecv) Recv = nullptr;
  // ncclAlltoAll (NCCL 2.28); null before, where all-to-all is grouped send/recv.
  // Its own type: older nccl.h files do not declare it.
  using AlltoAllFn = ncclResult_t (*)(const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
  AlltoAllFn AlltoAll = nullptr;
  decltype(&::ncclGroupStart) GroupStart = nullptr;
  decltype(&::ncclGroupEnd) GroupEnd = nullptr;

  // ncclGetLastError where the library has it, "" otherwise; never null.
  const char* last_error(ncclComm_t comm) const noexcept;
};

// Loads NCCL on first use (once per process, thread-safe) and returns it; throws
// Error(gcommNotSupported) naming every place searched when it cannot be loaded.
const NcclLibrary& nccl();

// The same without throwing: null when NCCL cannot be loaded, with the reason in
// *why (for reports such as gradcomm-info).
const NcclLibrary* nccl_if_loaded(std::string* why) noexcept;

}  // namespace gradcomm
