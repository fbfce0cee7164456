# Unity builds (-DDUCTUS_UNITY_BUILD=ON; CI's fresh builds use them): each
# target's .cpp files are compiled several at a time, one translation unit
# including them, so the headers every file parses (nlohmann/json,
# GoogleTest, spdlog, libuv, the standard library) are parsed once per
# batch instead of once per file. Most of a file's compile time is those
# headers; see docs/architecture.md ("Building") for the figures.
#
# A file that defines a file-local name (a helper in an anonymous
# namespace, a static, a struct or alias of its own) that another file of
# the same target defines too can't share a translation unit with it:
# cmake/unity-alone.txt names those files, and they compile alone.
# scripts/unity-alone.py rewrites that list from the sources; a build that
# fails with "redefinition of" or "conflicts with a previous declaration"
# in a unity_*.cxx means it is out of date.
#
# Incremental builds recompile a whole batch for one changed file, so
# developers' build folders keep the default (OFF).
option(DUCTUS_UNITY_BUILD "Compile each target's sources in batches (faster fresh builds)" OFF)
set(DUCTUS_UNITY_BATCH 8 CACHE STRING "Source files per unity translation unit")

function(ductus_unity_apply)
  if(NOT DUCTUS_UNITY_BUILD)
    return()
  endif()
  file(STRINGS "${CMAKE_SOURCE_DIR}/cmake/unity-alone.txt" alone REGEX "^[^#]")
  list(TRANSFORM alone PREPEND "${CMAKE_SOURCE_DIR}/")
  set(dirs "${CMAKE_SOURCE_DIR}")
  while(dirs)
    list(POP_FRONT dirs dir)
    get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
    list(APPEND dirs ${subdirs})
    get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
    foreach(target IN LISTS targets)
      get_target_property(type ${target} TYPE)
      if(NOT type MATCHES "^(EXECUTABLE|STATIC_LIBRARY|SHARED_LIBRARY|OBJECT_LIBRARY|MODULE_LIBRARY)$")
        continue()
      endif()
      set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${DUCTUS_UNITY_BATCH})
      get_target_property(sources ${target} SOURCES)
      foreach(source IN LISTS sources)
        cmake_path(ABSOLUTE_PATH source BASE_DIRECTORY "${dir}" NORMALIZE OUTPUT_VARIABLE path)
        if(path IN_LIST alone)
          set_source_files_properties("${path}" TARGET_DIRECTORY ${target}
                                      PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
        endif()
      endforeach()
    endforeach()
  endwhile()
endfunction()
