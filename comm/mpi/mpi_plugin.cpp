#include "comm/mpi/mpi_plugin.hpp"

#include <dlfcn.h>

#include <vector>

#include "common/env.hpp"
#include "common/error.hpp"
#include "common/library_folder.hpp"

namespace gradcomm::comm {

namespace {

constexpr const char* kPlugin = "libgradcomm_mpi.so.0";

template <class Fn>
bool find(void* handle, const char* name, Fn& out) {
  out = reinterpret_cast<Fn>(dlsym(handle, name));
  return out != nullptr;
}

// Every entry point of this version, or false.
bool resolve(void* handle, MpiPlugin& p) {
  return find(handle, "gradcomm_mpi_world", p.world) && find(handle, "gradcomm_mpi_bcast", p.bcast) &&
         find(handle, "gradcomm_mpi_comm_dup", p.comm_dup) &&
         find(handle, "gradcomm_mpi_comm_free", p.comm_free) && find(handle, "gradcomm_mpi_isend", p.isend) &&
         find(handle, "gradcomm_mpi_irecv", p.irecv) && find(handle, "gradcomm_mpi_test", p.test) &&
         find(handle, "gradcomm_mpi_cancel", p.cancel) && find(handle, "gradcomm_mpi_all_ok", p.all_ok) &&
         find(handle, "gradcomm_mpi_request_free", p.request_free);
}

MpiPlugin load_plugin() {
  MpiPlugin p;
  std::vector<std::string> candidates;
  if (auto file = env_string("GRADCOMM_MPI_PLUGIN")) {
    candidates.push_back(*file);
  } else {
    const std::string here = library_folder();
    if (!here.empty()) candidates.push_back(here + "/" + kPlugin);
    candidates.push_back(kPlugin);
  }
  std::string tried;
  for (const std::string& file : candidates) {
    dlerror();
    // Global: Open MPI's own components, which it opens later, resolve against libmpi.
    void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (handle == nullptr) {
      const char* e = dlerror();
      tried += cat(tried.empty() ? "" : "; ", e != nullptr ? e : file.c_str());
      continue;
    }
    auto version =
        reinterpret_cast<gradcomm_mpi_plugin_version_fn>(dlsym(handle, "gradcomm_mpi_plugin_version"));
    if (version != nullptr && version() == GRADCOMM_MPI_PLUGIN_VERSION && resolve(handle, p)) return p;
    tried += cat(tried.empty() ? "" : "; ", file, ": not gradcomm's MPI plugin of version ",
                 GRADCOMM_MPI_PLUGIN_VERSION);
    dlclose(handle);
  }
  p = MpiPlugin{};
  p.error =
      cat("gradcomm's MPI plugin (", kPlugin,
          ", built where MPI is found at build time) could not be "
          "loaded: ",
          tried,
          ". Build gradcomm with MPI (apt-get install libopenmpi-dev) or set "
          "GRADCOMM_MPI_PLUGIN to the file; without MPI, set MASTER_ADDR and MASTER_PORT for the socket "
          "transport instead");
  return p;
}

}  // namespace

const MpiPlugin& mpi_plugin() {
  static const MpiPlugin p = load_plugin();
  if (!p.error.empty()) fail(gcommNotSupported, p.error);
  return p;
}

bool mpi_plugin_found(std::string* why) noexcept {
  try {
    mpi_plugin();
    return true;
  } catch (const Error& e) {
    if (why != nullptr) *why = e.message();
  } catch (...) {
  }
  return false;
}

}  // namespace gradcomm::comm
