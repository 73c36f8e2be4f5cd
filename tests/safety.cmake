# Safe operations (safe_divide, safe_rsqrt) and the loss scaler (GradScaler semantics).
# The LossScaler reference test runs tests/reference/grad_scaler_trace.py with
# FPGUARD_TEST_PYTHON (Debian's python3 with python3-torch, see reference.cmake) and
# compares every step.
add_executable(safety_tests safety_test.cpp)
target_link_libraries(safety_tests PRIVATE fpguard_lib GTest::gtest_main
                      nlohmann_json::nlohmann_json)
target_compile_definitions(safety_tests PRIVATE
  FPG_TEST_PYTHON="${FPGUARD_TEST_PYTHON}"
  FPG_GRAD_SCALER_TRACE="${CMAKE_CURRENT_SOURCE_DIR}/reference/grad_scaler_trace.py")
gtest_discover_tests(safety_tests TEST_PREFIX "safety_" DISCOVERY_TIMEOUT 60 NO_PRETTY_VALUES
  PROPERTIES LABELS unit)
