# The tsan_concurrency test (tests/CMakeLists.txt): configures a ThreadSanitizer build tree,
# builds berth_concurrency_tests in it, and runs the tests tagged [concurrency]. Fails on any
# data race ThreadSanitizer reports (halt_on_error), as on any failing test.
#   cmake -DSOURCE_DIR=<repo> -DBINARY_DIR=<tree> -DGENERATOR=Ninja -DCXX=<c++> [-DLAUNCHER=ccache]
#         [-DJOBS=2] -P tests/tsan/run.cmake
foreach(var SOURCE_DIR BINARY_DIR GENERATOR CXX)
  if(NOT ${var})
    message(FATAL_ERROR "tsan: ${var} is not set")
  endif()
endforeach()
if(NOT JOBS)
  set(JOBS 2)
endif()

function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "tsan: ${what} failed (${rc})")
  endif()
endfunction()

set(configure ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${BINARY_DIR} -G ${GENERATOR}
    -DCMAKE_CXX_COMPILER=${CXX}
    -DBERTH_SANITIZE=thread
    # -O1 and line tables only: the build is most of this test's time, and reports still name
    # files and lines. Warnings are the main build's business.
    -DCMAKE_BUILD_TYPE=RelWithDebInfo
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
    -DBERTH_WERROR=OFF)
if(LAUNCHER)
  list(APPEND configure -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
step("configure" ${configure})
step("build" ${CMAKE_COMMAND} --build ${BINARY_DIR} --target berth_concurrency_tests --parallel ${JOBS})
# ignore_noninstrumented_modules and the suppressions: see suppressions.txt.
set(options halt_on_error=1:second_deadlock_stack=1:ignore_noninstrumented_modules=1)
step("[concurrency] tests under ThreadSanitizer"
     ${CMAKE_COMMAND} -E env
     "TSAN_OPTIONS=${options}:suppressions=${SOURCE_DIR}/tests/tsan/suppressions.txt"
     ${BINARY_DIR}/tests/berth_concurrency_tests "[concurrency]")
