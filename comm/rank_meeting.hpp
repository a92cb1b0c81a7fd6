// The meeting every store-met transport starts with: each rank checks its device
// without touching it (a CUDA device: a usable GPU, visible to this process), rank 0
// starts the store, every rank connects and meets at 'init' reporting whether it can
// take part, and if any cannot, every rank fails alike with its reason. Needs
// neither CUDA nor NCCL to be present, so a machine without a GPU (or a build
// without CUDA) fails here, after the meeting, with the same words on every rank.
#pragma once

#include <memory>

#include "comm/bootstrap/bootstrap.hpp"
#include "comm/bootstrap/launch_env.hpp"

namespace gradcomm::comm {

struct RanksMet {
  std::unique_ptr<bootstrap::Bootstrap> boot;  // met: every rank can take part
  gcommDevice_t device;                        // this rank's, validated
};

RanksMet meet_ranks(const bootstrap::LaunchConfig& launch);

}  // namespace gradcomm::comm
