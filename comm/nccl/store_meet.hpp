// Steps 1 and 2 of an NCCL rank's store init (store_init.hpp): check this rank's
// device without touching it, meet the other ranks, and fail every rank alike if
// any cannot take part. Needs no NCCL, so a build without CUDA (comm/nccl_absent/)
// fails here exactly as a machine without a GPU does.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/bootstrap/bootstrap.hpp"
#include "comm/bootstrap/launch_env.hpp"

namespace gradcomm::comm {

struct NcclRankMet {
  std::unique_ptr<bootstrap::Bootstrap> boot;  // met: every rank can take part
  gcommDevice_t device;                        // this rank's, validated
};

// `can_take_part` says why this rank cannot ("" if it can): NCCL not loadable here,
// say, so that a rank without NCCL makes every rank fail with its reason at once
// instead of leaving the others in NCCL's init until the timeout.
NcclRankMet meet_as_nccl_rank(const bootstrap::LaunchConfig& launch,
                              const std::function<std::string()>& can_take_part);

// gcommCommInitAll's device list, checked before it is read or anything is sized
// by ndev: the list (0..ndev-1 when devices is null), each a visible GPU, none twice.
std::vector<int> nccl_device_list(int ndev, const int* devices);

}  // namespace gradcomm::comm
