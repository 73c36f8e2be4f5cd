# The analysis and rewrite layers (`fpguard check`, `plan`, `convert`): origins and plans
# on crafted graphs, comparisons, rules, lockstep sessions (analysis_test.cpp); the shipped
# examples end to end against NumPy (cli/check_test.py); conversions checked by libonnx's
# checker and shape inference, and run in ONNX Runtime (cli/convert_test.py).
add_executable(analysis_tests analysis_test.cpp)
target_link_libraries(analysis_tests PRIVATE fpguard_lib GTest::gtest_main)
target_include_directories(analysis_tests PRIVATE ${PROJECT_SOURCE_DIR}/src)
gtest_discover_tests(analysis_tests TEST_PREFIX "analysis_" DISCOVERY_TIMEOUT 60 NO_PRETTY_VALUES
  PROPERTIES LABELS analysis)

# The report layer: numbers, tables, wording, JSON written and read back (report_test.cpp).
add_executable(report_tests report_test.cpp)
target_link_libraries(report_tests PRIVATE fpguard_lib GTest::gtest_main)
target_include_directories(report_tests PRIVATE ${PROJECT_SOURCE_DIR}/src)
gtest_discover_tests(report_tests TEST_PREFIX "report_" DISCOVERY_TIMEOUT 60 NO_PRETTY_VALUES
  PROPERTIES LABELS analysis)

# ... and for inspect, gemm-error, accum and targets (report_cmds_test.cpp).
add_executable(report_cmds_tests report_cmds_test.cpp)
target_link_libraries(report_cmds_tests PRIVATE fpguard_lib GTest::gtest_main)
target_include_directories(report_cmds_tests PRIVATE ${PROJECT_SOURCE_DIR}/src)
gtest_discover_tests(report_cmds_tests TEST_PREFIX "report_cmds_" DISCOVERY_TIMEOUT 60
  NO_PRETTY_VALUES PROPERTIES LABELS analysis)

add_test(NAME cli.check
         COMMAND "${FPGUARD_TEST_PYTHON}" ${CMAKE_CURRENT_SOURCE_DIR}/cli/check_test.py
                 --fpguard $<TARGET_FILE:fpguard> --examples ${PROJECT_SOURCE_DIR}/examples)
set_tests_properties(cli.check PROPERTIES LABELS analysis)

# Sharded checks: check --shard I/N parts merged (fpguard merge) equal one check over all
# input sets, in any order; mismatched, duplicate and missing parts refused
# (cli/shard_test.py, docs/scale.md).
add_test(NAME cli.shard
         COMMAND "${FPGUARD_TEST_PYTHON}" ${CMAKE_CURRENT_SOURCE_DIR}/cli/shard_test.py
                 --fpguard $<TARGET_FILE:fpguard> --examples ${PROJECT_SOURCE_DIR}/examples)
set_tests_properties(cli.shard PROPERTIES LABELS analysis)
# A CLI test under mpirun (tests/cli/SCRIPT); in a build without MPI, the script with
# --no-mpi reports the skip.
function(fpguard_mpi_test name script)
  if(FPGUARD_WITH_MPI)
    add_test(NAME ${name}
             COMMAND "${FPGUARD_TEST_PYTHON}" ${CMAKE_CURRENT_SOURCE_DIR}/cli/${script}
                     --fpguard $<TARGET_FILE:fpguard> --examples ${PROJECT_SOURCE_DIR}/examples
                     --mpirun ${MPIEXEC_EXECUTABLE})
  else()
    add_test(NAME ${name}
             COMMAND "${FPGUARD_TEST_PYTHON}" ${CMAKE_CURRENT_SOURCE_DIR}/cli/${script} --no-mpi)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS analysis SKIP_RETURN_CODE 77)
endfunction()
# The same under mpirun: -n 2 and -n 3 equal one process, plan too; a corrupt set on one
# rank ends the job with exit 2 in time (cli/mpi_test.py). Reported as skipped by a build
# without MPI.
fpguard_mpi_test(cli.mpi mpi_test.py)
# Input sets at scale: .npz sets, 250 sets (natural order, --max-sets, --sample-sets), a set
# too large for --max-memory, and the threads of a shard, in shards and merge
# (cli/sets_scale_test.py); then under mpirun, where each rank's threads are its share of
# the cores.
add_test(NAME cli.sets_scale
         COMMAND "${FPGUARD_TEST_PYTHON}" ${CMAKE_CURRENT_SOURCE_DIR}/cli/sets_scale_test.py
                 --fpguard $<TARGET_FILE:fpguard> --examples ${PROJECT_SOURCE_DIR}/examples)
set_tests_properties(cli.sets_scale PROPERTIES LABELS analysis)
fpguard_mpi_test(cli.sets_scale_mpi sets_scale_test.py)
# Scaled precisions (fp8, MX, NVFP4) in run and check: MatMul, Gemm and grouped Conv against
# NumPy on tests/reference/mxref.py, and check --precision fp8 on a folded-BatchNorm conv net
# (cli/scaled_test.py).
add_test(NAME cli.scaled
         COMMAND "${FPGUARD_TEST_PYTHON}" ${CMAKE_CURRENT_SOURCE_DIR}/cli/scaled_test.py
                 --fpguard $<TARGET_FILE:fpguard>)
set_tests_properties(cli.scaled PROPERTIES LABELS analysis)
# Scaled-precision origins (block_underflow, scale_underflow, block_saturation) and plan
# with a scaled precision, counts against NumPy on tests/reference/mxref.py
# (cli/mx_origins_test.py).
add_test(NAME cli.mx_origins
         COMMAND "${FPGUARD_TEST_PYTHON}" ${CMAKE_CURRENT_SOURCE_DIR}/cli/mx_origins_test.py
                 --fpguard $<TARGET_FILE:fpguard>)
set_tests_properties(cli.mx_origins PROPERTIES LABELS analysis)

# Nodes inside If/Loop bodies: origins named by path, loop iterations, subgraph constants,
# --keep-fp32 paths, on small models built with onnx (cli/control_flow_test.py).
add_test(NAME cli.control_flow
         COMMAND "${FPGUARD_TEST_PYTHON}" ${CMAKE_CURRENT_SOURCE_DIR}/cli/control_flow_test.py
                 --fpguard $<TARGET_FILE:fpguard>)
set_tests_properties(cli.control_flow PROPERTIES LABELS analysis)

# A converted model checked against its original (--reference-model) and the rules for models
# other tools converted, on small models built with onnx (cli/reference_model_test.py).
add_test(NAME cli.reference_model
         COMMAND "${FPGUARD_TEST_PYTHON}" ${CMAKE_CURRENT_SOURCE_DIR}/cli/reference_model_test.py
                 --fpguard $<TARGET_FILE:fpguard>)
set_tests_properties(cli.reference_model PROPERTIES LABELS analysis)

# Pages rendered in headless Chromium (Debian's chromium, installed by scripts/setup);
# their screenshots go to the build tree (docs/images/ holds the committed ones).
add_test(NAME cli.html
         COMMAND "${FPGUARD_TEST_PYTHON}" ${CMAKE_CURRENT_SOURCE_DIR}/cli/html_test.py
                 --fpguard $<TARGET_FILE:fpguard> --examples ${PROJECT_SOURCE_DIR}/examples
                 --screenshots ${CMAKE_BINARY_DIR}/screenshots)
set_tests_properties(cli.html PROPERTIES LABELS analysis TIMEOUT 600)

# --annotate OUT.onnx of check and plan: libonnx's checker, outputs unchanged bit for bit,
# each node's metadata equal to --json's numbers, bad output paths (cli/annotate_test.py).
add_test(NAME cli.annotate
         COMMAND "${FPGUARD_TEST_PYTHON}" ${CMAKE_CURRENT_SOURCE_DIR}/cli/annotate_test.py
                 --fpguard $<TARGET_FILE:fpguard> --examples ${PROJECT_SOURCE_DIR}/examples)
set_tests_properties(cli.annotate PROPERTIES LABELS analysis)

# The converted models also run in ONNX Runtime for Node.js, a second runtime for the
# tests only, which `scripts/setup BUILD` installs with npm into BUILD/ort-node (make does).
set(FPGUARD_ORT_NODE_DIR ${PROJECT_BINARY_DIR}/ort-node CACHE PATH
    "onnxruntime-node for the tests (scripts/setup BUILD installs it into BUILD/ort-node)")
add_test(NAME cli.convert
         COMMAND "${FPGUARD_TEST_PYTHON}" ${CMAKE_CURRENT_SOURCE_DIR}/cli/convert_test.py
                 --fpguard $<TARGET_FILE:fpguard> --examples ${PROJECT_SOURCE_DIR}/examples
                 --ort-node ${FPGUARD_ORT_NODE_DIR})
set_tests_properties(cli.convert PROPERTIES LABELS analysis)

# Sequence and optional graph inputs and outputs in check (element by element, length
# mismatches), merge, plan and convert; the converted models run in ONNX Runtime
# (cli/sequence_test.py).
add_test(NAME cli.sequences
         COMMAND "${FPGUARD_TEST_PYTHON}" ${CMAKE_CURRENT_SOURCE_DIR}/cli/sequence_test.py
                 --fpguard $<TARGET_FILE:fpguard> --ort-node ${FPGUARD_ORT_NODE_DIR})
set_tests_properties(cli.sequences PROPERTIES LABELS analysis)

add_executable(rewrite_tests rewrite_test.cpp)
target_link_libraries(rewrite_tests PRIVATE fpguard_lib GTest::gtest_main)
gtest_discover_tests(rewrite_tests TEST_PREFIX "rewrite_" DISCOVERY_TIMEOUT 60 NO_PRETTY_VALUES
  PROPERTIES LABELS analysis)

# What plan hands on to convert: the inputs plan.json records, convert commands that
# convert accepts, the FP8 path, --emit warnings, --objective fewest-casts (converted models
# run in ONNX Runtime) (cli/plan_test.py).
add_test(NAME cli.plan
         COMMAND "${FPGUARD_TEST_PYTHON}" ${CMAKE_CURRENT_SOURCE_DIR}/cli/plan_test.py
                 --fpguard $<TARGET_FILE:fpguard> --examples ${PROJECT_SOURCE_DIR}/examples
                 --ort-node ${FPGUARD_ORT_NODE_DIR})
set_tests_properties(cli.plan PROPERTIES LABELS analysis)
