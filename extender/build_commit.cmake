# Writes OUT, a source file naming the commit berth is built from, at every build (cmake -P).
# `-dirty` marks tracked files changed since that commit. The file is rewritten only when the
# name changed, so a build at the same commit recompiles and relinks nothing.
execute_process(COMMAND git rev-parse --short=12 HEAD
                WORKING_DIRECTORY ${SRC}
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE found ERROR_QUIET)
if(NOT found EQUAL 0 OR NOT commit)
  set(commit "unknown")
else()
  execute_process(COMMAND git status --porcelain --untracked-files=no
                  WORKING_DIRECTORY ${SRC}
                  OUTPUT_VARIABLE changes OUTPUT_STRIP_TRAILING_WHITESPACE
                  RESULT_VARIABLE listed ERROR_QUIET)
  if(listed EQUAL 0 AND changes)
    string(APPEND commit "-dirty")
  endif()
endif()
file(WRITE ${OUT}.new
     "// Generated at build time by extender/build_commit.cmake.\n"
     "#include \"extender/build_info.h\"\n"
     "namespace berth::extender {\n"
     "const char kGitCommit[] = \"${commit}\";\n"
     "}  // namespace berth::extender\n")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${OUT}.new ${OUT})
file(REMOVE ${OUT}.new)
