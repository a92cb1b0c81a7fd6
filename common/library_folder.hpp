// The folder of the file that holds gradcomm's code (libgradcomm.so, or a program
// linked with the layers statically): where the optional parts it opens on demand
// are looked for first (an NCCL wheel beside it, libgradcomm_mpi.so.0).
#pragma once

#include <string>

namespace gradcomm {

std::string library_folder();  // "" if the loader cannot say

}  // namespace gradcomm
