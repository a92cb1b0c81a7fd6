#include "comm/transport.hpp"

namespace gradcomm::comm {

const char* collective_name(Collective op) noexcept {
  switch (op) {
    case Collective::kAllReduce: return "all-reduce";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kReduce: return "reduce";
    case Collective::kAllGather: return "all-gather";
    case Collective::kReduceScatter: return "reduce-scatter";
    case Collective::kBarrier: return "barrier";
  }
  return "?";
}

}  // namespace gradcomm::comm
