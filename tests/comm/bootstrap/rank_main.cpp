// One rank of a multi-process job, started by gradcomm_bootstrap_process_tests.
// It learns who it is from the environment, as a real rank would.
//   gradcomm_bootstrap_rank store   the store rendezvous alone (no GPU needed): meet,
//                                   exchange values, a barrier, the shutdown barrier
//   gradcomm_bootstrap_rank capi    gcommCommInitFromEnv, then a barrier, destroy
//   gradcomm_bootstrap_rank socket  gcommCommInitFromEnv on the host (the socket
//                                   transport, or GRADCOMM_TRANSPORT's), 20 checked
//                                   all-reduces, destroy
//   gradcomm_bootstrap_rank reducer the same communicator under a reducer: 6
//                                   synced steps of 5 gradients, each checked
// GRADCOMM_TEST_COUNT=<n>: the socket mode's all-reduces have n floats (100003); a
// failed one says how long it took.
// GRADCOMM_TEST_DIE_AFTER_MEETING=1: exit abruptly (code 3) once every rank met.
// GRADCOMM_TEST_DIE_AT=<k>: exit abruptly (code 4) before collective / step k
// (socket, reducer); GRADCOMM_TEST_KILL_AT / _STOP_AT=<k>: SIGKILL / SIGSTOP
// itself there instead (socket); GRADCOMM_TEST_DIE_AFTER_READY=<m>: in the reducer, after
// marking m gradients of step k ready instead (some buckets already sent).
// After a failure the communicator (and reducer) are still destroyed, and the
// line says whether that worked ("; destroyed cleanly").
// Prints one line, "<status name>: <message>", and exits 0 on success, else 1.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "comm/bootstrap/bootstrap.hpp"
#include "comm/bootstrap/launch_env.hpp"
#include "common/error.hpp"
#include "gradcomm/gradcomm.h"
#include "gradcomm/reducer.h"

using namespace gradcomm;
using namespace gradcomm::comm::bootstrap;

namespace {

std::vector<uint8_t> bytes(const std::string& s) {
  return std::vector<uint8_t>(s.begin(), s.end());
}

int store_rank() {
  try {
    gcommCommConfig_t c = GCOMM_COMM_CONFIG_INITIALIZER;
    c.device = gcommHostDevice();
    LaunchConfig lc = launch_from_env(c, process_environment());
    Bootstrap boot(rendezvous_options(lc));
    throw_if_any_failed(boot.meet(RankReport{}), lc.rank);
    if (std::getenv("GRADCOMM_TEST_DIE_AFTER_MEETING") != nullptr) _exit(3);
    StoreClient& store = boot.store();
    if (lc.rank == 0) store.set("greeting", bytes("from rank 0"), boot.deadline());
    require(store.get("greeting", boot.deadline()) == bytes("from rank 0"), "wrong greeting");
    int next = (lc.rank + 1) % lc.world_size;
    store.set("rank/" + std::to_string(lc.rank), bytes(std::to_string(lc.rank * 10)), boot.deadline());
    require(store.get("rank/" + std::to_string(next), boot.deadline()) == bytes(std::to_string(next * 10)),
            "wrong value from rank ", next);
    store.barrier("done", boot.deadline());
    std::string address = boot.address();
    boot.shutdown(lc.timeout_s);
    std::printf("gcommSuccess: rank %d of %d met at %s\n", lc.rank, lc.world_size, address.c_str());
    return 0;
  } catch (const Error& e) {
    std::printf("%s: %s\n", status_name(e.status()), e.message().c_str());
    return 1;
  }
}

int capi_rank() {
  gcommComm_t comm = nullptr;
  gcommStatus_t s = gcommCommInitFromEnv(nullptr, &comm);
  if (s == gcommSuccess) s = gcommBarrier(comm, nullptr);
  if (s == gcommSuccess) s = gcommCommSynchronize(comm);
  std::string message = s == gcommSuccess ? "" : gcommGetLastError();
  if (comm != nullptr && gcommCommDestroy(comm) != gcommSuccess && s == gcommSuccess) {
    s = gcommInternalError;
    message = gcommGetLastError();
  }
  std::printf("%s: %s\n", gcommGetStatusName(s), message.c_str());
  return s == gcommSuccess ? 0 : 1;
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::atoi(v) : fallback;
}

// "<status>: <message>" of the first failure, then whether destroying worked.
int report(gcommStatus_t s, const std::string& message, gcommReducer_t reducer, gcommComm_t comm) {
  bool clean = true;
  if (reducer != nullptr && gcommReducerDestroy(reducer) != gcommSuccess) clean = false;
  if (comm != nullptr && gcommCommDestroy(comm) != gcommSuccess) clean = false;
  std::printf("%s: %s%s\n", gcommGetStatusName(s), message.c_str(),
              clean ? "; destroyed cleanly" : "; destroy FAILED");
  return s == gcommSuccess && clean ? 0 : 1;
}

// This process's rank of a host (socket transport) job, from the environment.
gcommComm_t host_comm(gcommStatus_t& s, int& rank, int& size) {
  gcommCommConfig_t c = GCOMM_COMM_CONFIG_INITIALIZER;
  c.device = gcommHostDevice();
  gcommComm_t comm = nullptr;
  s = gcommCommInitFromEnv(&c, &comm);
  if (s == gcommSuccess) {
    gcommCommRank(comm, &rank);
    gcommCommSize(comm, &size);
  }
  return comm;
}

int socket_rank() {
  gcommStatus_t s;
  int rank = 0, size = 0;
  gcommComm_t comm = host_comm(s, rank, size);
  if (s != gcommSuccess) return report(s, gcommGetLastError(), nullptr, nullptr);
  const int die_at = env_int("GRADCOMM_TEST_DIE_AT", -1), kill_at = env_int("GRADCOMM_TEST_KILL_AT", -1),
            stop_at = env_int("GRADCOMM_TEST_STOP_AT", -1);
  std::vector<float> x(static_cast<size_t>(env_int("GRADCOMM_TEST_COUNT", 100003)));
  for (int k = 1; k <= 20; ++k) {
    if (k == die_at) _exit(4);
    if (k == kill_at) ::raise(SIGKILL);
    if (k == stop_at) ::raise(SIGSTOP);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((rank + 1) * (i % 7 + k));
    const auto started = std::chrono::steady_clock::now();
    s = gcommAllReduce(comm, x.data(), x.data(), x.size(), gcommFloat32, gcommSum, nullptr);
    if (s != gcommSuccess) {
      const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      char after[64];
      std::snprintf(after, sizeof(after), " [the call failed after %.3f s]", took);
      return report(s, gcommGetLastError() + std::string(after), nullptr, comm);
    }
    const float ranks_sum = static_cast<float>(size * (size + 1) / 2);
    for (size_t i = 0; i < x.size(); ++i)
      if (x[i] != ranks_sum * static_cast<float>(i % 7 + k))
        return report(gcommInternalError, "wrong all-reduce result", nullptr, comm);
  }
  return report(gcommSuccess, "rank " + std::to_string(rank) + " reduced 20 times", nullptr, comm);
}

int reducer_rank() {
  gcommStatus_t s;
  int rank = 0, size = 0;
  gcommComm_t comm = host_comm(s, rank, size);
  if (s != gcommSuccess) return report(s, gcommGetLastError(), nullptr, nullptr);
  const size_t counts[] = {3000, 17, 70000, 1, 5000};
  std::vector<std::vector<float>> grads;
  std::vector<gcommTensor_t> tensors;
  for (size_t c : counts) grads.emplace_back(c);
  for (auto& g : grads) tensors.push_back(gcommTensor_t{g.data(), g.size(), gcommFloat32});
  gcommReducerConfig_t config = GCOMM_REDUCER_CONFIG_INITIALIZER;
  config.bucket_cap_bytes = 64 << 10;  // several buckets: a step sends some before the last gradient
  config.first_bucket_bytes = 16 << 10;
  gcommReducer_t reducer = nullptr;
  s = gcommReducerCreate(comm, tensors.data(), tensors.size(), &config, &reducer);
  if (s != gcommSuccess) return report(s, gcommGetLastError(), nullptr, comm);
  const int die_at = env_int("GRADCOMM_TEST_DIE_AT", -1);
  const int die_after_ready = env_int("GRADCOMM_TEST_DIE_AFTER_READY", -1);
  for (int step = 1; step <= 6; ++step) {
    if (step == die_at && die_after_ready < 0) _exit(4);
    s = gcommReducerBeginStep(reducer, 1);
    // Backward order: the last gradient first.
    for (size_t k = grads.size(); s == gcommSuccess && k-- > 0;) {
      if (step == die_at && static_cast<int>(grads.size() - 1 - k) == die_after_ready) _exit(4);
      for (size_t i = 0; i < grads[k].size(); ++i)
        grads[k][i] = static_cast<float>((rank + 1) * ((i + k) % 5 + step));
      s = gcommReducerMarkReady(reducer, k, nullptr);
    }
    if (s == gcommSuccess) s = gcommReducerFinalize(reducer, nullptr, nullptr);
    if (s != gcommSuccess) return report(s, gcommGetLastError(), reducer, comm);
    const float mean_rank = static_cast<float>(size + 1) / 2.0f;
    for (size_t k = 0; k < grads.size(); ++k)
      for (size_t i = 0; i < grads[k].size(); ++i)
        if (std::fabs(grads[k][i] - mean_rank * static_cast<float>((i + k) % 5 + step)) > 1e-4f)
          return report(gcommInternalError, "wrong averaged gradient", reducer, comm);
  }
  return report(gcommSuccess, "rank " + std::to_string(rank) + " finished 6 steps", reducer, comm);
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "store";
  int rc = mode == "capi"      ? capi_rank()
           : mode == "socket"  ? socket_rank()
           : mode == "reducer" ? reducer_rank()
                               : store_rank();
  std::fflush(stdout);
  return rc;
}
