// Certificates and keys read from PEM, and what the engine checks of them:
// a key that belongs to its certificate, a certificate that has not
// expired, its subject and names. OpenSSL's objects behind RAII handles.
// Used by the engine's certificate store (certificates.h), `validate`, and
// `ductus cert`.
#pragma once

#include <openssl/evp.h>
#include <openssl/x509.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace ductus::tls {

struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using X509Ptr = std::unique_ptr<X509, X509Free>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;

using Clock = std::chrono::system_clock;

// Every certificate in `pem`, in order (a leaf and its chain, or CAs).
// `what` names the source in errors ("certificates.server: tls/server.pem").
// An error when there is none or one does not parse.
Result<std::vector<X509Ptr>> readCertificates(std::string_view pem, const std::string& what);
// The one private key in `pem` (PKCS#8, RSA or EC; not encrypted).
Result<PkeyPtr> readKey(std::string_view pem, const std::string& what);

// The leaf's public key is the key's: an error saying so otherwise.
Result<void> checkKeyMatches(X509* leaf, EVP_PKEY* key, const std::string& what);
// An error when `cert` is past its notAfter at `now` (or before notBefore),
// naming the date.
Result<void> checkCurrent(X509* cert, const std::string& what, Clock::time_point now);

// PEM text of a certificate, and of a private key (PKCS#8, not encrypted).
std::string pemOf(X509* cert);
std::string pemOf(EVP_PKEY* key);

// "CN=lab-analyzer,O=Hospital" (RFC 2253 order and escaping).
std::string subjectOf(X509* cert);
std::string issuerOf(X509* cert);
// Its subjectAltName DNS entries.
std::vector<std::string> dnsNamesOf(X509* cert);
Clock::time_point notAfterOf(X509* cert);
Clock::time_point notBeforeOf(X509* cert);
// "2027-03-01 12:00:00 UTC".
std::string formatTime(Clock::time_point t);

// Whether a subject pattern of tls.clients.subjects (settings.h) matches a
// certificate: "CN=x,O=y" needs each attribute equal (case-sensitive
// values, attribute names case-insensitive; CN, O, OU, C, L, ST, DC, and
// any one of several values of a repeated attribute); a pattern without
// '=' is a DNS name matched against the subjectAltName DNS entries (and
// "*.example.org" one label under it). A malformed pattern is an error
// (checked when the project loads).
Result<void> checkSubjectPattern(std::string_view pattern);
bool subjectMatches(X509* cert, std::string_view pattern);

}  // namespace ductus::tls
