# Tensor file I/O: .npz, ONNX TensorProto .pb, directories of tensors, read_tensors.
# The tests run tests/data/make_io_fixtures.py with Debian's /usr/bin/python3 (numpy,
# onnx) to get files written by NumPy and onnx, and to read back what fpguard wrote.
add_executable(io_tests io_test.cpp)
target_link_libraries(io_tests PRIVATE fpguard_lib GTest::gtest_main)
target_compile_definitions(io_tests PRIVATE FPGUARD_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
gtest_discover_tests(io_tests TEST_PREFIX "io_" DISCOVERY_TIMEOUT 60 NO_PRETTY_VALUES
  PROPERTIES LABELS io)
# Model inputs (include/fpguard/inputs.hpp) through the library: option errors, seeds,
# distributions, and the same tensors as `fpguard run` (the binary is run on a model the
# test writes).
add_executable(inputs_tests inputs_test.cpp)
target_link_libraries(inputs_tests PRIVATE fpguard_lib GTest::gtest_main)
target_compile_definitions(inputs_tests PRIVATE FPGUARD_BIN="$<TARGET_FILE:fpguard>")
add_dependencies(inputs_tests fpguard)
gtest_discover_tests(inputs_tests TEST_PREFIX "io_inputs_" DISCOVERY_TIMEOUT 60 NO_PRETTY_VALUES
  PROPERTIES LABELS io)
