# The sanitizer tests (tests/CMakeLists.txt): configures a build tree with BERTH_SANITIZE, builds
# one test executable in it, and runs it. Fails on any sanitizer report (the options below halt
# on the first one), as on any failing test.
#   cmake -DSOURCE_DIR=<repo> -DBINARY_DIR=<tree> -DGENERATOR=Ninja -DCXX=<c++> [-DLAUNCHER=ccache]
#         -DSANITIZE=thread|address,undefined -DTARGET=<executable> [-DTEST_ARGS=<catch args>]
#         [-DJOBS=2] -P tests/sanitizer_run.cmake
foreach(var SOURCE_DIR BINARY_DIR GENERATOR CXX SANITIZE TARGET)
  if(NOT ${var})
    message(FATAL_ERROR "sanitizer test: ${var} is not set")
  endif()
endforeach()
if(NOT JOBS)
  set(JOBS 2)
endif()

function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${SANITIZE}: ${what} failed (${rc})")
  endif()
endfunction()

# The build is most of this test's time; a cold one is what CI pays on every run. So:
# - a unity build (batches of 16 sources share one parse of the heavy headers, and one copy of
#   the templates they instantiate): about a third less compile time;
# - ASan and UBSan at -O0, which compiles in little more than half the time of -O1 (UBSan's
#   checks are costly to optimise) and runs the tests in about 90 s;
# - ThreadSanitizer at -O1, where it costs no more to compile than -O0 and races run faster;
# - line tables only (-g1), so reports name files and lines.
# Warnings are the main build's business (and -Wsubobject-linkage only says that a unity
# source includes other sources).
if(SANITIZE STREQUAL "thread")
  set(opt "-O1")
else()
  set(opt "-O0")
endif()
set(configure ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${BINARY_DIR} -G ${GENERATOR}
    -DCMAKE_CXX_COMPILER=${CXX}
    -DBERTH_SANITIZE=${SANITIZE}
    -DCMAKE_BUILD_TYPE=RelWithDebInfo
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=${opt} -g1 -DNDEBUG -Wno-subobject-linkage"
    -DCMAKE_UNITY_BUILD=ON
    -DCMAKE_UNITY_BUILD_BATCH_SIZE=16
    -DBERTH_WERROR=OFF)
if(LAUNCHER)
  list(APPEND configure -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
step("configure" ${configure})
step("build" ${CMAKE_COMMAND} --build ${BINARY_DIR} --target ${TARGET} --parallel ${JOBS})

if(SANITIZE STREQUAL "thread")
  # ignore_noninstrumented_modules and the suppressions: see tests/tsan/suppressions.txt.
  set(env "TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:ignore_noninstrumented_modules=1:suppressions=${SOURCE_DIR}/tests/tsan/suppressions.txt")
else()
  # The build passes -fno-sanitize-recover=all, so UBSan stops at its first report; ASan always
  # does. detect_leaks: a leak fails the run as well.
  set(env "ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:strict_string_checks=1"
          "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
endif()
separate_arguments(args UNIX_COMMAND "${TEST_ARGS}")
step("${TARGET} under the sanitizers" ${CMAKE_COMMAND} -E env ${env} ${BINARY_DIR}/tests/${TARGET} ${args})
