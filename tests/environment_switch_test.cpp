// The SDK's environment switches (triax/environment_switch.hpp): which values turn a switch on,
// off, or leave the caller's own choice.
#include "triax/environment_switch.hpp"

#include <gtest/gtest.h>

#include "scoped_variable.hpp"

namespace {

constexpr const char* kVariable = "TRIAX_ENVIRONMENT_SWITCH_TEST";

TEST(EnvironmentSwitch, OnUnlessZeroAndOnWhenOne) {
  {
    ScopedVariable unset(kVariable, nullptr);
    EXPECT_TRUE(triax::switched_on_unless_zero(kVariable));
    EXPECT_FALSE(triax::switched_on_when_one(kVariable));
  }
  {
    ScopedVariable zero(kVariable, "0");
    EXPECT_FALSE(triax::switched_on_unless_zero(kVariable));
    EXPECT_FALSE(triax::switched_on_when_one(kVariable));
  }
  ScopedVariable one(kVariable, "1");
  EXPECT_TRUE(triax::switched_on_unless_zero(kVariable));
  EXPECT_TRUE(triax::switched_on_when_one(kVariable));
}

TEST(EnvironmentSwitch, ForcedOnlyWhenSetToAValue) {
  {
    ScopedVariable unset(kVariable, nullptr);
    EXPECT_FALSE(triax::switch_forced(kVariable).has_value());
  }
  {
    ScopedVariable empty(kVariable, "");
    EXPECT_FALSE(triax::switch_forced(kVariable).has_value());
  }
  {
    ScopedVariable zero(kVariable, "0");
    EXPECT_EQ(triax::switch_forced(kVariable), std::optional<bool>(false));
  }
  {
    ScopedVariable one(kVariable, "1");
    EXPECT_EQ(triax::switch_forced(kVariable), std::optional<bool>(true));
  }
  ScopedVariable other(kVariable, "yes");
  EXPECT_EQ(triax::switch_forced(kVariable), std::optional<bool>(true));
}

}  // namespace
