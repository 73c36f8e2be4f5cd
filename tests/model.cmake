# The model layer (IR, ONNX load/save), the executor and its kernels, the ONNX node
# conformance runner, and `fpguard run` end to end. The test models come from
# tests/data/make_models.py (Debian's python3 + onnx), generated at build time.
set(_fpg_model_data ${CMAKE_CURRENT_BINARY_DIR}/model_data)
add_custom_command(
  OUTPUT ${_fpg_model_data}/mlp.onnx
  COMMAND "${FPGUARD_TEST_PYTHON}" ${CMAKE_CURRENT_SOURCE_DIR}/data/make_models.py ${_fpg_model_data}
  DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/data/make_models.py
  COMMENT "Generating the test models (tests/data/make_models.py)")
add_custom_target(model_test_data DEPENDS ${_fpg_model_data}/mlp.onnx)

foreach(_t model exec values)
  add_executable(${_t}_tests ${_t}_test.cpp)
  add_dependencies(${_t}_tests model_test_data)
  target_link_libraries(${_t}_tests PRIVATE fpguard_lib GTest::gtest_main)
  target_compile_definitions(${_t}_tests PRIVATE
    FPGUARD_MODEL_DATA="${_fpg_model_data}"
    FPGUARD_TEST_PYTHON="${FPGUARD_TEST_PYTHON}"
    FPGUARD_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  gtest_discover_tests(${_t}_tests TEST_PREFIX "${_t}_" DISCOVERY_TIMEOUT 60 NO_PRETTY_VALUES
    PROPERTIES LABELS model)
endforeach()
target_link_libraries(exec_tests PRIVATE hwy::hwy)  # vector kernels tested on every target

# The model parser against protobuf's own (it sees protobuf types: src/model's internals).
add_executable(onnx_parse_tests onnx_parse_test.cpp)
add_dependencies(onnx_parse_tests model_test_data)
target_include_directories(onnx_parse_tests PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(onnx_parse_tests PRIVATE fpguard_lib onnx_proto protobuf::libprotobuf
                                               GTest::gtest_main)
target_compile_definitions(onnx_parse_tests PRIVATE FPGUARD_MODEL_DATA="${_fpg_model_data}"
                                                    FPGUARD_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
gtest_discover_tests(onnx_parse_tests TEST_PREFIX "model_" DISCOVERY_TIMEOUT 60 NO_PRETTY_VALUES
  PROPERTIES LABELS model)

add_test(NAME conformance.onnx_node
         COMMAND "${FPGUARD_TEST_PYTHON}" ${CMAKE_CURRENT_SOURCE_DIR}/conformance/run_conformance.py
                 --fpguard $<TARGET_FILE:fpguard>)
set_tests_properties(conformance.onnx_node PROPERTIES LABELS "model;conformance" TIMEOUT 900)
# The same node tests on float64 carriers (`run --precision float64`): every kernel's
# double instantiation, same tolerances and expected failures.
add_test(NAME conformance.onnx_node_fp64
         COMMAND "${FPGUARD_TEST_PYTHON}" ${CMAKE_CURRENT_SOURCE_DIR}/conformance/run_conformance.py
                 --fpguard $<TARGET_FILE:fpguard> --precision float64)
set_tests_properties(conformance.onnx_node_fp64 PROPERTIES LABELS "model;conformance" TIMEOUT 900)
# The guards of the conformance run (a removed op, an expected failure that passes, a
# stale skip reason each make it fail), on the node tests of one op.
add_test(NAME conformance.guard
         COMMAND "${FPGUARD_TEST_PYTHON}" ${CMAKE_CURRENT_SOURCE_DIR}/conformance/guard_test.py
                 --fpguard $<TARGET_FILE:fpguard>)
set_tests_properties(conformance.guard PROPERTIES LABELS "model;conformance" TIMEOUT 600)

add_test(NAME cli.run
         COMMAND "${FPGUARD_TEST_PYTHON}" ${CMAKE_CURRENT_SOURCE_DIR}/cli/run_test.py
                 --fpguard $<TARGET_FILE:fpguard>)
set_tests_properties(cli.run PROPERTIES LABELS model)

# External data: memory-mapped weights used in place, outputs as the inline model's, the
# input files never written, a short data file refused (exit 2).
add_test(NAME cli.external_data
         COMMAND "${FPGUARD_TEST_PYTHON}" ${CMAKE_CURRENT_SOURCE_DIR}/cli/external_data_test.py
                 --fpguard $<TARGET_FILE:fpguard>)
set_tests_properties(cli.external_data PROPERTIES LABELS "model;cli")

# Small versions of the real-architecture bench set (bench/make_real_models.py: DBNet-style
# detector, CRNN with a bidirectional LSTM, U-Net): run against PyTorch, check in float16.
add_test(NAME cli.realarch
         COMMAND "${FPGUARD_TEST_PYTHON}" ${CMAKE_CURRENT_SOURCE_DIR}/cli/realarch_test.py
                 --fpguard $<TARGET_FILE:fpguard>)
set_tests_properties(cli.realarch PROPERTIES LABELS "model;cli" TIMEOUT 300)

# `run --profile`: every node once, op-type counts against onnx, shares, JSON = text, body paths.
add_test(NAME cli.profile
         COMMAND "${FPGUARD_TEST_PYTHON}" ${CMAKE_CURRENT_SOURCE_DIR}/cli/profile_test.py
                 --fpguard $<TARGET_FILE:fpguard>)
set_tests_properties(cli.profile PROPERTIES LABELS model)

# `run` fuses a Conv or MatMul with the activation, Add and element-wise nodes after it:
# byte for byte `run --no-fusion`'s outputs (float32 and float16) on small conv networks of
# the bench scripts and small BERT and GPT-2 encoders (MatMul + bias + GELU).
add_test(NAME cli.fusion
         COMMAND "${FPGUARD_TEST_PYTHON}" ${CMAKE_CURRENT_SOURCE_DIR}/cli/fusion_test.py
                 --fpguard $<TARGET_FILE:fpguard>)
set_tests_properties(cli.fusion PROPERTIES LABELS "model;cli" TIMEOUT 600)

# The float64 truth run against NumPy's float64, and check --reference fp64.
add_test(NAME cli.fp64
         COMMAND "${FPGUARD_TEST_PYTHON}" ${CMAKE_CURRENT_SOURCE_DIR}/cli/fp64_test.py
                 --fpguard $<TARGET_FILE:fpguard> --examples ${PROJECT_SOURCE_DIR}/examples)
set_tests_properties(cli.fp64 PROPERTIES LABELS "model;analysis")
