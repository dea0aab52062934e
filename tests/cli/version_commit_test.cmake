# `berth version` names the commit the tree is at now, not the one CMake configured at
# (extender/build_commit.cmake): run with -DBERTH=... -DSRC=... by ctest.
execute_process(COMMAND ${BERTH} version OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "berth version exited ${rc}: ${out}")
endif()
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SRC}
                OUTPUT_VARIABLE head OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE found ERROR_QUIET)
if(NOT found EQUAL 0 OR NOT head)
  set(want "\\(commit unknown, ")  # built outside a git checkout
else()
  set(want "\\(commit ${head}(-dirty)?, ")
endif()
if(NOT out MATCHES "${want}")
  message(FATAL_ERROR "berth version says \"${out}\"; expected the commit to match ${want} "
                      "(a binary built before the last commit says so too: build, then test)")
endif()
