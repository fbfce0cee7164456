#include "common/net/curl_easy.h"

#include <openssl/crypto.h>
#include <sys/socket.h>

#include <fstream>
#include <sstream>

#include "common/tls/certificates.h"

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
  curl_easy_setopt(e, CURLOPT_SSLVERSION, static_cast<long>(CURL_SSLVERSION_TLSv1_2));
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

namespace {

// libcurl's default CA file (the system's roots), as built in.
std::string defaultCaFile() {
  CurlEasy e(curl_easy_init());
  char* path = nullptr;
  if (e && curl_easy_getinfo(e.get(), CURLINFO_CAINFO, &path) == CURLE_OK && path) return path;
  return "/etc/ssl/certs/ca-certificates.crt";
}

std::string readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void setBlob(CURL* e, CURLoption option, const std::string& pem) {
  curl_blob blob{const_cast<char*>(pem.data()), pem.size(), CURL_BLOB_COPY};
  curl_easy_setopt(e, option, &blob);
}

}  // namespace

CurlTls::CurlTls(std::shared_ptr<tls::ClientTls> client, std::string systemRoots)
    : client_(std::move(client)) {
  std::string ca = client_ ? client_->caPem() : std::string();
  if (ca.empty()) return;
  // Read once, when the destination or api is set up; a missing file
  // leaves the CA named alone.
  caBundle_ = readAll(systemRoots.empty() ? defaultCaFile() : systemRoots);
  if (!caBundle_.empty() && caBundle_.back() != '\n') caBundle_ += '\n';
  caBundle_ += ca;
}

void CurlTls::apply(CURL* e) const {
  if (!caBundle_.empty()) setBlob(e, CURLOPT_CAINFO_BLOB, caBundle_);
  if (!client_) return;
  std::string cert = client_->certPem();
  std::string key = client_->keyPem();
  if (cert.empty() || key.empty()) return;
  setBlob(e, CURLOPT_SSLCERT_BLOB, cert);
  setBlob(e, CURLOPT_SSLKEY_BLOB, key);
  // The key's PEM in memory: gone as soon as libcurl has its copy.
  OPENSSL_cleanse(key.data(), key.size());
}

std::optional<std::string_view> statusLineReason(std::string_view line) {
  if (line.substr(0, 5) != "HTTP/") return std::nullopt;
  // The reason is after the second space.
  size_t sp = line.find(' ');
  sp = sp == std::string_view::npos ? sp : line.find(' ', sp + 1);
  if (sp == std::string_view::npos) return std::string_view();
  std::string_view r = line.substr(sp + 1);
  while (!r.empty() && (r.back() == '\r' || r.back() == '\n')) r.remove_suffix(1);
  return r.substr(0, 100);
}

}  // namespace ductus::net
