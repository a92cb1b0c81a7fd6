#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <thread>

#include "common/api_guard.hpp"
#include "common/error.hpp"

namespace gradcomm {
namespace {

TEST(Status, EveryValueHasANameAndDescription) {
  for (int s = 0; s < gcommNumStatuses; ++s) {
    auto status = static_cast<gcommStatus_t>(s);
    ASSERT_NE(status_name(status), nullptr) << s;
    ASSERT_NE(status_string(status), nullptr) << s;
    EXPECT_EQ(std::string(status_name(status)).rfind("gcomm", 0), 0u);
  }
  EXPECT_STREQ(status_name(gcommTimeout), "gcommTimeout");
  EXPECT_EQ(status_name(static_cast<gcommStatus_t>(-1)), nullptr);
  EXPECT_EQ(status_name(gcommNumStatuses), nullptr);
}

TEST(Error, CarriesStatusAndMessage) {
  try {
    fail(gcommTimeout, "rank ", 2, " never arrived");
    FAIL() << "fail() returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), gcommTimeout);
    EXPECT_EQ(e.message(), "rank 2 never arrived");
  }
}

TEST(ApiGuard, MapsEachKindOfFailureToAStatusAndMessage) {
  clear_last_error();
  EXPECT_EQ(api_call("f", [] {}), gcommSuccess);
  EXPECT_STREQ(last_error(), "");

  EXPECT_EQ(api_call("f", [] { fail(gcommInvalidState, "not begun"); }), gcommInvalidState);
  EXPECT_STREQ(last_error(), "f: not begun");

  EXPECT_EQ(api_call("alloc", [] { throw std::bad_alloc(); }), gcommOutOfMemory);
  EXPECT_NE(std::string(last_error()).find("alloc: out of host memory"), std::string::npos);

  EXPECT_EQ(api_call("g", [] { throw std::runtime_error("boom"); }), gcommInternalError);
  EXPECT_NE(std::string(last_error()).find("boom"), std::string::npos);

  EXPECT_EQ(api_call("h", [] { throw 42; }), gcommInternalError);
  EXPECT_NE(std::string(last_error()).find("unknown exception"), std::string::npos);
}

TEST(ApiGuard, SuccessDoesNotClearTheLastError) {
  (void)api_call("f", [] { fail(gcommTimeout, "late"); });
  EXPECT_EQ(api_call("f", [] {}), gcommSuccess);
  EXPECT_STREQ(last_error(), "f: late");
}

// Issue 19: messages name the failed function, never the source expression.
TEST(Error, CalledFunctionNamesTheFunctionNotTheExpression) {
  EXPECT_EQ(called_function("cudaMalloc(&p, a.count * sizeof(float))"), "cudaMalloc");
  EXPECT_EQ(called_function("nccl().AllReduce(a.send, a.recv, a.count, t, op, comm_, stream)"),
            "ncclAllReduce");
  EXPECT_EQ(called_function("nccl().GroupStart()"), "ncclGroupStart");
  EXPECT_EQ(called_function("::cudaFree(p)"), "cudaFree");
  EXPECT_EQ(called_function("cudaStreamWaitEvent(stream, g.ready[q], 0)"), "cudaStreamWaitEvent");
  EXPECT_EQ(called_function("no call at all"), "no call at all");
  EXPECT_EQ(called_function(""), "");
  EXPECT_EQ(called_function(nullptr), "");
}

TEST(LastError, IsPerThread) {
  set_last_error("main thread's error");
  std::string seen = "unset";
  std::thread t([&] {
    seen = last_error();
    set_last_error("other thread's error");
  });
  t.join();
  EXPECT_EQ(seen, "");
  EXPECT_STREQ(last_error(), "main thread's error");
}

TEST(Require, NamesTheNullArgument) {
  int* out = nullptr;
  EXPECT_EQ(api_call("f", [&] { GCOMM_REQUIRE_NOT_NULL(out); }), gcommInvalidArgument);
  EXPECT_NE(std::string(last_error()).find("'out' must not be NULL"), std::string::npos);
}

}  // namespace
}  // namespace gradcomm
