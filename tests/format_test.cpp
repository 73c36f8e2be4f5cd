#include "fpguard/format.hpp"

#include <gtest/gtest.h>

TEST(Format, Float16Max) { EXPECT_EQ(fpguard::parse_format("fp16").max(), 65504.0); }
