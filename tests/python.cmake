# The Python module (python/, docs/python.md): pytest on Debian's python3 with
# PYTHONPATH=BUILD/python, so `import fpguard` is this build's (tests/python/).
if(NOT FPGUARD_PYTHON)
  return()
endif()
execute_process(COMMAND "${FPGUARD_TEST_PYTHON}" -c "import pytest"
                RESULT_VARIABLE _fpg_rc OUTPUT_QUIET ERROR_QUIET)
if(NOT _fpg_rc EQUAL 0)
  message(FATAL_ERROR "${FPGUARD_TEST_PYTHON} cannot import pytest, which the Python module's "
                      "tests need: run scripts/setup (python3-pytest), or configure with "
                      "-DFPGUARD_PYTHON=OFF.")
endif()
add_test(NAME python.module
         COMMAND ${CMAKE_COMMAND} -E env PYTHONPATH=${PROJECT_BINARY_DIR}/python
                 FPGUARD_PYTHONPATH=${PROJECT_BINARY_DIR}/python
                 FPGUARD_CLI=$<TARGET_FILE:fpguard> PYTHONDONTWRITEBYTECODE=1
                 "${FPGUARD_TEST_PYTHON}" -m pytest -q -p no:cacheprovider
                 ${CMAKE_CURRENT_SOURCE_DIR}/python)
set_tests_properties(python.module PROPERTIES LABELS "python" TIMEOUT 300)
