# Unit tests: one <module>_test.cpp per source module, plus exhaustive sweeps of all 2^32
# float32 inputs (exhaustive_tests, label "exhaustive": minutes each, run in parallel by
# ctest -j, one ctest entry per gtest).
add_executable(unit_tests
  depthwise_test.cpp
  gemv_test.cpp
  format_test.cpp
  round_test.cpp
  round_simd_test.cpp
  scaled_test.cpp
  tensor_test.cpp
  vmath_test.cpp
)
target_link_libraries(unit_tests PRIVATE fpguard_lib GTest::gtest_main hwy::hwy)
target_include_directories(unit_tests PRIVATE ${PROJECT_SOURCE_DIR}/src)
gtest_discover_tests(unit_tests DISCOVERY_TIMEOUT 60 NO_PRETTY_VALUES PROPERTIES LABELS unit)

add_executable(exhaustive_tests exhaustive_test.cpp vmath_exhaustive_test.cpp)
target_link_libraries(exhaustive_tests PRIVATE fpguard_lib GTest::gtest_main hwy::hwy)
target_include_directories(exhaustive_tests PRIVATE ${PROJECT_SOURCE_DIR}/src)
gtest_discover_tests(exhaustive_tests DISCOVERY_TIMEOUT 60 NO_PRETTY_VALUES
  PROPERTIES LABELS exhaustive TIMEOUT 600)
