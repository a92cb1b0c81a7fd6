// The text form's options (reducer/compressions.hpp): each type parsed and refused
// with the key and the value, enum fields by name or number, unknown and repeated
// keys, and the table's lookups by name.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "common/error.hpp"
#include "reducer/compressions.hpp"

namespace gradcomm::reducer {
namespace {

std::string refusal(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.message();
  }
  return "";
}

TEST(OptionText, EachTypeIsParsedAndBadValuesAreRefusedNamingTheKey) {
  OptionText o("demo", " n = 3, f=0.25 ,big=0x10, flag=true, off=false, ten=010,, ");
  int n = 0, flag = 0, off = 1;
  float f = 0;
  uint64_t big = 0, ten = 0;
  o.take("n", n);
  o.take("f", f);
  o.take("big", big);
  o.take("flag", flag);
  o.take("off", off);
  o.take("ten", ten);
  o.finish();
  EXPECT_EQ(n, 3);
  EXPECT_EQ(f, 0.25f);
  EXPECT_EQ(big, 16u);
  EXPECT_EQ(flag, 1);
  EXPECT_EQ(off, 0);
  EXPECT_EQ(ten, 10u) << "a leading zero is decimal, not octal";
  EXPECT_NE(refusal([] {
              OptionText t("demo", "n=3x");
              int v = 0;
              t.take("n", v);
            }).find("demo option n='3x' is not an integer"),
            std::string::npos);
  EXPECT_NE(refusal([] {
              OptionText t("demo", "s=-1");
              uint64_t v = 0;
              t.take("s", v);
            }).find("is not a non-negative integer"),
            std::string::npos);
  EXPECT_NE(refusal([] {
              OptionText t("demo", "f=1e-50");  // underflows a float: refused, not taken as 0
              float v = 1;
              t.take("f", v);
            }).find("demo option f='1e-50' is outside a float's range"),
            std::string::npos);
  EXPECT_NE(refusal([] { OptionText t("demo", "a=1,a=2"); }).find("'a' is given twice"), std::string::npos);
  EXPECT_NE(refusal([] { OptionText t("demo", "novalue"); }).find("is not key=value"), std::string::npos);
}

TEST(OptionText, EnumFieldsTakeANameOrANumberAndUnknownKeysAreRefused) {
  OptionText o("demo", "format=e5m2,other=1");
  int format = 0, other = 0;
  o.take("format", format, {{"e4m3", 0}, {"e5m2", 1}});
  o.take("other", other, {{"a", 0}, {"b", 1}});
  o.finish();
  EXPECT_EQ(format, 1);
  EXPECT_EQ(other, 1);
  EXPECT_NE(refusal([] {
              OptionText t("demo", "format=e3m4");
              int v = 0;
              t.take("format", v, {{"e4m3", 0}, {"e5m2", 1}});
            }).find("demo option format='e3m4' is not one of e4m3, e5m2"),
            std::string::npos);
  EXPECT_NE(refusal([] {
              OptionText t("demo", "rank=2,rnak=3");
              int v = 0;
              t.take("rank", v);
              t.finish();
            }).find("demo has no option 'rnak' (its options: rank)"),
            std::string::npos);
}

TEST(CompressionTable, KindsAreFoundByNameAndByValue) {
  std::string options;
  EXPECT_EQ(compression_entry_of_text("int8:block_size=64", &options).kind, gcommCompressionInt8);
  EXPECT_EQ(options, "block_size=64");
  EXPECT_EQ(compression_entry(gcommCompressionPowerSgd).name, std::string("powersgd"));
  EXPECT_EQ(compression_name(gcommCompressionNone), std::string("none"));
  EXPECT_NE(
      refusal([&] { compression_entry_of_text("none", &options); }).find("every reducer starts with none"),
      std::string::npos);
}

}  // namespace
}  // namespace gradcomm::reducer
