// The cuda-ipc transport: ranks in separate processes that share one GPU (several
// training processes on one GPU, which NCCL refuses: "Duplicate GPU detected").
// Each rank's buffers are read by the others in place, through CUDA IPC
// (comm/cuda_ipc/ipc_buffers.hpp: each allocation opened once per peer and kept
// open), and reduced on each rank's stream by the peer-memory collective
// (comm/peer_memory/), the algorithm the local transport runs, so the bits equal
// its and the host transports'. This transport is a PeerMemory backend. Nothing is staged through host memory
// and a call returns once its work is enqueued.
//
// The host side of every call goes over the shm transport's rings (the control
// plane: comm/shm/): an all-gather of each rank's call (its signature and its
// buffers as the peers open them), then, once every rank has enqueued its reading,
// an all-gather of whether each got through (a rank that failed there makes every
// rank fail, instead of leaving them to wait or to read what it never wrote). Each rank has three
// interprocess events, recorded at three points of every collective; a rank waits on the peers' after the
// meeting that follows their record, and re-records its own only after the next meeting, so every wait sees
// the record it means.
//
// Sends and receives: the sender posts a letter (its buffer, an event its stream
// records) through the control plane, the receiver copies out of the sender's
// buffer after that event and answers with its own event, which the sender's
// stream waits for. At most PeerEvents::kMaxLettersPerPeer (1024) sends between two
// ranks in one group.
#pragma once

#include <memory>

#include <string>

#include "comm/bootstrap/bootstrap.hpp"
#include "comm/bootstrap/launch_env.hpp"
#include "comm/job_facts.hpp"
#include "comm/transport.hpp"

namespace gradcomm::comm {

// The table's questions (comm/transports.hpp). Whether it can serve the job: more
// than one rank, every one a process of its own on one GPU of one host, in one PID
// namespace. Pure; compiled without CUDA too.
Fit cuda_ipc_can_serve(const JobFacts& job);
// Asked for by name on a machine without a usable GPU: no rank can serve it there,
// so it is refused at once, before the rendezvous (gcommNotSupported).
void refuse_cuda_ipc_without_a_gpu(const bootstrap::LaunchConfig& launch);
// This rank's cuda-ipc transport over a job that met. Collective.
std::unique_ptr<Transport> make_cuda_ipc_over_job(bootstrap::Bootstrap& met,
                                                  const bootstrap::LaunchConfig& launch, const JobFacts& job,
                                                  std::string& why_not);

}  // namespace gradcomm::comm
