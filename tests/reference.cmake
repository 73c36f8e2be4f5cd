# Comparisons with independent references (torch, NumPy, exact rationals) and end-to-end
# tests of the real binary; see tests/reference/ and tests/cli/.
#
# The references are Debian's python3 with python3-numpy and python3-torch (installed by
# scripts/setup), not whatever `python3` comes first on PATH (a pyenv or venv Python
# usually has neither). Set FPGUARD_TEST_PYTHON to use another interpreter.

# The generic rounding path as a byte stream, for the exhaustive comparisons.
add_executable(round_dump ${CMAKE_CURRENT_SOURCE_DIR}/reference/round_dump.cpp)
target_link_libraries(round_dump PRIVATE fpguard_lib)

set(FPGUARD_TEST_PYTHON /usr/bin/python3 CACHE FILEPATH
    "Python with numpy and torch for the reference and CLI tests (Debian's, from scripts/setup)")

# The references are not optional: a test that silently does not run is no test. A
# Python without numpy and torch stops the configuration, saying how to fix it.
execute_process(COMMAND "${FPGUARD_TEST_PYTHON}" -c "import numpy, torch, onnx, torchvision"
                RESULT_VARIABLE _fpg_rc OUTPUT_QUIET ERROR_QUIET)
if(NOT _fpg_rc EQUAL 0)
  message(FATAL_ERROR "${FPGUARD_TEST_PYTHON} cannot import numpy, torch, onnx and torchvision, "
                      "which the reference tests need: run scripts/setup (python3-numpy, "
                      "python3-torch, python3-onnx, python3-torchvision), set "
                      "FPGUARD_TEST_PYTHON, or configure with "
                      "-DFPGUARD_BUILD_TESTS=OFF.")
endif()
set(_fpg_ref ${CMAKE_CURRENT_SOURCE_DIR}/reference)
set(_fpg_cli ${CMAKE_CURRENT_SOURCE_DIR}/cli)

add_test(NAME reference.exact
         COMMAND "${FPGUARD_TEST_PYTHON}" ${_fpg_ref}/exact_test.py --fpguard $<TARGET_FILE:fpguard>)
add_test(NAME cli.end_to_end
         COMMAND "${FPGUARD_TEST_PYTHON}" ${_fpg_cli}/cli_test.py --fpguard $<TARGET_FILE:fpguard>)
# Hundreds of runs of the binary: seconds in a Release build, minutes under ASan+UBSan
# (make test-sanitize), where 300 s ran out with the conformance runs beside it.
set_tests_properties(reference.exact PROPERTIES LABELS "reference" TIMEOUT 1200)
set_tests_properties(cli.end_to_end PROPERTIES LABELS "cli" TIMEOUT 300)

add_test(NAME reference.spectral
         COMMAND "${FPGUARD_TEST_PYTHON}" ${_fpg_ref}/spectral_test.py --fpguard $<TARGET_FILE:fpguard>)
set_tests_properties(reference.spectral PROPERTIES LABELS "reference;model" TIMEOUT 300)

add_test(NAME reference.conv
         COMMAND "${FPGUARD_TEST_PYTHON}" ${_fpg_ref}/conv_test.py --fpguard $<TARGET_FILE:fpguard>)
set_tests_properties(reference.conv PROPERTIES LABELS "reference;model" TIMEOUT 300)

add_test(NAME reference.resize
         COMMAND "${FPGUARD_TEST_PYTHON}" ${_fpg_ref}/resize_test.py --fpguard $<TARGET_FILE:fpguard>)
set_tests_properties(reference.resize PROPERTIES LABELS "reference;model" TIMEOUT 300)

add_test(NAME reference.quantize
         COMMAND "${FPGUARD_TEST_PYTHON}" ${_fpg_ref}/quantize_test.py --fpguard $<TARGET_FILE:fpguard>)
set_tests_properties(reference.quantize PROPERTIES LABELS "reference;model" TIMEOUT 300)

add_test(NAME reference.qlinear
         COMMAND "${FPGUARD_TEST_PYTHON}" ${_fpg_ref}/qlinear_test.py --fpguard $<TARGET_FILE:fpguard>)
set_tests_properties(reference.qlinear PROPERTIES LABELS "reference;model" TIMEOUT 300)

add_test(NAME reference.finfo
         COMMAND "${FPGUARD_TEST_PYTHON}" ${_fpg_ref}/finfo_test.py --fpguard $<TARGET_FILE:fpguard>)
set_tests_properties(reference.finfo PROPERTIES LABELS "reference" TIMEOUT 120)
# Every float32 bit pattern through the generic path, against torch: minutes each.
foreach(_fpg_format float16 bfloat16)
  add_test(NAME reference.torch_exhaustive.${_fpg_format}
           COMMAND "${FPGUARD_TEST_PYTHON}" ${_fpg_ref}/torch_exhaustive_test.py
                   --fpguard $<TARGET_FILE:fpguard> --round-dump $<TARGET_FILE:round_dump>
                   --format ${_fpg_format})
  set_tests_properties(reference.torch_exhaustive.${_fpg_format}
                       PROPERTIES LABELS "reference;exhaustive" TIMEOUT 900
                                  PROCESSORS 2)  # round_dump and Python, concurrently
endforeach()

# The Makefile: `make run` builds only the CLI (ninja's command lists on a fresh
# configuration), `make install` installs a working fpguard (cli/make_test.py).
add_test(NAME cli.make
         COMMAND "${FPGUARD_TEST_PYTHON}" ${_fpg_cli}/make_test.py
                 --source ${PROJECT_SOURCE_DIR} --build ${PROJECT_BINARY_DIR}
                 --python $<BOOL:${FPGUARD_PYTHON}>)
set_tests_properties(cli.make PROPERTIES LABELS "cli" TIMEOUT 600)

# The libraries fpguard loads on first use (src/lazy/library.hpp): which ones each kind of
# command opens, and a copy of fpguard without its ONNX module (cli/lazy_test.py). Not in
# a build that links them (FPGUARD_LAZY_LIBS=OFF: scripts/test-sanitize).
if(FPGUARD_LAZY_LIBS)
  add_test(NAME cli.lazy
           COMMAND "${FPGUARD_TEST_PYTHON}" ${_fpg_cli}/lazy_test.py --fpguard $<TARGET_FILE:fpguard>
                   --source ${PROJECT_SOURCE_DIR})
  set_tests_properties(cli.lazy PROPERTIES LABELS "cli" TIMEOUT 300)
endif()

# Every console example of README.md and docs/*.md, run and compared with its text; every
# relative link resolves inside the repository (cli/docs_test.py).
add_test(NAME cli.docs
         COMMAND "${FPGUARD_TEST_PYTHON}" ${_fpg_cli}/docs_test.py --fpguard $<TARGET_FILE:fpguard>
                 --source ${PROJECT_SOURCE_DIR})
set_tests_properties(cli.docs PROPERTIES LABELS "cli" TIMEOUT 900)

# Scaled formats (OCP MX, NVFP4, scaled FP8) through `round`, against the NumPy reference
# written from their definitions (tests/reference/mxref.py), values and codes bit for bit.
add_test(NAME reference.mx
         COMMAND "${FPGUARD_TEST_PYTHON}" ${_fpg_ref}/mx_test.py --fpguard $<TARGET_FILE:fpguard>)
set_tests_properties(reference.mx PROPERTIES LABELS "reference" TIMEOUT 300)

# `inspect` with scaled formats: every block finding recomputed with the same NumPy
# reference (tests/reference/mx_inspect_test.py).
add_test(NAME reference.mx_inspect
         COMMAND "${FPGUARD_TEST_PYTHON}" ${_fpg_ref}/mx_inspect_test.py --fpguard $<TARGET_FILE:fpguard>)
set_tests_properties(reference.mx_inspect PROPERTIES LABELS "reference" TIMEOUT 300)

add_test(NAME reference.reduce
         COMMAND "${FPGUARD_TEST_PYTHON}" ${_fpg_ref}/reduce_test.py --fpguard $<TARGET_FILE:fpguard>)
set_tests_properties(reference.reduce PROPERTIES LABELS "reference;model" TIMEOUT 300)
