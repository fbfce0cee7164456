#include "supervisor/cli/cert_command.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/command_line.h"
#include "common/config/loader.h"
#include "common/config/project_files.h"
#include "common/config/yaml_reader.h"
#include "common/fd.h"
#include "common/file_text.h"
#include "common/tls/certificate.h"

namespace ductus::supervisor {
namespace {

namespace fs = std::filesystem;
using tls::Clock;

// A certificate or key file is kilobytes; a bundle of CAs a few hundred.
constexpr std::uintmax_t kMaxPemBytes = 1u << 20;
// Under this many days left, show warns: time to renew.
constexpr int kWarnDays = 30;
constexpr int kMaxDays = 3650;

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct BnFree {
  void operator()(BIGNUM* b) const { BN_free(b); }
};
struct ReqFree {
  void operator()(X509_REQ* r) const { X509_REQ_free(r); }
};
struct ExtsFree {
  void operator()(STACK_OF(X509_EXTENSION) * s) const {
    sk_X509_EXTENSION_pop_free(s, X509_EXTENSION_free);
  }
};
struct NamesFree {
  void operator()(GENERAL_NAMES* n) const { GENERAL_NAMES_free(n); }
};

// OpenSSL's own words for what failed last (its error queue, emptied).
std::string sslError(const std::string& what) {
  std::string out = what;
  unsigned long e;
  char buf[256];
  bool first = true;
  while ((e = ERR_get_error()) != 0) {
    ERR_error_string_n(e, buf, sizeof buf);
    out += first ? ": " : "; ";
    out += buf;
    first = false;
  }
  return out;
}

// ---- arguments ----

struct MakeArgs {
  std::string name;
  std::string subject;  // request only: "/O=Hospital/OU=Lab"
  std::vector<std::string> dns;
  std::vector<std::string> ips;
  int days = 365;
  std::string keyType = "ec";
  std::string out;
};

// NAME is the CN and the files' base name: a plain word or host name.
bool isPlainName(const std::string& s) {
  if (s.empty() || s.size() > 64 || s.front() == '.' || s.front() == '-') return false;
  for (unsigned char c : s)
    if (!std::isalnum(c) && c != '.' && c != '-' && c != '_') return false;
  return true;
}

// resources.yaml names are letters, digits, _ and -: "engine.hospital.org"
// becomes engine-hospital-org.
std::string entryName(std::string name) {
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') c = '-';
  return name;
}

bool isDnsName(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  std::string_view rest = s;
  if (rest.substr(0, 2) == "*.") rest.remove_prefix(2);  // a wildcard's one label
  if (rest.empty()) return false;
  for (unsigned char c : rest)
    if (!std::isalnum(c) && c != '.' && c != '-' && c != '_') return false;
  return rest.front() != '.' && rest.back() != '.' && rest.find("..") == std::string_view::npos;
}

bool isIp(const std::string& s) {
  unsigned char buf[16];
  return inet_pton(AF_INET, s.c_str(), buf) == 1 || inet_pton(AF_INET6, s.c_str(), buf) == 1;
}

// "/O=Hospital/OU=Lab" (as openssl req -subj writes it; "\/" is a slash in
// a value) into `name`.
Status addSubject(X509_NAME* name, const std::string& subject) {
  if (subject.empty()) return {};
  if (subject.front() != '/')
    return Error{"--subject is written /O=Hospital/OU=Lab", ErrorKind::Invalid};
  std::vector<std::string> parts(1);
  for (size_t i = 1; i < subject.size(); ++i) {
    if (subject[i] == '\\' && i + 1 < subject.size()) {
      parts.back() += subject[++i];
    } else if (subject[i] == '/') {
      parts.emplace_back();
    } else {
      parts.back() += subject[i];
    }
  }
  for (const auto& part : parts) {
    size_t eq = part.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == part.size())
      return Error{"--subject: `" + part + "` is not NAME=value", ErrorKind::Invalid};
    std::string key = part.substr(0, eq);
    if (key == "CN" || key == "commonName")
      return Error{"--subject: the CN is --name's, leave it out", ErrorKind::Invalid};
    if (X509_NAME_add_entry_by_txt(name, key.c_str(), MBSTRING_UTF8,
                                   reinterpret_cast<const unsigned char*>(part.c_str() + eq + 1),
                                   -1, -1, 0) != 1) {
      ERR_clear_error();
      return Error{"--subject: `" + key + "` is not an attribute (C, ST, L, O, OU, DC, ...)",
                   ErrorKind::Invalid};
    }
  }
  return {};
}

// A usage error said in one line, or "" when the arguments are fine.
std::string checkMakeArgs(MakeArgs& a) {
  if (!isPlainName(a.name))
    return "--name `" + a.name +
           "` must be letters, digits, '.', '-' or '_' (it names the files too)";
  for (const auto& d : a.dns)
    if (!isDnsName(d)) return "--dns `" + d + "` is not a DNS name";
  for (const auto& i : a.ips)
    if (!isIp(i)) return "--ip `" + i + "` is not an IPv4 or IPv6 address";
  if (a.days < 1 || a.days > kMaxDays) return "--days must be 1 to " + std::to_string(kMaxDays);
  if (a.keyType != "ec" && a.keyType != "rsa") return "--key-type is ec or rsa";
  if (!a.subject.empty()) {
    X509_NAME* scratch = X509_NAME_new();
    auto s = addSubject(scratch, a.subject);
    X509_NAME_free(scratch);
    if (!s) return s.error().message;
  }
  // A certificate without subjectAltName matches no host name.
  if (a.dns.empty() && a.ips.empty()) a.dns.push_back(a.name);
  return "";
}

// ---- making keys, certificates and requests ----

Result<tls::PkeyPtr> newKey(const std::string& type) {
  EVP_PKEY* k = type == "rsa" ? EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", size_t{2048})
                              : EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
  if (!k) return Error{sslError("generating a " + type + " key failed")};
  return tls::PkeyPtr(k);
}

std::string subjectAltNames(const MakeArgs& a) {
  std::string san;
  for (const auto& d : a.dns) san += (san.empty() ? "" : ",") + std::string("DNS:") + d;
  for (const auto& i : a.ips) san += (san.empty() ? "" : ",") + std::string("IP:") + i;
  return san;
}

// What both the certificate and the request say of the key's uses: a leaf
// (not a CA) for TLS servers and clients, named by subjectAltName. RSA
// keys may also encipher (TLS 1.2's RSA key exchange is not offered by the
// engine, but a peer's CA profile may ask for it).
std::vector<std::pair<int, std::string>> leafExtensions(const MakeArgs& a) {
  return {
      {NID_basic_constraints, "critical,CA:FALSE"},
      {NID_key_usage, a.keyType == "rsa" ? "critical,digitalSignature,keyEncipherment"
                                         : "critical,digitalSignature"},
      {NID_ext_key_usage, "serverAuth,clientAuth"},
      {NID_subject_alt_name, subjectAltNames(a)},
  };
}

std::string pemOf(int (*write)(BIO*, void*), void* object) {
  std::unique_ptr<BIO, BioFree> bio(BIO_new(BIO_s_mem()));
  if (!bio || write(bio.get(), object) != 1) return "";
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

std::string keyPem(EVP_PKEY* key) {
  // PKCS#8 ("BEGIN PRIVATE KEY"), not encrypted: what certificates: reads.
  return pemOf(
      [](BIO* b, void* k) {
        return PEM_write_bio_PrivateKey(b, static_cast<EVP_PKEY*>(k), nullptr, nullptr, 0, nullptr,
                                        nullptr);
      },
      key);
}

Result<std::string> selfSigned(const MakeArgs& a, EVP_PKEY* key) {
  tls::X509Ptr x(X509_new());
  if (!x) return Error{sslError("X509_new failed")};
  X509_set_version(x.get(), 2);
  // A random positive serial of 159 bits (RFC 5280: at most 20 octets).
  std::unique_ptr<BIGNUM, BnFree> serial(BN_new());
  if (!serial || BN_rand(serial.get(), 159, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      !BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(x.get())))
    return Error{sslError("making a serial number failed")};
  // Five minutes back: a peer whose clock is a little behind accepts it.
  X509_gmtime_adj(X509_getm_notBefore(x.get()), -300);
  X509_time_adj_ex(X509_getm_notAfter(x.get()), a.days, 0, nullptr);
  X509_NAME* name = X509_get_subject_name(x.get());
  if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(a.name.c_str()), -1, -1,
                                 0) != 1)
    return Error{sslError("setting the subject failed")};
  X509_set_issuer_name(x.get(), name);
  X509_set_pubkey(x.get(), key);
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, x.get(), x.get(), nullptr, nullptr, 0);
  auto exts = leafExtensions(a);
  exts.emplace_back(NID_subject_key_identifier, "hash");
  for (const auto& [nid, value] : exts) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
    if (!ext) return Error{sslError("the extension `" + value + "` failed")};
    X509_add_ext(x.get(), ext, -1);
    X509_EXTENSION_free(ext);
  }
  if (X509_sign(x.get(), key, EVP_sha256()) == 0) return Error{sslError("signing failed")};
  return pemOf([](BIO* b, void* c) { return PEM_write_bio_X509(b, static_cast<X509*>(c)); },
               x.get());
}

Result<std::string> request(const MakeArgs& a, EVP_PKEY* key) {
  std::unique_ptr<X509_REQ, ReqFree> req(X509_REQ_new());
  if (!req) return Error{sslError("X509_REQ_new failed")};
  X509_REQ_set_version(req.get(), 0);
  X509_NAME* name = X509_REQ_get_subject_name(req.get());
  if (auto s = addSubject(name, a.subject); !s) return s.error();
  if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(a.name.c_str()), -1, -1,
                                 0) != 1)
    return Error{sslError("setting the subject failed")};
  X509_REQ_set_pubkey(req.get(), key);
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, nullptr, nullptr, req.get(), nullptr, 0);
  std::unique_ptr<STACK_OF(X509_EXTENSION), ExtsFree> exts(sk_X509_EXTENSION_new_null());
  for (const auto& [nid, value] : leafExtensions(a)) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
    if (!ext) return Error{sslError("the extension `" + value + "` failed")};
    sk_X509_EXTENSION_push(exts.get(), ext);
  }
  if (X509_REQ_add_extensions(req.get(), exts.get()) != 1 ||
      X509_REQ_sign(req.get(), key, EVP_sha256()) == 0)
    return Error{sslError("signing the request failed")};
  return pemOf([](BIO* b, void* r) { return PEM_write_bio_X509_REQ(b, static_cast<X509_REQ*>(r)); },
               req.get());
}

// Creates `path` with `mode`; never replaces a file that exists.
Status writeNew(const fs::path& path, const std::string& data, mode_t mode) {
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode));
  if (!fd.valid()) {
    if (errno == EEXIST)
      return Error{path.string() + " already exists; it is never overwritten", ErrorKind::Exists};
    return Error::fromErrno("cannot create " + path.string());
  }
  // The umask may only take bits away; this makes the mode exactly what is asked.
  if (::fchmod(fd.get(), mode) != 0)
    return Error::fromErrno("cannot set the mode of " + path.string());
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd.get(), data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error::fromErrno("cannot write " + path.string());
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd.get()) != 0) return Error::fromErrno("cannot write " + path.string());
  return {};
}

// The key (0600) then the certificate or request (0644), neither written
// when either exists; a key whose partner could not be written is removed.
int writePair(const fs::path& keyPath, const std::string& key, const fs::path& otherPath,
              const std::string& other, const char* command) {
  for (const auto& p : {keyPath, otherPath}) {
    std::error_code ec;
    if (fs::symlink_status(p, ec).type() != fs::file_type::not_found) {
      std::fprintf(stderr,
                   "ductus cert %s: %s already exists; it is never overwritten (move it away or "
                   "choose another --out)\n",
                   command, p.c_str());
      return 1;
    }
  }
  if (auto s = writeNew(keyPath, key, 0600); !s) {
    std::fprintf(stderr, "ductus cert %s: %s\n", command, s.error().message.c_str());
    return 1;
  }
  if (auto s = writeNew(otherPath, other, 0644); !s) {
    std::fprintf(stderr, "ductus cert %s: %s\n", command, s.error().message.c_str());
    ::unlink(keyPath.c_str());
    return 1;
  }
  return 0;
}

int makeCommon(MakeArgs a, bool isRequest) {
  const char* command = isRequest ? "request" : "self-signed";
  if (std::string bad = checkMakeArgs(a); !bad.empty()) {
    std::fprintf(stderr, "ductus cert %s: %s\n", command, bad.c_str());
    return kUsageError;
  }
  fs::path dir = a.out;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    std::fprintf(stderr, "ductus cert %s: cannot create %s: %s\n", command, dir.c_str(),
                 ec.message().c_str());
    return 1;
  }
  auto key = newKey(a.keyType);
  if (!key) {
    std::fprintf(stderr, "ductus cert %s: %s\n", command, key.error().message.c_str());
    return 1;
  }
  auto made = isRequest ? request(a, key->get()) : selfSigned(a, key->get());
  if (!made) {
    std::fprintf(stderr, "ductus cert %s: %s\n", command, made.error().message.c_str());
    return made.error().kind == ErrorKind::Invalid ? kUsageError : 1;
  }
  std::string keyText = keyPem(key->get());
  fs::path keyPath = dir / (a.name + ".key");
  fs::path otherPath = dir / (a.name + (isRequest ? ".csr" : ".pem"));
  int rc = writePair(keyPath, keyText, otherPath, *made, command);
  OPENSSL_cleanse(keyText.data(), keyText.size());
  if (rc != 0) return rc;
  std::string names = subjectAltNames(a);
  if (isRequest) {
    std::printf(
        "wrote %s (the key, 0600: keep it here) and %s (the request: %s, %s)\n", keyPath.c_str(),
        otherPath.c_str(),
        a.subject.empty() ? ("CN=" + a.name).c_str() : (a.subject + "/CN=" + a.name).c_str(),
        names.c_str());
    std::printf(
        "Send %s to your CA; put the certificate it returns (with its chain) beside the key, e.g. "
        "as %s, and add to resources.yaml:\n\n",
        otherPath.c_str(), (dir / (a.name + ".pem")).c_str());
  } else {
    std::printf("wrote %s (the key, 0600) and %s (CN=%s, %s, valid %d days)\n", keyPath.c_str(),
                otherPath.c_str(), a.name.c_str(), names.c_str(), a.days);
    std::printf(
        "Add to resources.yaml (paths relative to the project folder); a peer that must trust it "
        "names %s as its ca_file:\n\n",
        otherPath.c_str());
  }
  std::printf("certificates:\n  %s: { cert_file: %s, key_file: %s }\n", entryName(a.name).c_str(),
              (dir / (a.name + ".pem")).c_str(), keyPath.c_str());
  return 0;
}

// ---- show ----

struct ShowArgs {
  std::string file;
  std::string key;
  std::string project;
  std::string entry;
  std::string env;
};

std::vector<std::string> ipNamesOf(X509* cert) {
  std::vector<std::string> out;
  std::unique_ptr<GENERAL_NAMES, NamesFree> names(
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr)));
  if (!names) return out;
  for (int i = 0; i < sk_GENERAL_NAME_num(names.get()); ++i) {
    const GENERAL_NAME* n = sk_GENERAL_NAME_value(names.get(), i);
    if (n->type != GEN_IPADD) continue;
    const ASN1_OCTET_STRING* ip = n->d.iPAddress;
    char buf[INET6_ADDRSTRLEN] = {};
    int family = ip->length == 4 ? AF_INET : ip->length == 16 ? AF_INET6 : 0;
    if (family && inet_ntop(family, ip->data, buf, sizeof buf)) out.emplace_back(buf);
  }
  return out;
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? "(none)" : out;
}

// What show reads: certificates (a leaf and its chain, or CAs) and maybe a key.
struct Material {
  std::string what;
  std::string certText;
  std::string keyText;  // empty: no key to check
  std::string caText;   // an entry's CA, shown after
};

struct Verdict {
  int errors = 0;
  int warnings = 0;
};

void problem(Verdict& v, bool error, const std::string& text) {
  std::fprintf(stderr, "%s: %s\n", error ? "error" : "warning", text.c_str());
  ++(error ? v.errors : v.warnings);
}

// caFile: the CA side of an entry, CAs side by side.
void showCertificates(const std::string& what, std::string_view pem, EVP_PKEY* key, Verdict& v,
                      bool caFile) {
  auto certs = tls::readCertificates(pem, what);
  if (!certs) {
    problem(v, true, certs.error().message);
    return;
  }
  // A file of CAs alone (no key, every one a CA) is a bundle, not a chain.
  bool bundleOfCas = caFile || !key;
  for (auto& c : *certs) bundleOfCas = bundleOfCas && (caFile || X509_check_ca(c.get()) > 0);
  Clock::time_point now = Clock::now();
  std::printf("%s: %zu certificate%s\n", what.c_str(), certs->size(),
              certs->size() == 1 ? "" : "s");
  for (size_t i = 0; i < certs->size(); ++i) {
    X509* c = (*certs)[i].get();
    auto notAfter = tls::notAfterOf(c);
    auto notBefore = tls::notBeforeOf(c);
    long daysLeft =
        static_cast<long>(std::chrono::floor<std::chrono::hours>(notAfter - now).count() / 24);
    std::printf("certificate %zu%s\n", i + 1, X509_check_ca(c) > 0 ? " (a CA)" : "");
    std::printf("  subject:      %s\n", tls::subjectOf(c).c_str());
    std::printf("  issuer:       %s\n", tls::issuerOf(c).c_str());
    std::printf("  DNS names:    %s\n", joined(tls::dnsNamesOf(c)).c_str());
    std::printf("  IP addresses: %s\n", joined(ipNamesOf(c)).c_str());
    std::printf("  not before:   %s\n", tls::formatTime(notBefore).c_str());
    std::printf("  not after:    %s (%ld days left)\n", tls::formatTime(notAfter).c_str(),
                notAfter > now ? daysLeft : 0L);
    std::string who = "certificate " + std::to_string(i + 1) + " (" + tls::subjectOf(c) + ")";
    if (notAfter <= now)
      problem(v, true, who + " expired on " + tls::formatTime(notAfter));
    else if (notBefore > now)
      problem(v, true, who + " is not valid before " + tls::formatTime(notBefore));
    else if (daysLeft < kWarnDays)
      problem(v, false,
              who + " expires in " + std::to_string(daysLeft) + " days (under " +
                  std::to_string(kWarnDays) + "): renew it");
  }
  if (key) {
    if (auto m = tls::checkKeyMatches((*certs)[0].get(), key, what); m)
      std::printf("key: belongs to certificate 1\n");
    else
      problem(v, true, m.error().message);
  }
  // A leaf and its chain: each certificate issued (and signed) by the next.
  // CAs side by side (a ca_file) need no order.
  if (!bundleOfCas && certs->size() > 1) {
    bool inOrder = true;
    for (size_t i = 0; i + 1 < certs->size(); ++i) {
      X509* c = (*certs)[i].get();
      X509* next = (*certs)[i + 1].get();
      if (X509_check_issued(next, c) != X509_V_OK || X509_verify(c, X509_get0_pubkey(next)) != 1) {
        ERR_clear_error();
        problem(v, true,
                "the chain is out of order: certificate " + std::to_string(i + 2) + " (" +
                    tls::subjectOf(next) + ") did not issue certificate " + std::to_string(i + 1) +
                    " (issuer " + tls::issuerOf(c) + "); the leaf comes first, then each issuer");
        inOrder = false;
        break;
      }
    }
    if (inOrder) std::printf("chain: in order, each certificate issued by the next\n");
  }
}

Result<std::string> readText(const fs::path& file) { return readFileBounded(file, kMaxPemBytes); }

// The entry from resources.yaml alone (with its ${env:} and ${secret:}):
// a mistake elsewhere in the project, or this very certificate having
// expired, must not keep `show` from saying what it holds.
Result<Material> materialOfEntry(const ShowArgs& a) {
  fs::path root = a.project;
  auto yaml = readFileBounded(root / "resources.yaml", kMaxPemBytes);
  if (!yaml) return yaml.error();
  YAML::Node doc;
  try {
    doc = YAML::Load(*yaml);
  } catch (const YAML::Exception& e) {
    return Error{(root / "resources.yaml").string() + ": " + e.what(), ErrorKind::Config};
  }
  if (a.env.empty() || a.env.find_first_of("/\\.") != std::string::npos)
    return Error{"environment `" + a.env + "` is not a plain name", ErrorKind::Invalid};
  std::optional<std::string> keyText;
  if (const char* k = std::getenv("DUCTUS_SECRETS_KEY"); k && *k) keyText = k;
  auto keyFile = config::secretsKeyFileOf(root);
  if (!keyFile) return keyFile.error();
  config::Substituter subst(
      [](const std::string& name) -> std::optional<std::string> {
        const char* v = std::getenv(name.c_str());
        return v ? std::optional<std::string>(v) : std::nullopt;
      },
      root / "secrets" / (a.env + ".json"), keyText, *keyFile);
  config::Diagnostics diagnostics;
  config::YamlReader reader((root / "resources.yaml").string(), diagnostics, subst);
  auto all = config::parseCertificates(reader, doc, root);
  std::string prefix = "certificates." + a.entry;
  std::string mistakes;
  for (const auto& d : diagnostics)
    if (d.keyPath == prefix || d.keyPath.rfind(prefix + ".", 0) == 0)
      mistakes += "\n  " + d.toString();
  if (!mistakes.empty()) return Error{"the entry is not right:" + mistakes, ErrorKind::Config};
  auto it = all.find(a.entry);
  if (it == all.end()) {
    std::string known;
    for (const auto& [name, _] : all) known += (known.empty() ? "" : ", ") + name;
    return Error{"resources.yaml has no certificates entry `" + a.entry + "`" +
                     (known.empty() ? " (it has none)" : " (it has " + known + ")"),
                 ErrorKind::NotFound};
  }
  const tls::CertificateSource& s = it->second;
  Material m;
  m.what = "certificates." + s.name;
  auto text = [](const fs::path& file, const std::string& pem) -> Result<std::string> {
    if (!pem.empty()) return pem;
    if (file.empty()) return std::string();
    return readText(file);
  };
  auto cert = text(s.certFile, s.certPem);
  auto key = text(s.keyFile, s.keyPem);
  auto ca = text(s.caFile, s.caPem);
  for (auto* r : {&cert, &key, &ca})
    if (!*r) return r->error();
  m.certText = std::move(*cert);
  m.keyText = std::move(*key);
  m.caText = std::move(*ca);
  return m;
}

int show(const ShowArgs& a) {
  bool byFile = !a.file.empty();
  bool byEntry = !a.project.empty() || !a.entry.empty();
  if (byFile == byEntry || (byEntry && (a.project.empty() || a.entry.empty()))) {
    std::fprintf(stderr, "ductus cert show: give a FILE, or --project DIR and --entry NAME\n");
    return kUsageError;
  }
  Material m;
  if (byFile) {
    auto cert = readText(a.file);
    if (!cert) {
      std::fprintf(stderr, "ductus cert show: %s\n", cert.error().message.c_str());
      return 1;
    }
    m.what = a.file;
    m.certText = std::move(*cert);
    if (!a.key.empty()) {
      auto key = readText(a.key);
      if (!key) {
        std::fprintf(stderr, "ductus cert show: %s\n", key.error().message.c_str());
        return 1;
      }
      m.keyText = std::move(*key);
    }
  } else {
    if (!a.key.empty()) {
      std::fprintf(stderr,
                   "ductus cert show: --key is for a FILE; an entry's key is its key_file\n");
      return kUsageError;
    }
    auto got = materialOfEntry(a);
    if (!got) {
      std::fprintf(stderr, "ductus cert show: %s\n", got.error().message.c_str());
      return 1;
    }
    m = std::move(*got);
  }
  Verdict v;
  tls::PkeyPtr key;
  if (!m.keyText.empty()) {
    auto k = tls::readKey(m.keyText, m.what + " key");
    OPENSSL_cleanse(m.keyText.data(), m.keyText.size());
    if (k)
      key = std::move(*k);
    else
      problem(v, true, k.error().message);
  }
  if (!m.certText.empty()) showCertificates(m.what, m.certText, key.get(), v, false);
  if (!m.caText.empty()) showCertificates(m.what + " CA", m.caText, nullptr, v, true);
  if (v.errors) {
    std::printf("%d error%s\n", v.errors, v.errors == 1 ? "" : "s");
    return 1;
  }
  std::printf(v.warnings ? "usable, with %d warning%s\n" : "ok\n", v.warnings,
              v.warnings == 1 ? "" : "s");
  return 0;
}

}  // namespace

void addCertCommand(CLI::App& ductus, int& exitCode) {
  auto* cert = ductus.add_subcommand("cert",
                                     "make a key and certificate (self-signed), a key and a "
                                     "request for a CA, or check one (show)");
  cert->require_subcommand(1);

  auto addMakeOptions = [](CLI::App* c, MakeArgs& a) {
    c->add_option("--name", a.name,
                  "the subject's CN, and the files' name: NAME.key, NAME.pem/.csr")
        ->required()
        ->type_name("NAME");
    c->add_option("--dns", a.dns,
                  "DNS names (subjectAltName), comma-separated; default: NAME unless --ip")
        ->delimiter(',')
        ->type_name("a,b");
    c->add_option("--ip", a.ips, "IP addresses (subjectAltName), comma-separated")
        ->delimiter(',')
        ->type_name("ADDR");
    c->add_option("--key-type", a.keyType, "ec (ECDSA P-256) or rsa (RSA 2048)")
        ->capture_default_str();
    c->add_option("--out", a.out,
                  "the folder the files go in (made if missing); existing files are never replaced")
        ->required()
        ->type_name("DIR");
  };

  auto selfArgs = std::make_shared<MakeArgs>();
  auto* self = cert->add_subcommand(
      "self-signed",
      "a new key (written 0600) and a certificate signed by itself, for TLS servers and clients "
      "(tests, closed networks); prints the resources.yaml entry. Peers trust it by naming the "
      "certificate as their ca_file.");
  addMakeOptions(self, *selfArgs);
  self->add_option("--days", selfArgs->days, "how long it is valid, 1-3650")->capture_default_str();
  self->callback([selfArgs, &exitCode] { exitCode = makeCommon(*selfArgs, false); });

  auto reqArgs = std::make_shared<MakeArgs>();
  auto* req = cert->add_subcommand(
      "request",
      "a new key (written 0600) and a certificate signing request (NAME.csr, PEM) with the names "
      "given, for TLS servers and clients, to send to the hospital's CA");
  addMakeOptions(req, *reqArgs);
  req->add_option("--subject", reqArgs->subject,
                  "the rest of the subject, e.g. \"/O=Hospital/OU=Lab\" (CN is --name)")
      ->type_name("DN");
  req->callback([reqArgs, &exitCode] { exitCode = makeCommon(*reqArgs, true); });

  auto showArgs = std::make_shared<ShowArgs>();
  auto* showCmd = cert->add_subcommand(
      "show",
      "a certificate file or a project's certificates: entry: subject, issuer, names, validity "
      "(a warning under 30 days left; exit 1 once expired), whether the key belongs to it, and "
      "whether the chain is in order (each certificate issued by the next)");
  showCmd->add_option("FILE", showArgs->file, "a PEM file: a certificate and its chain, or CAs")
      ->type_name("");
  showCmd->add_option("--key", showArgs->key, "the key to check against FILE's first certificate")
      ->type_name("FILE");
  showCmd
      ->add_option("--project", showArgs->project,
                   "the project folder whose resources.yaml names the entry")
      ->type_name("DIR");
  showCmd
      ->add_option("--entry", showArgs->entry,
                   "the certificates: entry (its key and CA are checked too)")
      ->type_name("NAME");
  addEnvironmentOption(*showCmd, showArgs->env);
  showCmd->callback([showArgs, &exitCode] { exitCode = show(*showArgs); });
}

}  // namespace ductus::supervisor
