// One HTTP request's libcurl easy handle, as the HTTP destination and
// scripts' fetch() both set it up: owned handles, the options every request
// of ours carries, and the method with its body.
#pragma once

#include <curl/curl.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string_view>
#include <string>

namespace ductus::tls {
class ClientTls;
}

namespace ductus::net {

struct CurlEasyCleanup {
  void operator()(CURL* e) const { curl_easy_cleanup(e); }
};
struct CurlSlistFree {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
using CurlEasy = std::unique_ptr<CURL, CurlEasyCleanup>;
using CurlSlist = std::unique_ptr<curl_slist, CurlSlistFree>;

using CurlDataCallback = size_t (*)(char* data, size_t size, size_t n, void* userp);

// http and https only (TLS 1.2 at least), sockets close-on-exec, no signals, no redirects (a redirect could leave the
// origin that was allowed: a 3xx is an answer), the whole transfer's
// timeout, the header list, an error buffer (CURL_ERROR_SIZE), and the body
// and header callbacks, both called with `data`.
void setRequestOptions(CURL* e, std::chrono::milliseconds timeout, curl_slist* headers,
                       char* errorBuffer, CurlDataCallback onBody, CurlDataCallback onHeader,
                       void* data);

// The reason phrase of a header line that is an HTTP status line ("HTTP/1.1
// 404 Not Found\r\n" -> "Not Found"), cut at 100 bytes; nullopt for any
// other header line. A view into `line`.
std::optional<std::string_view> statusLineReason(std::string_view line);

// HEAD sends no body, nor does GET when `body` is null; any other method
// sends *body ("" when null), read in place: it must outlive the transfer.
void setMethodAndBody(CURL* e, const std::string& method, const std::string* body);

// What an https request of a destination or an api with a ConnectTls
// verifies and presents: the system's roots plus the CA named (one CA
// bundle, made once here: with CURLOPT_CAINFO_BLOB libcurl no longer reads
// its default CA file, so the system's roots go into the blob too), and the
// client pair as blobs, taken from the ClientTls at each request so a
// renewed pair is the next request's.
class CurlTls {
 public:
  // `systemRoots`: the PEM file of the system's roots; empty: libcurl's
  // default CA file.
  explicit CurlTls(std::shared_ptr<tls::ClientTls> client, std::string systemRoots = {});
  // Sets the handle's CA, client certificate and key.
  void apply(CURL* e) const;
  const std::string& caBundle() const { return caBundle_; }

 private:
  std::shared_ptr<tls::ClientTls> client_;
  std::string caBundle_;  // empty: libcurl's default roots alone
};

}  // namespace ductus::net
