# Finds V8 as Debian ships it inside Node 18's libnode108 (V8 10.2).
#
# scripts/install-deps.sh extracts libnode108 and libnode-dev with dpkg-deb
# into .deps/libnode (ignored by git), because Debian's Node.js 20 conflicts
# with an installed libnode-dev. Set V8_ROOT to point elsewhere.
#
# Defines the imported target V8::V8 and V8_LIBRARY_DIR (for the rpath).

set(V8_ROOT "${CMAKE_SOURCE_DIR}/.deps/libnode" CACHE PATH "Root of the extracted libnode108 + libnode-dev")

find_path(V8_INCLUDE_DIR v8.h
  PATHS "${V8_ROOT}/usr/include/node"
  NO_DEFAULT_PATH)
find_library(V8_LIBRARY NAMES libnode.so.108 node
  PATHS "${V8_ROOT}/usr/lib/x86_64-linux-gnu"
  NO_DEFAULT_PATH)

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(V8
  REQUIRED_VARS V8_LIBRARY V8_INCLUDE_DIR
  FAIL_MESSAGE "V8 not found under V8_ROOT=${V8_ROOT}: run scripts/install-deps.sh (as root) first")

if(V8_FOUND AND NOT TARGET V8::V8)
  get_filename_component(V8_LIBRARY_DIR "${V8_LIBRARY}" DIRECTORY)
  add_library(V8::V8 SHARED IMPORTED)
  set_target_properties(V8::V8 PROPERTIES
    IMPORTED_LOCATION "${V8_LIBRARY}"
    IMPORTED_NO_SONAME FALSE
    INTERFACE_INCLUDE_DIRECTORIES "${V8_INCLUDE_DIR}"
    # Debian builds V8 without pointer compression or the V8 sandbox; the
    # embedder must agree or object layouts differ.
    INTERFACE_COMPILE_DEFINITIONS "V8_DEPRECATION_WARNINGS=0")
  # Binaries find libnode.so.108 without LD_LIBRARY_PATH.
  set(CMAKE_BUILD_RPATH "${V8_LIBRARY_DIR}")
  set(CMAKE_INSTALL_RPATH "${V8_LIBRARY_DIR}")
endif()
