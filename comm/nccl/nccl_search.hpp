// The places NCCL is looked for, in order (nccl_library.hpp lists them): a pure
// function of the environment and the folders, so that the order is testable
// without a machine laid out for each case.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace gradcomm {

struct NcclSearchPlaces {
  struct Named {
    std::string variable;  // NCCL_ROOT, VIRTUAL_ENV, ...
    std::string folder;
  };
  std::optional<std::string> explicit_file;  // GRADCOMM_NCCL_LIBRARY
  std::vector<Named> roots;                  // NCCL_ROOT, NCCL_HOME
  std::string own_folder;                    // the folder of libgradcomm.so
  std::vector<Named> environments;           // VIRTUAL_ENV, CONDA_PREFIX
  std::string build_folder;                  // where the build found NCCL ("" if unknown)
};

struct NcclCandidate {
  std::string file;             // a path, or a bare soname for the loader's search
  std::string where;            // for messages, before dlerror's "<file>: <why>": "NCCL_ROOT=/x"
  bool already_loaded = false;  // only look for an NCCL the process has loaded
  bool final = false;           // stop here whatever happens (an explicit choice)
};

// `glob` expands a pattern to the existing files (sorted).
using GlobFiles = std::function<std::vector<std::string>(const std::string& pattern)>;

std::vector<NcclCandidate> nccl_candidates(const NcclSearchPlaces& places, const GlobFiles& glob);

}  // namespace gradcomm
