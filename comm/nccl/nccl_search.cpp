#include "comm/nccl/nccl_search.hpp"

#include "common/error.hpp"

namespace gradcomm {

namespace {
constexpr const char* kSoname = "libnccl.so.2";

void add_file(std::vector<NcclCandidate>& out, const std::string& file, const std::string& label) {
  for (const NcclCandidate& c : out)
    if (!c.already_loaded && c.file == file) return;  // listed once, at its first place
  out.push_back({file, label, false, false});
}
}  // namespace

std::vector<NcclCandidate> nccl_candidates(const NcclSearchPlaces& places, const GlobFiles& glob) {
  std::vector<NcclCandidate> out;
  out.push_back({kSoname, "an NCCL already loaded in this process", true, false});
  if (places.explicit_file) {
    // The user's choice: that file or an error, never a silent fallback.
    out.push_back({*places.explicit_file, "GRADCOMM_NCCL_LIBRARY", false, true});
    return out;
  }
  for (const auto& root : places.roots)
    for (const char* lib : {"lib", "lib64"})
      add_file(out, cat(root.folder, "/", lib, "/", kSoname), cat(root.variable, "=", root.folder));
  // The nvidia-nccl-cu* wheel in the same site-packages as the gradcomm wheel
  // (which holds libgradcomm.so in site-packages/gradcomm/), before the loader's
  // search: it is the NCCL PyTorch loads, and one process holds one libnccl.so.2
  // (a system NCCL loaded first makes a later `import torch` fail on a newer symbol).
  if (!places.own_folder.empty())
    add_file(out, cat(places.own_folder, "/../nvidia/nccl/lib/", kSoname),
             "the Python package beside gradcomm");
  out.push_back({kSoname, "the dynamic loader's search", false, false});
  for (const auto& env : places.environments)
    for (const std::string& file :
         glob(cat(env.folder, "/lib/python3*/site-packages/nvidia/nccl/lib/", kSoname)))
      add_file(out, file, cat("the Python package in ", env.variable, "=", env.folder));
  if (!places.build_folder.empty())
    add_file(out, cat(places.build_folder, "/", kSoname), "the folder the build found NCCL in");
  return out;
}

}  // namespace gradcomm
