// The web console's files, embedded in the binary at build time
// (cmake/embed_ui.cmake writes the table from ui/dist), and how the API's
// port serves them: every path outside /api is a file of the table, an
// unknown one is index.html (the app's router shows the page) except under
// /assets/, whose names carry a hash of their content: those are cached
// for a year, everything else is revalidated each time, so an upgrade shows
// at once. Every answer carries the same Content-Security-Policy: the
// console's own scripts only, no framing, requests to this origin only.
#pragma once

#include <cstddef>
#include <string_view>

#include "common/net/http_server.h"

namespace ductus::api {

struct UiFile {
  std::string_view path;         // "/index.html", "/assets/index-3f2a9c1b.js"
  std::string_view contentType;  // "text/javascript; charset=utf-8"
  std::string_view etag;         // "\"<16 hex of its SHA-256>\""
  std::string_view body;
  std::string_view gzip;  // empty when gzip saves less than a tenth
};

struct UiTable {
  const UiFile* files = nullptr;  // sorted by path
  size_t count = 0;
  // False: ui/dist was missing at build time and the table holds only a
  // page saying how to build the console.
  bool built = false;
};

// The table this binary was built with (generated).
const UiTable& embeddedUi();

inline constexpr std::string_view kUiContentSecurityPolicy =
    "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; font-src 'self'; object-src 'none'; frame-ancestors 'none'; "
    "base-uri 'none'; form-action 'self'";

// The answer to a request for a path outside /api: GET and HEAD only;
// gzip when the client accepts it and the file has a copy; 304 when
// If-None-Match names the file's ETag.
net::HttpResponse serveUi(const UiTable& table, const net::HttpRequest& request);

}  // namespace ductus::api
