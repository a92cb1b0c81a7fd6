// The store's wire format: frames round-trip, and every malformed header or
// payload is refused with a reason instead of being trusted.
#include "comm/bootstrap/store_protocol.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.hpp"

namespace gradcomm::comm::bootstrap {
namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(StoreWire, FrameRoundTrips) {
  uint64_t tag = job_key_tag("job-7");
  std::vector<uint8_t> value = {1, 2, 3, 0, 255};
  std::vector<uint8_t> f = Writer().str("key").u32(12345).i32(-3).blob(value).frame(MsgType::kSet, tag);
  ASSERT_EQ(f.size(), kHeaderBytes + 4 + 3 + 4 + 4 + 4 + value.size());
  Header h;
  ASSERT_EQ(parse_header(f.data(), kMaxPayloadBytes, h), "");
  EXPECT_EQ(h.type, MsgType::kSet);
  EXPECT_EQ(h.tag, tag);
  ASSERT_EQ(h.length, f.size() - kHeaderBytes);
  Reader r(f.data() + kHeaderBytes, h.length, "set");
  EXPECT_EQ(r.str(), "key");
  EXPECT_EQ(r.u32(), 12345u);
  EXPECT_EQ(r.i32(), -3);
  EXPECT_EQ(r.blob(), value);
  EXPECT_NO_THROW(r.finish());
}

TEST(StoreWire, JobKeysHaveDistinctTags) {
  EXPECT_NE(job_key_tag("gradcomm"), job_key_tag("gradcomm2"));
  EXPECT_NE(job_key_tag(""), job_key_tag("a"));
  EXPECT_EQ(job_key_tag("x"), job_key_tag("x"));
}

TEST(StoreWire, BadHeadersAreRefusedWithAReason) {
  std::vector<uint8_t> good = Writer().str("k").frame(MsgType::kGet, 1);
  Header h;
  auto bad = good;
  bad[0] ^= 0xff;
  EXPECT_TRUE(contains(parse_header(bad.data(), kMaxPayloadBytes, h), "not a gradcomm store message"));
  bad = good;
  bad[4] = 9;
  EXPECT_TRUE(contains(parse_header(bad.data(), kMaxPayloadBytes, h), "wire version 9"));
  bad = good;
  bad[5] = 17;
  EXPECT_TRUE(contains(parse_header(bad.data(), kMaxPayloadBytes, h), "unknown message type 17"));
  bad = good;
  bad[7] = 1;
  EXPECT_TRUE(contains(parse_header(bad.data(), kMaxPayloadBytes, h), "reserved"));
  // A length over the limit is refused from the header alone, before any payload.
  bad = good;
  bad[16] = 0;
  bad[17] = 0;
  bad[18] = 0x20;  // 2 MiB
  bad[19] = 0;
  EXPECT_TRUE(contains(parse_header(bad.data(), kMaxPayloadBytes, h), "exceeds the limit of 1048576 bytes"));
  EXPECT_TRUE(contains(parse_header(good.data(), 2, h), "exceeds the limit of 2 bytes"));
}

TEST(StoreWire, MalformedPayloadsThrowRemoteError) {
  std::vector<uint8_t> p = Writer().str("abc").payload();
  try {
    Reader r(p.data(), p.size() - 1, "hello");
    (void)r.str();
    FAIL() << "truncated string accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), gcommRemoteError);
    EXPECT_TRUE(contains(e.message(), "malformed hello")) << e.message();
  }
  {
    Reader r(p.data(), p.size(), "hello");
    EXPECT_THROW((void)r.str(2), Error) << "a name over its bound";
  }
  {
    Reader r(p.data(), p.size(), "hello");
    (void)r.u32();
    EXPECT_THROW(r.finish(), Error) << "bytes left over";
  }
  std::vector<uint8_t> huge_len = Writer().u32(0xffffffffu).payload();
  Reader r(huge_len.data(), huge_len.size(), "set");
  EXPECT_THROW((void)r.blob(), Error) << "a blob longer than the payload";
}

TEST(StoreWire, OversizedValuesAreRefusedBeforeSending) {
  std::vector<uint8_t> big(kMaxPayloadBytes + 1);
  try {
    (void)Writer().blob(big);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), gcommInvalidArgument);
    EXPECT_TRUE(contains(e.message(), "exceeds the limit")) << e.message();
  }
  std::vector<uint8_t> almost(kMaxPayloadBytes - 8);
  EXPECT_THROW((void)Writer().str("key").blob(almost).frame(MsgType::kSet, 0), Error);
}

}  // namespace
}  // namespace gradcomm::comm::bootstrap
