# Tensor statistics: the C++ API (tests/stats_test.cpp) and `fpguard inspect --json`
# against NumPy (tests/reference/stats_test.py).
add_executable(stats_tests stats_test.cpp)
target_link_libraries(stats_tests PRIVATE fpguard_lib GTest::gtest_main)
gtest_discover_tests(stats_tests TEST_PREFIX "stats_" DISCOVERY_TIMEOUT 60)

add_test(NAME reference.stats
         COMMAND "${FPGUARD_TEST_PYTHON}" ${CMAKE_CURRENT_SOURCE_DIR}/reference/stats_test.py
                 --fpguard $<TARGET_FILE:fpguard>)
set_tests_properties(reference.stats PROPERTIES LABELS "reference" TIMEOUT 300)
