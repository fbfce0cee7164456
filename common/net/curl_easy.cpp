#include "common/net/curl_easy.h"

#include <sys/socket.h>

namespace ductus::net {
namespace {

// libcurl opens its sockets without close-on-exec: a worker spawned while a
// request is under way would inherit a connection to a destination.
curl_socket_t openCloseOnExec(void*, curlsocktype, curl_sockaddr* a) {
  return ::socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

}  // namespace

void setRequestOptions(CURL* e, std::chrono::milliseconds timeout, curl_slist* headers,
                       char* errorBuffer, CurlDataCallback onBody, CurlDataCallback onHeader,
                       void* data) {
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, openCloseOnExec);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errorBuffer);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, onBody);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, data);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, onHeader);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, data);
}

void setMethodAndBody(CURL* e, const std::string& method, const std::string* body) {
  if (method == "HEAD") {
    curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
  } else if (method == "GET" && !body) {
    curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
  } else {
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(body ? body->size() : 0));
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, body ? body->data() : "");
    if (method != "POST") curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method.c_str());
  }
}

}  // namespace ductus::net
