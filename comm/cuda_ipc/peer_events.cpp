#include "comm/cuda_ipc/peer_events.hpp"

#include "common/cuda_check.hpp"

namespace gradcomm::comm::cuda_ipc {

namespace {
// Interprocess events cannot time (CUDA requires cudaEventDisableTiming).
cudaEvent_t new_ipc_event(cudaIpcEventHandle_t* handle) {
  cudaEvent_t e = nullptr;
  GCOMM_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming | cudaEventInterprocess));
  const cudaError_t err = cudaIpcGetEventHandle(handle, e);
  if (err != cudaSuccess) {
    GCOMM_CUDA_WARN(cudaEventDestroy(e));
    GCOMM_CUDA_CHECK(err);
  }
  return e;
}
cudaEvent_t open_ipc_event(const cudaIpcEventHandle_t& handle) {
  cudaEvent_t e = nullptr;
  GCOMM_CUDA_CHECK(cudaIpcOpenEventHandle(&e, handle));
  return e;
}
}  // namespace

PeerEvents::PeerEvents(int rank, int n)
    : rank_(rank), collective_(3 * static_cast<size_t>(n), nullptr), own_handles_(3) {
  try {
    for (int p = 0; p < 3; ++p)
      collective_[3 * static_cast<size_t>(rank_) + p] = new_ipc_event(&own_handles_[p]);
  } catch (...) {
    for (cudaEvent_t e : collective_)
      if (e != nullptr) GCOMM_CUDA_WARN(cudaEventDestroy(e));
    throw;
  }
}

PeerEvents::~PeerEvents() {
  for (cudaEvent_t e : collective_)
    if (e != nullptr) GCOMM_CUDA_WARN(cudaEventDestroy(e));
  for (auto& [key, own] : own_letters_) GCOMM_CUDA_WARN(cudaEventDestroy(own.event));
  for (auto& [key, e] : opened_) GCOMM_CUDA_WARN(cudaEventDestroy(e));
}

cudaIpcEventHandle_t PeerEvents::own_collective_handle(Point p) const {
  return own_handles_[p];
}

void PeerEvents::open_collective(int peer, const cudaIpcEventHandle_t* handles) {
  for (int p = 0; p < 3; ++p) collective_[3 * static_cast<size_t>(peer) + p] = open_ipc_event(handles[p]);
}

cudaEvent_t PeerEvents::own_letter_event(LetterEvent kind, int peer, int slot, cudaIpcEventHandle_t* handle) {
  const auto key = std::make_tuple(static_cast<int>(kind), peer, slot);
  auto it = own_letters_.find(key);
  if (it == own_letters_.end()) {
    Own own{};
    own.event = new_ipc_event(&own.handle);
    it = own_letters_.emplace(key, own).first;
  }
  *handle = it->second.handle;
  return it->second.event;
}

cudaEvent_t PeerEvents::peer_letter_event(int peer, int slot, const cudaIpcEventHandle_t& handle,
                                          bool copied) {
  const auto key = std::make_tuple(peer, copied ? 1 : 0, slot);
  auto it = opened_.find(key);
  if (it == opened_.end()) it = opened_.emplace(key, open_ipc_event(handle)).first;
  return it->second;
}

}  // namespace gradcomm::comm::cuda_ipc
