#include "common/tls/certificates.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "common/file_text.h"
#include "common/log.h"
#include "common/sha256.h"

namespace ductus::tls {
namespace {

// A certificate file is a few KB; a chain of ten is still far below this.
constexpr std::uintmax_t kMaxPemBytes = 1 << 20;

// TLS 1.2's suites for a listener and an outbound connection: forward
// secrecy and AEAD only (Mozilla's "intermediate" without DHE). TLS 1.3's
// own three are all strong and stay as OpenSSL has them.
constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

std::string sslError() {
  unsigned long e = ERR_peek_last_error();
  const char* r = e ? ERR_reason_error_string(e) : nullptr;
  ERR_clear_error();
  return r ? r : "unknown error";
}

std::shared_ptr<X509> share(X509Ptr x) { return std::shared_ptr<X509>(x.release(), X509_free); }

// Where an entry is, for messages: "certificates.server (resources.yaml:4)".
std::string entryName(const CertificateSource& s) {
  return "certificates." + s.name + (s.at.empty() ? "" : " (" + s.at + ")");
}

struct Text {
  std::string pem;
  std::string what;  // "certificates.server: tls/server.pem"
};

Result<Text> textOf(const CertificateSource& s, const std::filesystem::path& file,
                    const std::string& pem, const char* key) {
  if (!file.empty()) {
    auto r = readFileBounded(file, kMaxPemBytes);
    if (!r) return Error{entryName(s) + ": " + key + ": " + r.error().message, ErrorKind::Config};
    return Text{std::move(*r), entryName(s) + ": " + file.string()};
  }
  return Text{pem, entryName(s) + ": " + std::string(key)};
}

SslCtxPtr baseContext(const SSL_METHOD* method) {
  SslCtxPtr ctx(SSL_CTX_new(method));
  if (!ctx) return ctx;
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_max_proto_version(ctx.get(), TLS1_3_VERSION);
  SSL_CTX_set_cipher_list(ctx.get(), kTls12Ciphers);
  // No renegotiation (a peer could make us redo the expensive half at
  // will), no compression (CRIME).
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                                     SSL_OP_CIPHER_SERVER_PREFERENCE);
  // Partial writes and moving buffers suit memory BIOs.
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                                  SSL_MODE_RELEASE_BUFFERS);
  return ctx;
}

bool isIpAddress(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

}  // namespace

Result<Loaded> loadSource(const CertificateSource& s, Clock::time_point now) {
  Loaded out;
  out.name = s.name;
  std::string hashed;
  if (s.isPair()) {
    if ((s.certFile.empty() && s.certPem.empty()) || (s.keyFile.empty() && s.keyPem.empty()))
      return Error{entryName(s) + ": a certificate needs both cert_file (or cert) and key_file (or key)",
                   ErrorKind::Config};
    auto cert = textOf(s, s.certFile, s.certPem, "cert");
    if (!cert) return cert.error();
    auto key = textOf(s, s.keyFile, s.keyPem, "key");
    if (!key) return key.error();
    auto chain = readCertificates(cert->pem, cert->what);
    if (!chain) return chain.error();
    auto pkey = readKey(key->pem, key->what);
    if (!pkey) return pkey.error();
    if (auto ok = checkKeyMatches(chain->front().get(), pkey->get(), entryName(s)); !ok)
      return ok.error();
    if (auto ok = checkCurrent(chain->front().get(), entryName(s), now); !ok) return ok.error();
    out.notAfter = notAfterOf(chain->front().get());
    out.subject = subjectOf(chain->front().get());
    for (auto& x : *chain) out.chain.push_back(share(std::move(x)));
    out.key = std::shared_ptr<EVP_PKEY>(pkey->release(), EVP_PKEY_free);
    hashed += cert->pem;
    hashed += '\0';
    hashed += key->pem;
  }
  hashed += '\0';
  if (s.hasCa()) {
    auto ca = textOf(s, s.caFile, s.caPem, "ca");
    if (!ca) return ca.error();
    auto cas = readCertificates(ca->pem, ca->what);
    if (!cas) return cas.error();
    for (auto& x : *cas) {
      if (auto ok = checkCurrent(x.get(), entryName(s) + ": ca", now); !ok) return ok.error();
      auto after = notAfterOf(x.get());
      if (!s.isPair() && (out.notAfter == Clock::time_point{} || after < out.notAfter)) {
        out.notAfter = after;
        out.subject = subjectOf(x.get());
      }
      out.cas.push_back(share(std::move(x)));
    }
    hashed += ca->pem;
  }
  if (!s.isPair() && !s.hasCa())
    return Error{entryName(s) + ": give cert_file and key_file (or cert and key), or a ca_file (or ca)",
                 ErrorKind::Config};
  out.sha256 = sha256Hex(hashed);
  return out;
}

// ---- Certificates ----

Result<std::shared_ptr<Certificates>> Certificates::load(std::vector<CertificateSource> sources,
                                                         Clock::time_point now) {
  std::shared_ptr<Certificates> c(new Certificates());
  for (auto& s : sources) {
    auto loaded = loadSource(s, now);
    if (!loaded) return loaded.error();
    c->loaded_[s.name] = std::make_shared<const Loaded>(std::move(*loaded));
    c->sources_[s.name] = std::move(s);
  }
  return c;
}

std::vector<std::string> Certificates::reload(Clock::time_point now) {
  std::map<std::string, CertificateSource> sources;
  std::map<std::string, std::string> hashes;
  {
    std::lock_guard lock(mutex_);
    sources = sources_;
    for (const auto& [name, l] : loaded_) hashes[name] = l->sha256;
  }
  std::vector<std::string> replaced;
  for (const auto& [name, s] : sources) {
    if (!s.fromFiles()) continue;  // text from the project: changes only with a restart
    auto loaded = loadSource(s, now);
    std::lock_guard lock(mutex_);
    if (!loaded) {
      // Logged once per distinct content: the same broken file is not
      // reported every minute. A file that cannot be read at all is
      // keyed by its message.
      std::string key = loaded.error().message;
      if (failedHash_[name] != key) {
        failedHash_[name] = key;
        spdlog::warn("{}: the changed certificate does not load, the one loaded before stays: {}",
                     entryName(s), loaded.error().message);
      }
      continue;
    }
    failedHash_.erase(name);
    if (loaded->sha256 == hashes[name]) continue;
    spdlog::info("{}: renewed ({}), served to new connections from now on; valid until {}",
                 entryName(s), loaded->subject, formatTime(loaded->notAfter));
    loaded_[name] = std::make_shared<const Loaded>(std::move(*loaded));
    ++generation_;
    replaced.push_back(name);
  }
  return replaced;
}

std::vector<std::shared_ptr<const Loaded>> Certificates::entries() const {
  std::lock_guard lock(mutex_);
  std::vector<std::shared_ptr<const Loaded>> out;
  for (const auto& [name, l] : loaded_) out.push_back(l);
  return out;
}

std::shared_ptr<const Loaded> Certificates::entry(const std::string& name) const {
  std::lock_guard lock(mutex_);
  auto it = loaded_.find(name);
  return it == loaded_.end() ? nullptr : it->second;
}

bool Certificates::fromFiles(const std::string& name) const {
  std::lock_guard lock(mutex_);
  auto it = sources_.find(name);
  return it != sources_.end() && it->second.fromFiles();
}

uint64_t Certificates::generation() const {
  std::lock_guard lock(mutex_);
  return generation_;
}

Result<std::shared_ptr<ServerTls>> Certificates::server(const ListenerTls& settings) {
  auto where = [&] { return settings.at.empty() ? std::string() : " (" + settings.at + ")"; };
  auto pair = entry(settings.certificate);
  if (!pair || !pair->key)
    return Error{"tls.certificate \"" + settings.certificate + "\"" + where() +
                     " is not a certificates: entry with a certificate and a key",
                 ErrorKind::Config};
  if (!settings.clientCa.empty()) {
    auto ca = entry(settings.clientCa);
    if (!ca || (ca->cas.empty() && ca->chain.empty()))
      return Error{"tls.clients.ca \"" + settings.clientCa + "\"" + where() +
                       " is not a certificates: entry with a CA",
                   ErrorKind::Config};
  }
  for (const auto& p : settings.subjects)
    if (auto ok = checkSubjectPattern(p); !ok)
      return Error{"tls.clients.subjects" + where() + ": " + ok.error().message, ErrorKind::Config};
  std::shared_ptr<ServerTls> s(new ServerTls(shared_from_this(), settings));
  if (!s->current())
    return Error{"tls" + where() + ": the TLS context could not be made: " + sslError(),
                 ErrorKind::Internal};
  return s;
}

Result<std::shared_ptr<ClientTls>> Certificates::client(const ConnectTls& settings) {
  auto where = [&] { return settings.at.empty() ? std::string() : " (" + settings.at + ")"; };
  if (!settings.ca.empty()) {
    auto ca = entry(settings.ca);
    if (!ca || (ca->cas.empty() && ca->chain.empty()))
      return Error{"tls.ca \"" + settings.ca + "\"" + where() + " is not a certificates: entry with a CA",
                   ErrorKind::Config};
  }
  if (!settings.certificate.empty()) {
    auto pair = entry(settings.certificate);
    if (!pair || !pair->key)
      return Error{"tls.certificate \"" + settings.certificate + "\"" + where() +
                       " is not a certificates: entry with a certificate and a key",
                   ErrorKind::Config};
  }
  std::string key = settings.ca + '\0' + settings.certificate;
  {
    std::lock_guard lock(mutex_);
    if (auto it = clients_.find(key); it != clients_.end())
      if (auto shared = it->second.lock()) return shared;
  }
  std::shared_ptr<ClientTls> c(new ClientTls(shared_from_this(), settings));
  if (!c->current())
    return Error{"tls" + where() + ": the TLS context could not be made: " + sslError(),
                 ErrorKind::Internal};
  std::lock_guard lock(mutex_);
  clients_[key] = c;
  return c;
}

// ---- ServerTls ----

ServerTls::ServerTls(std::shared_ptr<const Certificates> owner, ListenerTls settings)
    : owner_(std::move(owner)), settings_(std::move(settings)) {}

SSL_CTX* ServerTls::current() {
  std::lock_guard lock(mutex_);
  uint64_t gen = owner_->generation();
  if (ctx_ && gen == generation_) return ctx_.get();
  auto pair = owner_->entry(settings_.certificate);
  if (!pair || !pair->key || pair->chain.empty()) return ctx_.get();
  SslCtxPtr ctx = baseContext(TLS_server_method());
  if (!ctx) return ctx_.get();
  STACK_OF(X509)* chain = sk_X509_new_null();
  for (size_t i = 1; i < pair->chain.size(); ++i) sk_X509_push(chain, pair->chain[i].get());
  bool ok = SSL_CTX_use_cert_and_key(ctx.get(), pair->chain[0].get(), pair->key.get(), chain, 1) == 1;
  sk_X509_free(chain);  // use_cert_and_key took its own references
  if (!ok) return ctx_.get();
  if (!settings_.clientCa.empty()) {
    auto ca = owner_->entry(settings_.clientCa);
    if (!ca) return ctx_.get();
    X509_STORE* store = SSL_CTX_get_cert_store(ctx.get());
    STACK_OF(X509_NAME)* names = sk_X509_NAME_new_null();
    // A pair named as clients.ca: its chain's last certificate is the CA.
    std::vector<std::shared_ptr<X509>> cas = ca->cas;
    if (cas.empty() && !ca->chain.empty()) cas.push_back(ca->chain.back());
    for (const auto& x : cas) {
      X509_STORE_add_cert(store, x.get());
      sk_X509_NAME_push(names, X509_NAME_dup(X509_get_subject_name(x.get())));
    }
    ERR_clear_error();  // a CA added twice is not an error here
    SSL_CTX_set_client_CA_list(ctx.get(), names);
    SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    // A resumed session would skip the subject check's certificate: each
    // connection of a listener that asks for client certificates proves
    // itself in full.
    SSL_CTX_set_options(ctx.get(), SSL_OP_NO_TICKET);
    SSL_CTX_set_session_cache_mode(ctx.get(), SSL_SESS_CACHE_OFF);
    SSL_CTX_set_num_tickets(ctx.get(), 0);
  }
  ctx_ = std::move(ctx);
  generation_ = gen;
  return ctx_.get();
}

SslPtr ServerTls::session() {
  SSL_CTX* ctx = current();
  if (!ctx) return nullptr;
  SslPtr ssl(SSL_new(ctx));
  if (ssl) SSL_set_accept_state(ssl.get());
  return ssl;
}

std::optional<std::string> ServerTls::refusal(X509* peer) const {
  if (settings_.clientCa.empty() || settings_.subjects.empty()) return std::nullopt;
  if (!peer) return "no certificate from the client (this listener requires one)";
  for (const auto& p : settings_.subjects)
    if (subjectMatches(peer, p)) return std::nullopt;
  std::string names;
  for (const auto& n : dnsNamesOf(peer)) names += (names.empty() ? "" : ", ") + n;
  return "the client certificate " + subjectOf(peer) +
         (names.empty() ? "" : " (DNS " + names + ")") + " matches none of tls.clients.subjects";
}

// ---- ClientTls ----

ClientTls::ClientTls(std::shared_ptr<const Certificates> owner, ConnectTls settings)
    : owner_(std::move(owner)), settings_(std::move(settings)) {}

SSL_CTX* ClientTls::current() {
  std::lock_guard lock(mutex_);
  uint64_t gen = owner_->generation();
  if (ctx_ && gen == generation_) return ctx_.get();
  SslCtxPtr ctx = baseContext(TLS_client_method());
  if (!ctx) return ctx_.get();
  // The system's roots, plus the CA the connection names.
  SSL_CTX_set_default_verify_paths(ctx.get());
  if (!settings_.ca.empty()) {
    auto ca = owner_->entry(settings_.ca);
    if (!ca) return ctx_.get();
    X509_STORE* store = SSL_CTX_get_cert_store(ctx.get());
    std::vector<std::shared_ptr<X509>> cas = ca->cas;
    if (cas.empty() && !ca->chain.empty()) cas.push_back(ca->chain.back());
    for (const auto& x : cas) X509_STORE_add_cert(store, x.get());
    ERR_clear_error();
  }
  if (!settings_.certificate.empty()) {
    auto pair = owner_->entry(settings_.certificate);
    if (!pair || !pair->key || pair->chain.empty()) return ctx_.get();
    STACK_OF(X509)* chain = sk_X509_new_null();
    for (size_t i = 1; i < pair->chain.size(); ++i) sk_X509_push(chain, pair->chain[i].get());
    bool ok =
        SSL_CTX_use_cert_and_key(ctx.get(), pair->chain[0].get(), pair->key.get(), chain, 1) == 1;
    sk_X509_free(chain);
    if (!ok) return ctx_.get();
  }
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  ctx_ = std::move(ctx);
  generation_ = gen;
  return ctx_.get();
}

SslPtr ClientTls::session(const std::string& host) {
  SSL_CTX* ctx = current();
  if (!ctx) return nullptr;
  SslPtr ssl(SSL_new(ctx));
  if (!ssl) return ssl;
  SSL_set_connect_state(ssl.get());
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl.get());
  if (isIpAddress(host)) {
    X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str());
  } else {
    SSL_set_tlsext_host_name(ssl.get(), host.c_str());
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0);
  }
  return ssl;
}

std::string ClientTls::caPem() const {
  if (settings_.ca.empty()) return {};
  auto ca = owner_->entry(settings_.ca);
  if (!ca) return {};
  std::string out;
  if (!ca->cas.empty())
    for (const auto& x : ca->cas) out += pemOf(x.get());
  else if (!ca->chain.empty())
    out += pemOf(ca->chain.back().get());
  return out;
}

std::string ClientTls::certPem() const {
  if (settings_.certificate.empty()) return {};
  auto pair = owner_->entry(settings_.certificate);
  std::string out;
  if (pair)
    for (const auto& x : pair->chain) out += pemOf(x.get());
  return out;
}

std::string ClientTls::keyPem() const {
  if (settings_.certificate.empty()) return {};
  auto pair = owner_->entry(settings_.certificate);
  if (!pair || !pair->key) return {};
  return pemOf(pair->key.get());
}

}  // namespace ductus::tls
