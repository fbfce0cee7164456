#include "tests/support/test_ca.h"

#include <gtest/gtest.h>
#include <openssl/bio.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>

namespace ductus::test {
namespace {

template <class T, void (*F)(T*)>
struct Free {
  void operator()(T* p) const { F(p); }
};
using Pkey = std::unique_ptr<EVP_PKEY, Free<EVP_PKEY, EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Free<X509, X509_free>>;
using Name = std::unique_ptr<X509_NAME, Free<X509_NAME, X509_NAME_free>>;

[[noreturn]] void fail(const std::string& what) {
  char buf[256];
  ERR_error_string_n(ERR_get_error(), buf, sizeof buf);
  throw std::runtime_error("TestCa: " + what + ": " + buf);
}

Pkey newKey(bool ec) {
  EVP_PKEY* k = ec ? EVP_EC_gen("P-256") : EVP_RSA_gen(2048);
  if (!k) fail("key generation");
  return Pkey(k);
}

std::string pemOf(X509* c) {
  BIO* b = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(b, c);
  char* p = nullptr;
  long n = BIO_get_mem_data(b, &p);
  std::string s(p, static_cast<size_t>(n));
  BIO_free(b);
  return s;
}

std::string pemOf(EVP_PKEY* k) {
  BIO* b = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(b, k, nullptr, nullptr, 0, nullptr, nullptr);
  char* p = nullptr;
  long n = BIO_get_mem_data(b, &p);
  std::string s(p, static_cast<size_t>(n));
  BIO_free(b);
  return s;
}

void writeFile(const std::filesystem::path& p, const std::string& text, bool secret) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
  if (secret) ::chmod(p.c_str(), 0600);
}

std::string readFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// "/CN=a/O=b" -> an X509_NAME.
Name parseSubject(const std::string& subject) {
  Name name(X509_NAME_new());
  std::stringstream ss(subject);
  std::string part;
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    auto eq = part.find('=');
    if (eq == std::string::npos) throw std::runtime_error("TestCa: bad subject " + subject);
    if (!X509_NAME_add_entry_by_txt(name.get(), part.substr(0, eq).c_str(), MBSTRING_UTF8,
                                    reinterpret_cast<const unsigned char*>(part.c_str() + eq + 1),
                                    -1, -1, 0))
      fail("subject " + part);
  }
  return name;
}

void addExt(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (!ext) fail("extension " + value);
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

long nextSerial() {
  static std::atomic<long> serial{static_cast<long>(::time(nullptr) & 0xffffff) * 1000};
  return ++serial;
}

Cert makeCert(X509_NAME* subject, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuerKey,
              long fromSeconds, long toSeconds) {
  Cert c(X509_new());
  X509_set_version(c.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(c.get()), nextSerial());
  X509_gmtime_adj(X509_getm_notBefore(c.get()), fromSeconds);
  X509_gmtime_adj(X509_getm_notAfter(c.get()), toSeconds);
  X509_set_subject_name(c.get(), subject);
  X509_set_issuer_name(c.get(), issuer ? X509_get_subject_name(issuer) : subject);
  X509_set_pubkey(c.get(), key);
  return c;
}

}  // namespace

TestCa::TestCa(std::filesystem::path dir, std::string cn)
    : dir_(std::move(dir)), cert_(dir_ / "ca.pem"), key_(dir_ / "ca.key") {
  Pkey key = newKey(true);
  Name name = parseSubject("/CN=" + cn);
  Cert ca = makeCert(name.get(), key.get(), nullptr, key.get(), -86400, 3650L * 86400);
  addExt(ca.get(), ca.get(), NID_basic_constraints, "critical,CA:TRUE");
  addExt(ca.get(), ca.get(), NID_key_usage, "critical,keyCertSign,cRLSign");
  addExt(ca.get(), ca.get(), NID_subject_key_identifier, "hash");
  if (!X509_sign(ca.get(), key.get(), EVP_sha256())) fail("signing the CA");
  writeFile(cert_, pemOf(ca.get()), false);
  writeFile(key_, pemOf(key.get()), true);
}

Issued TestCa::issue(const std::string& name, const std::string& subject,
                     const std::vector<std::string>& dnsNames, const std::vector<std::string>& ips,
                     int days, bool ecKey) const {
  std::string caPem = readFile(cert_), caKeyPem = readFile(key_);
  BIO* b1 = BIO_new_mem_buf(caPem.data(), static_cast<int>(caPem.size()));
  Cert ca(PEM_read_bio_X509(b1, nullptr, nullptr, nullptr));
  BIO_free(b1);
  BIO* b2 = BIO_new_mem_buf(caKeyPem.data(), static_cast<int>(caKeyPem.size()));
  Pkey caKey(PEM_read_bio_PrivateKey(b2, nullptr, nullptr, nullptr));
  BIO_free(b2);
  if (!ca || !caKey) fail("reading the CA back");

  Pkey key = newKey(ecKey);
  Name subj = parseSubject(subject);
  long from = -86400, to = static_cast<long>(days) * 86400;
  if (days < 0) from = to - 86400;  // expired -days days ago, valid for a day before that
  Cert leaf = makeCert(subj.get(), key.get(), ca.get(), caKey.get(), from, to);
  addExt(leaf.get(), ca.get(), NID_basic_constraints, "critical,CA:FALSE");
  addExt(leaf.get(), ca.get(), NID_key_usage, "critical,digitalSignature,keyEncipherment");
  addExt(leaf.get(), ca.get(), NID_ext_key_usage, "serverAuth,clientAuth");
  addExt(leaf.get(), ca.get(), NID_authority_key_identifier, "keyid:always");
  std::string san;
  for (const auto& d : dnsNames) san += (san.empty() ? "" : ",") + std::string("DNS:") + d;
  for (const auto& ip : ips) san += (san.empty() ? "" : ",") + std::string("IP:") + ip;
  if (!san.empty()) addExt(leaf.get(), ca.get(), NID_subject_alt_name, san);
  if (!X509_sign(leaf.get(), caKey.get(), EVP_sha256())) fail("signing " + name);

  Issued out{dir_ / (name + ".pem"), dir_ / (name + ".key"), dir_ / (name + "-chain.pem")};
  writeFile(out.cert, pemOf(leaf.get()), false);
  writeFile(out.key, pemOf(key.get()), true);
  writeFile(out.chain, pemOf(leaf.get()) + caPem, false);
  return out;
}

}  // namespace ductus::test
