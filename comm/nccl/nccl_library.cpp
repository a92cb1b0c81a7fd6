#include "comm/nccl/nccl_library.hpp"

#include <dlfcn.h>
#include <glob.h>
#include <link.h>

#include <cstdlib>
#include <mutex>
#include <vector>

#include "comm/nccl/nccl_search.hpp"
#include "comm/nccl/nccl_version.hpp"
#include "common/env.hpp"
#include "common/error.hpp"
#include "common/library_folder.hpp"
#include "common/log.hpp"

namespace gradcomm {

namespace {

constexpr int kOldestSupported = 21000;  // ncclAvg and ncclBfloat16

std::vector<std::string> glob_files(const std::string& pattern) {
  std::vector<std::string> out;
  glob_t g{};
  if (::glob(pattern.c_str(), 0, nullptr, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  globfree(&g);
  return out;
}

std::string joined(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out;
}

// The file a handle came from (for an NCCL someone else loaded).
std::string handle_file(void* handle) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr)
    return map->l_name;
  return "libnccl.so.2";
}

std::string dl_error() {
  const char* e = dlerror();
  return e != nullptr ? e : "unknown dlopen error";
}

struct Loaded {
  NcclLibrary library;
  std::string error;  // empty when loaded
};

template <typename F>
void resolve(void* handle, F& slot, const char* name, bool required, std::vector<std::string>& missing) {
  slot = reinterpret_cast<F>(dlsym(handle, name));
  if (slot == nullptr && required) missing.emplace_back(name);
}

// Resolves the entry points and checks the version; "" or why the file is unusable.
std::string bind(void* handle, NcclLibrary& lib) {
  std::vector<std::string> missing;
  resolve(handle, lib.GetVersion, "ncclGetVersion", true, missing);
  resolve(handle, lib.GetErrorString, "ncclGetErrorString", true, missing);
  resolve(handle, lib.GetLastError, "ncclGetLastError", false, missing);
  resolve(handle, lib.GetUniqueId, "ncclGetUniqueId", true, missing);
  resolve(handle, lib.CommInitRank, "ncclCommInitRank", true, missing);
  resolve(handle, lib.CommInitRankConfig, "ncclCommInitRankConfig", false, missing);
  resolve(handle, lib.CommInitAll, "ncclCommInitAll", true, missing);
  resolve(handle, lib.CommDestroy, "ncclCommDestroy", true, missing);
  resolve(handle, lib.CommAbort, "ncclCommAbort", true, missing);
  resolve(handle, lib.CommGetAsyncError, "ncclCommGetAsyncError", true, missing);
  resolve(handle, lib.CommCount, "ncclCommCount", true, missing);
  resolve(handle, lib.CommCuDevice, "ncclCommCuDevice", true, missing);
  resolve(handle, lib.CommUserRank, "ncclCommUserRank", true, missing);
  resolve(handle, lib.AllReduce, "ncclAllReduce", true, missing);
  resolve(handle, lib.Broadcast, "ncclBroadcast", true, missing);
  resolve(handle, lib.Reduce, "ncclReduce", true, missing);
  resolve(handle, lib.AllGather, "ncclAllGather", true, missing);
  resolve(handle, lib.ReduceScatter, "ncclReduceScatter", true, missing);
  resolve(handle, lib.Send, "ncclSend", true, missing);
  resolve(handle, lib.Recv, "ncclRecv", true, missing);
  resolve(handle, lib.AlltoAll, "ncclAlltoAll", false, missing);
  resolve(handle, lib.GroupStart, "ncclGroupStart", true, missing);
  resolve(handle, lib.GroupEnd, "ncclGroupEnd", true, missing);
  if (!missing.empty()) return cat("it lacks ", joined(missing), " (not an NCCL 2 library?)");
  if (lib.GetVersion(&lib.version) != ncclSuccess) return "ncclGetVersion failed";
  if (lib.version < kOldestSupported || lib.version >= 30000)
    return cat("it is NCCL ", nccl_version_string(lib.version), "; gradcomm needs NCCL 2 from ",
               nccl_version_string(kOldestSupported));
  return "";
}

Loaded load() {
  Loaded out;
  NcclSearchPlaces places;
  places.explicit_file = env_string("GRADCOMM_NCCL_LIBRARY");
  for (const char* var : {"NCCL_ROOT", "NCCL_HOME"})
    if (auto dir = env_string(var)) places.roots.push_back({var, *dir});
  places.own_folder = library_folder();
  for (const char* var : {"VIRTUAL_ENV", "CONDA_PREFIX"})
    if (auto dir = env_string(var)) places.environments.push_back({var, *dir});
#ifdef GRADCOMM_NCCL_BUILD_DIR
  places.build_folder = GRADCOMM_NCCL_BUILD_DIR;
#endif

  std::vector<std::string> tried;
  for (const NcclCandidate& c : nccl_candidates(places, glob_files)) {
    dlerror();
    void* handle = c.already_loaded ? dlopen(c.file.c_str(), RTLD_NOW | RTLD_NOLOAD)
                                    : dlopen(c.file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      tried.push_back(c.already_loaded ? cat(c.where, ": none") : cat(c.where, ": ", dl_error()));
      if (c.final) break;
      continue;
    }
    NcclLibrary lib;
    std::string unusable = bind(handle, lib);
    if (unusable.empty()) {
      lib.path = c.already_loaded ? cat(handle_file(handle), " (already loaded in the process)")
                                  : handle_file(handle);
      if (c.already_loaded && places.explicit_file) {
        char* asked = realpath(places.explicit_file->c_str(), nullptr);
        char* got = realpath(handle_file(handle).c_str(), nullptr);
        if (asked == nullptr || got == nullptr || std::string(asked) != got)
          GCOMM_WARN("GRADCOMM_NCCL_LIBRARY=", *places.explicit_file,
                     " is not used: the process already holds ", handle_file(handle),
                     " (one process holds one libnccl.so.2)");
        std::free(asked);
        std::free(got);
      }
      out.library = lib;
      GCOMM_INFO(INIT, "NCCL ", nccl_version_string(lib.version), " loaded from ", lib.path);
      return out;
    }
    tried.push_back(cat(c.where, ": ", unusable));
    dlclose(handle);
    if (c.final) break;
  }
  out.error = cat("NCCL could not be loaded (libnccl.so.2). Searched, in order: ", joined(tried),
                  ". Install NCCL (pip install nvidia-nccl-cu13, or your distribution's libnccl2), or set "
                  "GRADCOMM_NCCL_LIBRARY to the path of libnccl.so.2");
  return out;
}

const Loaded& loaded() {
  static const Loaded result = load();
  return result;
}

}  // namespace

const char* NcclLibrary::last_error(ncclComm_t comm) const noexcept {
  const char* text = GetLastError != nullptr ? GetLastError(comm) : nullptr;
  return text != nullptr ? text : "";
}

const NcclLibrary& nccl() {
  const Loaded& l = loaded();
  if (!l.error.empty()) throw Error(gcommNotSupported, l.error);
  return l.library;
}

const NcclLibrary* nccl_if_loaded(std::string* why) noexcept {
  try {
    const Loaded& l = loaded();
    if (l.error.empty()) return &l.library;
    if (why != nullptr) *why = l.error;
  } catch (...) {
    if (why != nullptr) *why = "out of memory while loading NCCL";
  }
  return nullptr;
}

NcclLoadReport nccl_load_report() noexcept {
  NcclLoadReport r;
  try {
    if (const NcclLibrary* lib = nccl_if_loaded(&r.error)) {
      r.version = lib->version;
      r.path = lib->path;
    }
  } catch (...) {
    r.error = "out of memory";
  }
  return r;
}

}  // namespace gradcomm
