# Hostile input (docs/reliability.md):
#  - badinput.cases: every malformed input of tests/badinput/cases.txt through the real
#    binary (exit 2, the exact one-line error, no output left, inputs unchanged, bounded
#    time and memory), and badinput.generator: the committed inputs are what
#    make_badinput.py writes;
#  - badinput.interrupt: SIGINT/SIGTERM/SIGHUP during `fpguard round` leave no partial file;
#  - hostile_*: the memory limit, from-memory readers, zip bombs, interrupt cleanup (API);
#  - regression.<harness>: each fuzz harness (fuzz/) replays tests/regressions/<harness>/.
set(_fpg_bad ${CMAKE_CURRENT_SOURCE_DIR}/badinput)
# ASan reserves terabytes of address space for its shadow: no RLIMIT_AS under sanitizers.
set(_fpg_bad_flags)
if(CMAKE_CXX_FLAGS MATCHES "sanitize=address")
  list(APPEND _fpg_bad_flags --no-rlimit)
endif()
add_test(NAME badinput.cases
         COMMAND "${FPGUARD_TEST_PYTHON}" ${_fpg_bad}/run_badinput.py
                 --fpguard $<TARGET_FILE:fpguard> ${_fpg_bad_flags})
add_test(NAME badinput.generator
         COMMAND "${FPGUARD_TEST_PYTHON}" ${_fpg_bad}/make_badinput.py --check)
add_test(NAME badinput.interrupt
         COMMAND "${FPGUARD_TEST_PYTHON}" ${_fpg_bad}/interrupt_test.py
                 --fpguard $<TARGET_FILE:fpguard>)
set_tests_properties(badinput.cases badinput.generator badinput.interrupt
                     PROPERTIES LABELS "badinput;cli" TIMEOUT 600)

add_executable(hostile_tests hostile_test.cpp)
target_link_libraries(hostile_tests PRIVATE fpguard_lib GTest::gtest_main)
target_compile_definitions(hostile_tests PRIVATE FPGUARD_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
# Listed by the binary itself (a test the source scan of gtest_add_tests would miss still
# runs). gtest_discover_tests splits a list of labels into properties: both labels are set
# by a file ctest includes after the discovered tests.
gtest_discover_tests(hostile_tests TEST_PREFIX "hostile_" DISCOVERY_TIMEOUT 60 NO_PRETTY_VALUES
                     TEST_LIST _fpg_hostile PROPERTIES TIMEOUT 120)
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/hostile_labels.cmake
     "set_tests_properties(\${_fpg_hostile} PROPERTIES LABELS \"unit;badinput\")\n")
set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES
             ${CMAKE_CURRENT_BINARY_DIR}/hostile_labels.cmake)

file(GLOB _fpg_harnesses RELATIVE ${PROJECT_SOURCE_DIR}/fuzz
     CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/fuzz/*_fuzz.cpp)
foreach(_fpg_file ${_fpg_harnesses})
  string(REPLACE "_fuzz.cpp" "" _fpg_h ${_fpg_file})
  add_executable(${_fpg_h}_replay ${PROJECT_SOURCE_DIR}/fuzz/${_fpg_file}
                                  ${PROJECT_SOURCE_DIR}/fuzz/replay_main.cpp)
  target_link_libraries(${_fpg_h}_replay PRIVATE fpguard_lib)
  target_include_directories(${_fpg_h}_replay PRIVATE ${PROJECT_SOURCE_DIR}/src)  # json_tape
  add_test(NAME regression.${_fpg_h}
           COMMAND ${_fpg_h}_replay ${PROJECT_SOURCE_DIR}/tests/regressions/${_fpg_h})
  set_tests_properties(regression.${_fpg_h} PROPERTIES LABELS "badinput;regression" TIMEOUT 300)
endforeach()
