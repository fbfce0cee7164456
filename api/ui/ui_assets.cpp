#include "api/ui/ui_assets.h"

#include <algorithm>
#include <string>

namespace ductus::api {
namespace {

constexpr std::string_view kIndex = "/index.html";
constexpr std::string_view kAssets = "/assets/";

const UiFile* find(const UiTable& t, std::string_view path) {
  const UiFile* end = t.files + t.count;
  const UiFile* f = std::lower_bound(t.files, end, path,
                                     [](const UiFile& a, std::string_view p) { return a.path < p; });
  return f != end && f->path == path ? f : nullptr;
}

bool lowerEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return (x | 0x20) == (y | 0x20);
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Accept-Encoding names gzip without q=0 (RFC 9110 12.5.3). "*" counts.
bool acceptsGzip(const net::HttpRequest& r) {
  auto header = r.header("accept-encoding");
  if (!header) return false;
  std::string_view rest = *header;
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == rest.npos ? std::string_view() : rest.substr(comma + 1);
    size_t semi = item.find(';');
    std::string_view coding = trim(item.substr(0, semi));
    if (!lowerEquals(coding, "gzip") && coding != "*") continue;
    if (semi == item.npos) return true;
    std::string_view params = trim(item.substr(semi + 1));
    if (params.size() >= 2 && (params[0] == 'q' || params[0] == 'Q') && params[1] == '=') {
      // q=0, q=0.0, q=0.000: refused; anything else is some preference.
      std::string_view q = params.substr(2);
      bool zero = !q.empty() && q[0] == '0' &&
                  std::all_of(q.begin() + 1, q.end(), [](char c) { return c == '.' || c == '0'; });
      return !zero;
    }
    return true;
  }
  return false;
}

// If-None-Match lists this ETag (or is "*").
bool notModified(const net::HttpRequest& r, std::string_view etag) {
  auto header = r.header("if-none-match");
  if (!header) return false;
  std::string_view rest = *header;
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    std::string_view tag = trim(rest.substr(0, comma));
    rest = comma == rest.npos ? std::string_view() : rest.substr(comma + 1);
    if (tag.substr(0, 2) == "W/") tag.remove_prefix(2);
    if (tag == "*" || tag == etag) return true;
  }
  return false;
}

void commonHeaders(net::HttpResponse& r) {
  r.headers.emplace_back("Content-Security-Policy", std::string(kUiContentSecurityPolicy));
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  r.headers.emplace_back("X-Frame-Options", "DENY");
  r.headers.emplace_back("Referrer-Policy", "no-referrer");
}

net::HttpResponse plain(int status, std::string text) {
  net::HttpResponse r;
  r.status = status;
  r.headers.emplace_back("Content-Type", "text/plain; charset=utf-8");
  r.headers.emplace_back("Cache-Control", "no-cache");
  commonHeaders(r);
  r.body = std::move(text);
  return r;
}

}  // namespace

net::HttpResponse serveUi(const UiTable& table, const net::HttpRequest& request) {
  if (request.method != "GET" && request.method != "HEAD") {
    auto r = plain(405, request.method + " " + request.path +
                            ": the console's files are read with GET or HEAD\n");
    r.headers.emplace_back("Allow", "GET, HEAD");
    return r;
  }
  std::string_view path = request.path == "/" ? kIndex : std::string_view(request.path);
  const UiFile* file = find(table, path);
  bool asset = path.substr(0, kAssets.size()) == kAssets;
  if (!file && asset)
    // A hashed name this build does not have: a page of an older build
    // asking for its chunk. index.html in its place would be run as script.
    return plain(404, std::string(path) + ": no such file in this build of the console\n");
  if (!file) file = find(table, kIndex);
  if (!file) return plain(404, "this build has no console\n");

  net::HttpResponse r;
  r.headers.emplace_back("Cache-Control", asset && file->path != kIndex
                                              ? "public, max-age=31536000, immutable"
                                              : "no-cache");
  if (!file->gzip.empty()) r.headers.emplace_back("Vary", "Accept-Encoding");
  commonHeaders(r);
  std::string_view body = file->body;
  // Each encoding is a representation of its own, with a tag of its own.
  std::string etag(file->etag);
  if (!file->gzip.empty() && acceptsGzip(request)) {
    r.headers.emplace_back("Content-Encoding", "gzip");
    body = file->gzip;
    etag.insert(etag.size() - 1, "-gz");
  }
  r.headers.emplace_back("ETag", etag);
  if (notModified(request, etag)) {
    // No body; the length is what a 200 would have carried (RFC 9110 8.6).
    r.status = 304;
    r.headers.emplace_back("Content-Length", std::to_string(body.size()));
    return r;
  }
  r.headers.emplace_back("Content-Type", std::string(file->contentType));
  r.body.assign(body);  // the server leaves it out for HEAD
  return r;
}

}  // namespace ductus::api
