// One HTTP request's libcurl easy handle, as the HTTP destination and
// scripts' fetch() both set it up: owned handles, the options every request
// of ours carries, and the method with its body.
#pragma once

#include <curl/curl.h>

#include <chrono>
#include <memory>
#include <string>

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

// http and https only, sockets close-on-exec, no signals, no redirects (a redirect could leave the
// origin that was allowed: a 3xx is an answer), the whole transfer's
// timeout, the header list, an error buffer (CURL_ERROR_SIZE), and the body
// and header callbacks, both called with `data`.
void setRequestOptions(CURL* e, std::chrono::milliseconds timeout, curl_slist* headers,
                       char* errorBuffer, CurlDataCallback onBody, CurlDataCallback onHeader,
                       void* data);

// HEAD sends no body, nor does GET when `body` is null; any other method
// sends *body ("" when null), read in place: it must outlive the transfer.
void setMethodAndBody(CURL* e, const std::string& method, const std::string* body);

}  // namespace ductus::net
