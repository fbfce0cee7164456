#include "common/tls/certificate.h"

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cctype>
#include <ctime>

namespace ductus::tls {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;

// OpenSSL's last error in words, and the queue emptied so the next call's
// errors are its own.
std::string lastError() {
  unsigned long e = ERR_peek_last_error();
  std::string out;
  if (e != 0) {
    const char* reason = ERR_reason_error_string(e);
    out = reason ? reason : "error " + std::to_string(e);
  }
  ERR_clear_error();
  return out.empty() ? "not PEM" : out;
}

BioPtr memory(std::string_view text) {
  return BioPtr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

Clock::time_point fromAsn1(const ASN1_TIME* t) {
  std::tm tm{};
  if (!t || ASN1_TIME_to_tm(t, &tm) != 1) return {};
  return Clock::from_time_t(timegm(&tm));
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

// The DN attributes a subject pattern may name, by their short names.
int nidOfAttribute(std::string_view name) {
  static const std::pair<const char*, int> kAttrs[] = {
      {"cn", NID_commonName},         {"o", NID_organizationName},
      {"ou", NID_organizationalUnitName}, {"c", NID_countryName},
      {"l", NID_localityName},        {"st", NID_stateOrProvinceName},
      {"dc", NID_domainComponent},
  };
  std::string n = lower(trim(name));
  for (auto [short_, nid] : kAttrs)
    if (n == short_) return nid;
  return NID_undef;
}

struct Attribute {
  int nid;
  std::string value;
};

// "CN=a,O=b" -> its attributes; a pattern without '=' -> none (a DNS name).
// Commas inside a value are written "\,".
Result<std::vector<Attribute>> parsePattern(std::string_view pattern) {
  std::vector<Attribute> out;
  if (pattern.find('=') == std::string_view::npos) return out;
  std::string part;
  std::vector<std::string> parts;
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      part += pattern[++i];
    } else if (c == ',') {
      parts.push_back(part);
      part.clear();
    } else {
      part += c;
    }
  }
  parts.push_back(part);
  for (const auto& p : parts) {
    auto eq = p.find('=');
    if (eq == std::string::npos)
      return Error{"\"" + trim(p) + "\" in subject \"" + std::string(pattern) +
                   "\" is not ATTRIBUTE=value", ErrorKind::Config};
    int nid = nidOfAttribute(std::string_view(p).substr(0, eq));
    if (nid == NID_undef)
      return Error{"\"" + trim(p.substr(0, eq)) + "\" in subject \"" + std::string(pattern) +
                   "\" is not one of CN, O, OU, C, L, ST, DC", ErrorKind::Config};
    std::string value = trim(p.substr(eq + 1));
    if (value.empty())
      return Error{"\"" + trim(p) + "\" in subject \"" + std::string(pattern) + "\" has no value",
                   ErrorKind::Config};
    out.push_back({nid, value});
  }
  return out;
}

bool dnsPatternMatches(std::string_view pattern, std::string_view name) {
  std::string p = lower(pattern), n = lower(name);
  if (p.rfind("*.", 0) == 0) {
    auto dot = n.find('.');
    return dot != std::string::npos && dot > 0 && n.substr(dot) == p.substr(1);
  }
  return p == n;
}

bool validDnsPattern(std::string_view p) {
  if (p.rfind("*.", 0) == 0) p.remove_prefix(2);
  if (p.empty() || p.size() > 253) return false;
  size_t label = 0;
  for (char c : p) {
    if (c == '.') {
      if (label == 0) return false;
      label = 0;
    } else if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') {
      if (++label > 63) return false;
    } else {
      return false;
    }
  }
  return label > 0;
}

}  // namespace

Result<std::vector<X509Ptr>> readCertificates(std::string_view pem, const std::string& what) {
  ERR_clear_error();
  auto bio = memory(pem);
  std::vector<X509Ptr> out;
  for (;;) {
    X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr);
    if (!x) break;
    out.emplace_back(x);
  }
  // The loop ends on "no start line" at the end of the text: not an error
  // once something was read.
  unsigned long e = ERR_peek_last_error();
  if (e != 0 && !(ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE)) {
    return Error{what + ": a certificate does not parse: " + lastError(), ErrorKind::Config};
  }
  ERR_clear_error();
  if (out.empty())
    return Error{what + ": no certificate in it (expected PEM \"-----BEGIN CERTIFICATE-----\")",
                 ErrorKind::Config};
  return out;
}

Result<PkeyPtr> readKey(std::string_view pem, const std::string& what) {
  ERR_clear_error();
  auto bio = memory(pem);
  // An encrypted key would ask for a pass phrase: the callback refuses.
  auto noPassword = [](char*, int, int, void*) -> int { return -1; };
  EVP_PKEY* k = PEM_read_bio_PrivateKey(bio.get(), nullptr, noPassword, nullptr);
  if (!k) {
    std::string why = lastError();
    if (pem.find("ENCRYPTED") != std::string_view::npos)
      return Error{what + ": the key is encrypted; give it without a pass phrase (file mode 0600)",
                   ErrorKind::Config};
    return Error{what + ": no private key in it (" + why + ")", ErrorKind::Config};
  }
  return PkeyPtr(k);
}

Result<void> checkKeyMatches(X509* leaf, EVP_PKEY* key, const std::string& what) {
  ERR_clear_error();
  if (X509_check_private_key(leaf, key) != 1) {
    ERR_clear_error();
    return Error{what + ": the key does not belong to the certificate (" + subjectOf(leaf) + ")",
                 ErrorKind::Config};
  }
  return {};
}

Result<void> checkCurrent(X509* cert, const std::string& what, Clock::time_point now) {
  auto after = notAfterOf(cert), before = notBeforeOf(cert);
  if (now > after)
    return Error{what + ": the certificate " + subjectOf(cert) + " expired on " + formatTime(after),
                 ErrorKind::Config};
  if (now < before)
    return Error{what + ": the certificate " + subjectOf(cert) + " is not valid before " +
                     formatTime(before),
                 ErrorKind::Config};
  return {};
}

static std::string nameText(X509_NAME* name) {
  if (!name) return {};
  auto bio = BioPtr(BIO_new(BIO_s_mem()));
  X509_NAME_print_ex(bio.get(), name, 0, XN_FLAG_RFC2253 & ~ASN1_STRFLGS_ESC_MSB);
  char* p = nullptr;
  long n = BIO_get_mem_data(bio.get(), &p);
  return std::string(p, static_cast<size_t>(n));
}

static std::string bioText(BIO* bio) {
  char* p = nullptr;
  long n = BIO_get_mem_data(bio, &p);
  return std::string(p, n > 0 ? static_cast<size_t>(n) : 0);
}

std::string pemOf(X509* cert) {
  auto bio = BioPtr(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), cert);
  return bioText(bio.get());
}

std::string pemOf(EVP_PKEY* key) {
  auto bio = BioPtr(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  return bioText(bio.get());
}

std::string subjectOf(X509* cert) { return nameText(X509_get_subject_name(cert)); }
std::string issuerOf(X509* cert) { return nameText(X509_get_issuer_name(cert)); }

std::vector<std::string> dnsNamesOf(X509* cert) {
  std::vector<std::string> out;
  auto* names =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (!names) return out;
  for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* g = sk_GENERAL_NAME_value(names, i);
    if (g->type != GEN_DNS) continue;
    const unsigned char* d = ASN1_STRING_get0_data(g->d.dNSName);
    out.emplace_back(reinterpret_cast<const char*>(d),
                     static_cast<size_t>(ASN1_STRING_length(g->d.dNSName)));
  }
  GENERAL_NAMES_free(names);
  return out;
}

Clock::time_point notAfterOf(X509* cert) { return fromAsn1(X509_get0_notAfter(cert)); }
Clock::time_point notBeforeOf(X509* cert) { return fromAsn1(X509_get0_notBefore(cert)); }

std::string formatTime(Clock::time_point t) {
  std::time_t s = Clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&s, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

Result<void> checkSubjectPattern(std::string_view pattern) {
  if (trim(pattern).empty()) return Error{"an empty subject pattern", ErrorKind::Config};
  if (pattern.find('=') == std::string_view::npos) {
    if (!validDnsPattern(trim(pattern)))
      return Error{"subject \"" + std::string(pattern) +
                       "\" is neither ATTRIBUTE=value (CN, O, OU, C, L, ST, DC) nor a DNS name",
                   ErrorKind::Config};
    return {};
  }
  auto parsed = parsePattern(pattern);
  if (!parsed) return parsed.error();
  return {};
}

bool subjectMatches(X509* cert, std::string_view pattern) {
  if (!cert) return false;
  std::string p = trim(pattern);
  if (p.find('=') == std::string::npos) {
    for (const auto& n : dnsNamesOf(cert))
      if (dnsPatternMatches(p, n)) return true;
    return false;
  }
  auto attrs = parsePattern(p);
  if (!attrs || attrs->empty()) return false;
  X509_NAME* subject = X509_get_subject_name(cert);
  for (const auto& a : *attrs) {
    bool found = false;
    for (int i = X509_NAME_get_index_by_NID(subject, a.nid, -1); i >= 0 && !found;
         i = X509_NAME_get_index_by_NID(subject, a.nid, i)) {
      ASN1_STRING* v = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, i));
      unsigned char* utf8 = nullptr;
      int n = ASN1_STRING_to_UTF8(&utf8, v);
      if (n >= 0) {
        found = std::string_view(reinterpret_cast<char*>(utf8), static_cast<size_t>(n)) == a.value;
        OPENSSL_free(utf8);
      }
    }
    if (!found) return false;
  }
  return true;
}

}  // namespace ductus::tls
