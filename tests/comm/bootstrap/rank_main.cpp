// One rank of a multi-process job, started by gradcomm_bootstrap_process_tests.
// It learns who it is from the environment, as a real rank would.
//   gradcomm_bootstrap_rank store   the store rendezvous alone (no GPU needed): meet,
//                                   exchange values, a barrier, the shutdown barrier
//   gradcomm_bootstrap_rank capi    gcommCommInitFromEnv, then a barrier, destroy
// GRADCOMM_TEST_DIE_AFTER_MEETING=1: exit abruptly (code 3) once every rank met.
// Prints one line, "<status name>: <message>", and exits 0 on success, else 1.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "comm/bootstrap/bootstrap.hpp"
#include "comm/bootstrap/launch_env.hpp"
#include "common/error.hpp"
#include "gradcomm/gradcomm.h"

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
    RendezvousOptions o;
    o.master_addr = lc.master_addr;
    o.master_port = lc.master_port;
    o.job_key = lc.job_key;
    o.rank = lc.rank;
    o.world_size = lc.world_size;
    o.timeout_s = lc.timeout_s;
    Bootstrap boot(o);
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

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "store";
  int rc = mode == "capi" ? capi_rank() : store_rank();
  std::fflush(stdout);
  return rc;
}
