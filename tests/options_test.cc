#include "sim/config/options.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace servesim {
namespace {

TEST(OptionReader, ReadsTypedValuesWithDefaults) {
  toml::table t = toml::parse("n = 3\nx = 2\ny = inf\ns = \"batch\"\n[sub]\nk = 1\n");
  OptionReader r(t, "policy");
  EXPECT_EQ(r.integer("n", 0, 1, 10), 3);
  EXPECT_EQ(r.integer("absent", 7, 1, 10), 7);
  EXPECT_DOUBLE_EQ(r.number("x", 0, 0, 10), 2.0);  // an integer is a number too
  EXPECT_TRUE(std::isinf(r.number("y", 0, 0, std::numeric_limits<double>::infinity())));
  EXPECT_EQ(r.choice("s", "each", {"each", "batch"}), "batch");
  ASSERT_NE(r.table("sub"), nullptr);
  r.reject_unknown();
  EXPECT_TRUE(r.ok()) << r.error().message;
}

TEST(OptionReader, BooleansAndRefusedKeys) {
  toml::table t = toml::parse("on = true\noff = false\nold = 4\n", std::string_view("p.toml"));
  OptionReader r(t, "policy");
  EXPECT_TRUE(r.boolean("on", false));
  EXPECT_FALSE(r.boolean("off", true));
  EXPECT_TRUE(r.boolean("absent", true));
  EXPECT_TRUE(r.has("old"));
  r.refuse("absent", "never said");  // not set: nothing to refuse
  EXPECT_TRUE(r.ok());
  r.refuse("old", "is gone; use new");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "p.toml:3:7: policy.old: is gone; use new");
  toml::table bad = toml::parse("on = \"yes\"\n", std::string_view("p.toml"));
  OptionReader b(bad, "policy");
  b.boolean("on", false);
  EXPECT_EQ(b.error().message, "p.toml:1:6: policy.on: expected true or false, got \"yes\"");
}

TEST(OptionReader, TheFirstErrorWinsAndNamesFileLineAndKey) {
  toml::table t = toml::parse("a = 1\nrelease = \"sometimes\"\nn = -1\n", std::string_view("p.toml"));
  OptionReader r(t, "policy");
  r.choice("release", "each", {"each", "batch"});
  r.integer("n", 0, 0, 10);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.error().message,
            "p.toml:2:11: policy.release: expected one of 'each' | 'batch', got \"sometimes\"");
}

TEST(OptionReader, UnknownKeysListTheKnownOnes) {
  toml::table t = toml::parse("max_wait = 1\nmax_wiat = 2\n", std::string_view("p.toml"));
  OptionReader r(t, "policy");
  r.number("max_wait", 0, 0, 10);
  r.allow("release");
  r.reject_unknown();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "p.toml:2:12: policy.max_wiat: unknown key (known: max_wait, release)");
}

TEST(OptionReader, ValuesMadeByTheProgramComeFromTheCommandLine) {
  toml::table t{{"tp", 0}};
  OptionReader r(t, "");
  r.integer("tp", 1, 1, 8);
  EXPECT_EQ(r.error().message, "command line: tp: expected an integer in [1, 8], got 0");
}

TEST(OptionReader, WrongTypesAreErrors) {
  toml::table t = toml::parse("n = 2.5\ns = 3\nsub = 1\n");
  OptionReader a(t, "");
  a.integer("n", 0, 0, 10);
  EXPECT_FALSE(a.ok());
  OptionReader b(t, "");
  b.string("s", "");
  EXPECT_FALSE(b.ok());
  OptionReader c(t, "");
  EXPECT_EQ(c.table("sub"), nullptr);
  EXPECT_FALSE(c.ok());
}

}  // namespace
}  // namespace servesim
