# Precision experiments: `gemm-error`, `accum`, `targets` and their library
# (tests/experiments_test.cpp), and independent references in Python
# (tests/reference/experiments_test.py: NumPy/torch and exact rationals against the
# matrices gemm_dump writes, the accum rows and the CLI's JSON and errors).
add_executable(experiments_tests experiments_test.cpp)
target_link_libraries(experiments_tests PRIVATE fpguard_lib GTest::gtest_main)
gtest_discover_tests(experiments_tests TEST_PREFIX "experiments_" DISCOVERY_TIMEOUT 60
  NO_PRETTY_VALUES PROPERTIES LABELS unit)

# The matrices of one gemm-error experiment as .npy files, for the Python reference.
add_executable(gemm_dump ${CMAKE_CURRENT_SOURCE_DIR}/reference/gemm_dump.cpp)
target_link_libraries(gemm_dump PRIVATE fpguard_lib nlohmann_json::nlohmann_json)

add_test(NAME experiments_reference
         COMMAND "${FPGUARD_TEST_PYTHON}" ${CMAKE_CURRENT_SOURCE_DIR}/reference/experiments_test.py
                 --fpguard $<TARGET_FILE:fpguard> --gemm-dump $<TARGET_FILE:gemm_dump>)
set_tests_properties(experiments_reference PROPERTIES LABELS "reference" TIMEOUT 600)
