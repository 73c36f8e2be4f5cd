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

# Which of the modules the tests need does FPGUARD_TEST_PYTHON have?
set(_fpg_have_numpy FALSE)
set(_fpg_have_torch FALSE)
if(EXISTS "${FPGUARD_TEST_PYTHON}")
  execute_process(COMMAND "${FPGUARD_TEST_PYTHON}" -c "import numpy"
                  RESULT_VARIABLE _fpg_rc OUTPUT_QUIET ERROR_QUIET)
  if(_fpg_rc EQUAL 0)
    set(_fpg_have_numpy TRUE)
  endif()
  execute_process(COMMAND "${FPGUARD_TEST_PYTHON}" -c "import numpy, torch"
                  RESULT_VARIABLE _fpg_rc OUTPUT_QUIET ERROR_QUIET)
  if(_fpg_rc EQUAL 0)
    set(_fpg_have_torch TRUE)
  endif()
endif()

set(_fpg_ref ${CMAKE_CURRENT_SOURCE_DIR}/reference)
set(_fpg_cli ${CMAKE_CURRENT_SOURCE_DIR}/cli)

if(_fpg_have_numpy)
  add_test(NAME reference.exact
           COMMAND "${FPGUARD_TEST_PYTHON}" ${_fpg_ref}/exact_test.py --fpguard $<TARGET_FILE:fpguard>)
  add_test(NAME cli.end_to_end
           COMMAND "${FPGUARD_TEST_PYTHON}" ${_fpg_cli}/cli_test.py --fpguard $<TARGET_FILE:fpguard>)
  set_tests_properties(reference.exact PROPERTIES LABELS "reference" TIMEOUT 300)
  set_tests_properties(cli.end_to_end PROPERTIES LABELS "cli" TIMEOUT 300)
else()
  message(WARNING "${FPGUARD_TEST_PYTHON} cannot import numpy: the exact-reference and CLI "
                  "tests are not registered. Run scripts/setup (python3-numpy) or set "
                  "FPGUARD_TEST_PYTHON.")
endif()

if(_fpg_have_torch)
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
else()
  message(WARNING "${FPGUARD_TEST_PYTHON} cannot import numpy and torch: the finfo and "
                  "exhaustive torch comparisons are not registered. Run scripts/setup "
                  "(python3-numpy, python3-torch) or set FPGUARD_TEST_PYTHON.")
endif()
