# Runs a fuzz target once over every file in DIRS (regressions, then seeds):
#   cmake -DTARGET=fuzz_x -DDIRS="a;b" -P replay.cmake
# libFuzzer given files (not folders) runs each once and exits non-zero on
# the first crash, sanitizer report or leak.
set(files)
foreach(dir IN LISTS DIRS)
  if(IS_DIRECTORY "${dir}")
    file(GLOB found LIST_DIRECTORIES false "${dir}/*")
    list(FILTER found EXCLUDE REGEX "\\.md$")
    list(SORT found)
    list(APPEND files ${found})
  endif()
endforeach()
if(NOT files)
  message(STATUS "no inputs in ${DIRS}")
  return()
endif()
execute_process(COMMAND "${TARGET}" -runs=1 ${files} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${TARGET} failed (${rc}) on one of its inputs; see above")
endif()
