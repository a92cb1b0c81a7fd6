// The collectives over a PeerExchange (comm/exchange/exchange_transport.cpp) with a
// wire that can be made to throw: whatever a call throws half-way — gradcomm's
// own errors, running out of host memory, any other exception — leaves the
// streams out of step, so the peers are told and every later call is refused.
// (The real wires run in tests/comm/socket and the conformance tests.)
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <new>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "comm/exchange/exchange_transport.hpp"
#include "comm/group.hpp"
#include "common/error.hpp"

namespace gradcomm::comm {
namespace {

// Rank 0 of 2; its first phase throws what `thrower` throws, later ones succeed
// without moving a byte. Counts the failure notices sent to the peers.
class ThrowingWire final : public PeerExchange {
 public:
  ThrowingWire(std::function<void()> thrower, int* notices)
      : thrower_(std::move(thrower)), notices_(notices) {}
  int rank() const override { return 0; }
  int size() const override { return 2; }
  void run_phase(std::vector<PeerTransfer>&, const PhaseTag&, Deadline, const std::string&,
                 const std::function<void()>&) override {
    throw_once();
  }
  void run_messages(const std::vector<PeerQueue>&, Deadline, const std::string&) override { throw_once(); }
  size_t received_bytes(int) const override { return 0; }
  void abort() noexcept override {}
  void fail_all(const std::string& reason, double) noexcept override {
    ++*notices_;
    reason_ = reason;
  }
  uint64_t payload_bytes_sent() const noexcept override { return 0; }
  std::string reason_;

 private:
  void throw_once() {
    if (thrown_) return;
    thrown_ = true;
    thrower_();
  }
  std::function<void()> thrower_;
  int* notices_;
  bool thrown_ = false;
};

struct Thrown {
  const char* name;
  std::function<void()> thrower;
  gcommStatus_t status;  // what the C API reports for it (common/api_guard.hpp)
};
void PrintTo(const Thrown& t, std::ostream* os) {
  *os << t.name;
}

class ExchangeFailure : public ::testing::TestWithParam<Thrown> {};

std::vector<float> ones(size_t n) {
  return std::vector<float>(n, 1.5f);
}

// What `call` threw, as gradcomm's error; a test failure when it throws nothing.
Error thrown_by(const std::function<void()>& call) {
  try {
    call();
  } catch (...) {
    return as_error(std::current_exception());
  }
  ADD_FAILURE() << "the call did not fail";
  return Error(gcommSuccess, "");
}

// A communicator over the exchange transport on this test's throwing wire.
std::unique_ptr<Communicator> communicator_over(std::function<void()> thrower, int* notices) {
  return std::make_unique<Communicator>(
      make_exchange_transport(std::make_unique<ThrowingWire>(std::move(thrower), notices),
                              gcommTransportSocket, 30.0),
      30.0);
}

TEST_P(ExchangeFailure, AnyExceptionMidCallTellsThePeersAndRefusesLaterCalls) {
  for (Collective op : {Collective::kAllReduce, Collective::kSend}) {
    SCOPED_TRACE(op == Collective::kAllReduce ? "all-reduce" : "send");
    int notices = 0;
    auto wire = std::make_unique<ThrowingWire>(GetParam().thrower, &notices);
    ThrowingWire* seen = wire.get();
    auto t = make_exchange_transport(std::move(wire), gcommTransportSocket, 30.0);
    std::vector<float> data = ones(1000), out(1000);
    const CollectiveArgs call =
        op == Collective::kSend
            ? p2p_call(Collective::kSend, data.data(), data.size(), gcommFloat32, 1, nullptr)
            : collective_call(op, data.data(), out.data(), data.size(), gcommFloat32, nullptr);
    EXPECT_EQ(thrown_by([&] { t->run(call); }).status(), GetParam().status);  // what the wire threw
    EXPECT_EQ(notices, 1) << "the peers were not told that this rank's streams are out of step";
    EXPECT_FALSE(seen->reason_.empty());
    std::string message;
    EXPECT_EQ(t->poll_async_error(message), gcommRemoteError);
    const Error later = thrown_by([&] { t->run(call); });  // on streams that are out of step
    EXPECT_EQ(later.status(), gcommInvalidState);
    EXPECT_NE(later.message().find("out of step"), std::string::npos) << later.message();
  }
}

// One level up: the communicator records the failure whatever the transport threw,
// so gcommCommGetAsyncError reports it and every later call is refused there.
TEST_P(ExchangeFailure, TheCommunicatorFailsForGoodWhateverTheTransportThrew) {
  int notices = 0;
  auto comm = communicator_over(GetParam().thrower, &notices);
  std::vector<float> data = ones(1000);
  const CollectiveArgs call =
      collective_call(Collective::kAllReduce, data.data(), data.data(), data.size(), gcommFloat32, nullptr);
  EXPECT_EQ(thrown_by([&] { comm->collective(call); }).status(), GetParam().status);
  std::string message;
  EXPECT_EQ(comm->health(message), GetParam().status) << "the communicator did not record the failure";
  EXPECT_NE(message.find("all-reduce"), std::string::npos) << message;
  const Error later = thrown_by([&] { comm->collective(call); });
  EXPECT_NE(later.message().find("has failed"), std::string::npos) << later.message();
}

// A send in a group runs at the group's end (comm/p2p_group.cpp, comm/group.cpp):
// whatever it throws fails the group with that status and the communicator with it.
TEST_P(ExchangeFailure, AGroupWhoseSendThrowsFailsWithItsStatus) {
  int notices = 0;
  auto comm = communicator_over(GetParam().thrower, &notices);
  std::vector<float> data = ones(1000);
  group_start();
  comm->collective(p2p_call(Collective::kSend, data.data(), data.size(), gcommFloat32, 1, nullptr));
  EXPECT_EQ(thrown_by([] { group_end(); }).status(), GetParam().status);
  EXPECT_FALSE(in_group());
  EXPECT_EQ(notices, 1);
  std::string message;
  EXPECT_EQ(comm->health(message), GetParam().status) << message;
}

INSTANTIATE_TEST_SUITE_P(
    Thrown, ExchangeFailure,
    ::testing::Values(Thrown{"gradcomm_error", [] { fail(gcommRemoteError, "rank 1 hung up (injected)"); },
                             gcommRemoteError},
                      Thrown{"out_of_host_memory", [] { throw std::bad_alloc(); }, gcommOutOfMemory},
                      Thrown{"other_exception", [] { throw std::length_error("vector too long (injected)"); },
                             gcommInternalError}),
    [](const ::testing::TestParamInfo<Thrown>& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace gradcomm::comm
