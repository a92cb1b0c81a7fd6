// The transport table (comm/transports.hpp): which transport a store-met rank builds.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "comm/transports.hpp"
#include "common/error.hpp"
#include "gradcomm/gradcomm.h"

namespace gradcomm::comm {
namespace {

std::string refusal(gcommTransport_t requested, const gcommDevice_t& device) {
  try {
    transport_for_job(requested, device);
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), gcommInvalidArgument);
    return e.message();
  }
  return "(accepted)";
}

// Auto means the choice made once the ranks met: on a GPU NCCL, or cuda-ipc when
// every rank is on one GPU (comm/cuda_ipc/); on the host shm on one host, else
// socket (comm/host_transport.hpp); unless a transport was named (NCCL then refuses
// the host, with the reason, in store_init, after the ranks meet).
TEST(Transports, TheTransportFollowsTheDevice) {
  EXPECT_EQ(std::string(transport_for_job(gcommTransportAuto, gcommCudaDevice(1)).name), "auto");
  EXPECT_EQ(transport_for_job(gcommTransportAuto, gcommCudaDevice(1)).serves, gcommDeviceCuda);
  EXPECT_EQ(transport_for_job(gcommTransportCudaIpc, gcommCudaDevice(0)).kind, gcommTransportCudaIpc);
  EXPECT_NE(refusal(gcommTransportCudaIpc, gcommHostDevice()).find("which moves GPU memory"),
            std::string::npos);
  EXPECT_EQ(std::string(transport_for_job(gcommTransportAuto, gcommHostDevice()).name), "auto");
  EXPECT_EQ(transport_for_job(gcommTransportShm, gcommHostDevice()).kind, gcommTransportShm);
  EXPECT_EQ(transport_for_job(gcommTransportSocket, gcommHostDevice()).kind, gcommTransportSocket);
  EXPECT_EQ(transport_for_job(gcommTransportNccl, gcommHostDevice()).kind, gcommTransportNccl);
  EXPECT_EQ(transport_for_job(gcommTransportNccl, gcommCudaDevice(0)).kind, gcommTransportNccl);
  EXPECT_NE(refusal(gcommTransportSocket, gcommCudaDevice(0)).find("set config.device to gcommHostDevice()"),
            std::string::npos);
  EXPECT_NE(refusal(gcommTransportLocal, gcommHostDevice()).find("create them with gcommCommInitLocal"),
            std::string::npos);
  EXPECT_NE(refusal(static_cast<gcommTransport_t>(77), gcommHostDevice())
                .find("must be one of gcommTransportAuto, gcommTransportNccl, gcommTransportSocket, "
                      "gcommTransportShm"),
            std::string::npos);
}

TEST(Transports, EveryKindHasOneEntryWithAName) {
  for (gcommTransport_t kind : {gcommTransportNccl, gcommTransportLocal, gcommTransportSocket,
                                gcommTransportShm, gcommTransportCudaIpc}) {
    const TransportEntry* t = find_transport(kind);
    ASSERT_NE(t, nullptr) << kind;
    EXPECT_EQ(t->kind, kind);
    EXPECT_NE(std::string(t->name), "");
    EXPECT_TRUE(t->from_store != nullptr || t->not_from_store != nullptr) << t->name;
  }
  EXPECT_EQ(find_transport(gcommTransportAuto), nullptr);
}

// Names come from the table: the C API's, and the variable's refusal lists them all.
TEST(Transports, NamesComeFromTheTable) {
  EXPECT_EQ(std::string(gcommGetTransportName(gcommTransportSocket)), "socket");
  EXPECT_EQ(std::string(gcommGetTransportName(gcommTransportMpi)), "mpi");
  EXPECT_EQ(std::string(gcommGetTransportName(gcommTransportShm)), "shm");
  EXPECT_EQ(std::string(gcommGetTransportName(gcommTransportCudaIpc)), "cuda-ipc");
  EXPECT_EQ(std::string(gcommGetTransportName(gcommTransportAuto)), "auto");
  EXPECT_EQ(std::string(gcommGetTransportName(static_cast<gcommTransport_t>(77))), "unknown");
  EXPECT_NE(std::string(gcommGetLastError()).find("77 is not a gcommTransport_t"), std::string::npos);
  setenv("GRADCOMM_TRANSPORT", "tcp", 1);
  std::string message;
  try {
    transport_or_env(gcommTransportAuto);
  } catch (const Error& e) {
    message = e.message();
  }
  unsetenv("GRADCOMM_TRANSPORT");
  EXPECT_NE(message.find("'tcp' is not one of auto, nccl, socket, shm, cuda-ipc, local, mpi"),
            std::string::npos)
      << message;
}

}  // namespace
}  // namespace gradcomm::comm
