add_executable(unit_tests
  format_test.cpp
)
target_link_libraries(unit_tests PRIVATE fpguard_lib GTest::gtest_main hwy::hwy)
target_include_directories(unit_tests PRIVATE ${PROJECT_SOURCE_DIR}/src)
gtest_discover_tests(unit_tests DISCOVERY_TIMEOUT 60)
