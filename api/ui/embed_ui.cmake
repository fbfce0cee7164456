# Turns ui/dist (the console as `npm run build` leaves it) into a C++
# source holding a sorted table of its files (api/ui/ui_assets.h), each with
# a gzip copy when that is at least a tenth smaller. The bytes go in with
# the assembler's .incbin, so a file is never spelled out as text.
#
# Run as: cmake -DDIST=ui/dist -DWORK=<folder of the build> -DOUT=ui_embedded.cpp -P embed_ui.cmake
#
# Without ui/dist/index.html the table holds one page saying how to build
# the console; with DUCTUS_REQUIRE_UI=1 in the environment (CI) that is an
# error instead. The build never runs npm itself: scripts/build-ui.sh does.
cmake_minimum_required(VERSION 3.19)  # ARCHIVE_CREATE's COMPRESSION_LEVEL

set(built true)
if(NOT EXISTS "${DIST}/index.html")
  if("$ENV{DUCTUS_REQUIRE_UI}" STREQUAL "1")
    message(FATAL_ERROR "${DIST}/index.html is missing and DUCTUS_REQUIRE_UI=1: "
                        "build the console first with scripts/build-ui.sh (npm ci, vite build)")
  endif()
  set(built false)
  set(DIST "${WORK}/not-built")
  file(MAKE_DIRECTORY "${DIST}")
  file(WRITE "${DIST}/index.html.tmp" "<!doctype html>
<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Ductus: console not built</title></head>
<body><h1>The web console is not in this build</h1>
<p>This <code>ductus</code> was built without <code>ui/dist</code>. Build the console with
<code>scripts/build-ui.sh</code> (it needs Node.js and npm), then build <code>ductus</code> again;
<code>scripts/build.sh</code> does both.</p>
<p>The REST API works without it: its description is at
<a href=\"/api/v1/openapi.json\">/api/v1/openapi.json</a>.</p></body></html>
")
  file(COPY_FILE "${DIST}/index.html.tmp" "${DIST}/index.html" ONLY_IF_DIFFERENT)
  file(REMOVE "${DIST}/index.html.tmp")
endif()

# Source maps stay out: they double the size and are for a developer's
# `vite` run, not for a hospital's browser.
file(GLOB_RECURSE files RELATIVE "${DIST}" "${DIST}/*")
list(FILTER files EXCLUDE REGEX "\\.(map|gz|tmp)$")
list(SORT files)  # bytewise, as the lookup compares

function(content_type name out)
  string(REGEX MATCH "[^.]*$" ext "${name}")
  string(TOLOWER "${ext}" ext)
  set(utf8 "; charset=utf-8")
  if(ext STREQUAL "html")
    set(type "text/html${utf8}")
  elseif(ext STREQUAL "js" OR ext STREQUAL "mjs")
    set(type "text/javascript${utf8}")
  elseif(ext STREQUAL "css")
    set(type "text/css${utf8}")
  elseif(ext STREQUAL "txt")
    set(type "text/plain${utf8}")
  elseif(ext STREQUAL "json")
    set(type "application/json")
  elseif(ext STREQUAL "webmanifest")
    set(type "application/manifest+json")
  elseif(ext STREQUAL "svg")
    set(type "image/svg+xml")
  elseif(ext STREQUAL "png")
    set(type "image/png")
  elseif(ext STREQUAL "ico")
    set(type "image/x-icon")
  elseif(ext STREQUAL "woff2")
    set(type "font/woff2")
  else()
    set(type "application/octet-stream")
  endif()
  set(${out} "${type}" PARENT_SCOPE)
endfunction()

function(asm_path path out)  # a string the assembler reads back as `path`
  string(REPLACE "\\" "\\\\\\\\" p "${path}")
  string(REPLACE "\"" "\\\\\\\"" p "${p}")
  set(${out} "${p}" PARENT_SCOPE)
endfunction()

file(MAKE_DIRECTORY "${WORK}/files")
set(blobs "")
set(rows "")
set(n 0)
foreach(name IN LISTS files)
  set(src "${DIST}/${name}")
  set(copy "${WORK}/files/${n}")
  file(COPY_FILE "${src}" "${copy}" ONLY_IF_DIFFERENT)
  file(SIZE "${copy}" size)
  file(SHA256 "${copy}" sha)
  string(SUBSTRING "${sha}" 0 16 tag)
  content_type("${name}" type)
  asm_path("${copy}" acopy)
  string(APPEND blobs "    \".balign 16\\n\"\n    \"ductus_ui_${n}:\\n\"\n    \".incbin \\\"${acopy}\\\"\\n\"\n")
  set(gz "{}")
  if(size GREATER 0)
    file(ARCHIVE_CREATE OUTPUT "${copy}.gz" PATHS "${copy}" FORMAT raw COMPRESSION GZip
         COMPRESSION_LEVEL 9)
    file(SIZE "${copy}.gz" gzsize)
    math(EXPR gz10 "${gzsize} * 10")
    math(EXPR size9 "${size} * 9")
    if(gz10 LESS_EQUAL size9)
      asm_path("${copy}.gz" agz)
      string(APPEND blobs "    \"ductus_ui_${n}_gz:\\n\"\n    \".incbin \\\"${agz}\\\"\\n\"\n")
      set(gz "{ductus_ui_${n}_gz, ${gzsize}}")
      string(APPEND externs "extern \"C\" const char ductus_ui_${n}_gz[];\n")
    else()
      file(REMOVE "${copy}.gz")
    endif()
  endif()
  string(APPEND externs "extern \"C\" const char ductus_ui_${n}[];\n")
  string(APPEND rows "    {\"/${name}\", \"${type}\", \"\\\"${tag}\\\"\", {ductus_ui_${n}, ${size}}, ${gz}},\n")
  math(EXPR n "${n} + 1")
endforeach()

file(WRITE "${OUT}.tmp" "// Generated from ui/dist by api/ui/embed_ui.cmake. Do not edit.
#include \"api/ui/ui_assets.h\"

// The files' bytes, read in by the assembler; each row below names one
// file's hash, so a changed file changes this source and it is rebuilt.
asm(\".pushsection .rodata\\n\"
${blobs}    \".popsection\\n\");

${externs}
namespace ductus::api {
namespace {
constexpr UiFile kFiles[] = {
${rows}};
}  // namespace

const UiTable& embeddedUi() {
  static const UiTable table{kFiles, sizeof kFiles / sizeof kFiles[0], ${built}};
  return table;
}
}  // namespace ductus::api
")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
