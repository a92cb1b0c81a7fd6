// The rendezvous of a multi-process job: rank 0 runs the store (store_server.hpp)
// on MASTER_ADDR:MASTER_PORT, every rank (rank 0 too, through loopback) connects
// to it with retry until the init deadline. On top of the store: the init
// meeting (every rank reports whether it can take part; a rank that never arrives
// is named), publishing values (the ncclUniqueId), and the shutdown barrier.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/bootstrap/launch_env.hpp"
#include "comm/bootstrap/store_client.hpp"
#include "comm/bootstrap/store_server.hpp"
#include "common/error.hpp"
#include "gradcomm/types.h"

namespace gradcomm::comm::bootstrap {

struct RendezvousOptions {
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: any free port (useful when the other ranks learn it otherwise, or world size 1)
  std::string job_key = "gradcomm";
  int rank = 0;
  int world_size = 1;
  double timeout_s = 300;       // the whole init: connecting, meeting, what the caller does next
  double hello_timeout_s = 30;  // rank 0's store drops connections silent for this long
  bool external_store = false;  // the store runs elsewhere (gradcomm-store): rank 0 connects like the others
};

// This rank's generation for a communicator it makes at master_addr:port with this
// job key: how many it made there before, in this process (wire.hpp). A
// communicator counts once its ranks met (Bootstrap::meet); an init that failed
// before that made none, so a retry in the same process meets its peers with the
// same generation (issue 44 #4). Port 0 (any free port) is always 0.
uint32_t generation_for(const RendezvousOptions& options);

// The rendezvous of the rank that `launch` describes.
RendezvousOptions rendezvous_options(const LaunchConfig& launch);

// Whether a rank can take part ("" message when it can).
struct RankReport {
  gcommStatus_t status = gcommSuccess;
  std::string message;
};

class Bootstrap {
 public:
  // Rank 0 starts the store, then every rank connects and says hello. Throws
  // (gcommTimeout, gcommInvalidArgument, gcommRemoteError) with the reason.
  explicit Bootstrap(const RendezvousOptions& options);
  // Leaves without the shutdown barrier (goodbye, then rank 0 stops the store).
  ~Bootstrap();
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  StoreClient& store() { return *client_; }
  Deadline deadline() const { return deadline_; }
  int rank() const { return options_.rank; }
  int size() const { return options_.world_size; }
  const std::string& address() const { return address_; }  // "MASTER_ADDR:port"
  int port() const { return port_; }
  // Whether the store runs elsewhere (gradcomm-store's generations), not in rank 0.
  bool external_store() const { return options_.external_store; }

  // The init meeting: a gather of every rank's report. Throws gcommTimeout naming
  // the ranks that never connected or never arrived. Once it returns, this
  // communicator counts as made for the generations (generation_for).
  std::vector<RankReport> meet(const RankReport& mine);

  // Orderly end: barrier 'shutdown' (bounded by timeout_s), goodbye, and rank 0
  // stops the store once its peers have their replies. Never throws; a failure is
  // logged (a peer that died, or aborted, fails it at once).
  void shutdown(double timeout_s) noexcept;
  // This rank failed: tell the others (they fail now, naming this rank and the
  // reason), then leave. Never throws.
  void abort(const std::string& reason) noexcept;

 private:
  void close(double flush_s) noexcept;

  // Rank 0's store could not listen: asks whatever holds the port whether it is a
  // store of this job key; if so it has been told of the clash (its job fails),
  // and this rank fails naming it too. Otherwise rethrows `listen_error`.
  [[noreturn]] void fail_listen(const Error& listen_error);

  RendezvousOptions options_;
  uint32_t generation_ = 0;
  Deadline started_;
  Deadline deadline_;
  std::string address_;
  int port_ = 0;
  std::unique_ptr<StoreServer> server_;
  std::unique_ptr<StoreClient> client_;
};

// Throws unless every report says the rank can take part: this rank's own
// problem with its own status, else gcommRemoteError naming the failed ranks.
void throw_if_any_failed(const std::vector<RankReport>& reports, int my_rank);

// Every rank says which transport it is about to build ("nccl", "socket"); throws
// gcommInvalidArgument on every rank when they differ (a rank on the host among
// GPU ranks would otherwise wait for data that never comes).
void agree_on_transport(Bootstrap& boot, const std::string& mine);

}  // namespace gradcomm::comm::bootstrap
