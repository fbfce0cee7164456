// The engine's certificates: every certificates: entry of resources.yaml
// loaded before the database, kept current, and handed to listeners
// (ServerTls) and outbound connections (ClientTls).
//
// Loading checks each pair's key against its certificate and refuses an
// expired certificate, naming the entry, so a start with a broken
// certificate changes nothing (`validate` runs the same). File-backed
// entries are checked again by reload() (the engine: every minute) by a
// SHA-256 of their files' contents: a renewal of the same key type is often
// the same size, and a copy can keep the old time. A changed entry that
// loads replaces the old one for every new connection, with no restart and
// nothing rebuilt by its users (each new session asks for the current
// pair); one that does not load is logged once per distinct content and the
// old one stays.
//
// One verification rule for everything outbound: the system's roots plus
// the CA the connection names, the host name checked against the server's
// certificate.
#pragma once

#include <openssl/ssl.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/tls/certificate.h"
#include "common/tls/session.h"
#include "common/tls/settings.h"

namespace ductus::tls {

struct SslCtxFree {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};
using SslCtxPtr = std::unique_ptr<SSL_CTX, SslCtxFree>;

// One loaded entry: what its files (or text) held when they last loaded.
struct Loaded {
  std::string name;
  // A pair: the leaf first, then its chain; the key.
  std::vector<std::shared_ptr<X509>> chain;
  std::shared_ptr<EVP_PKEY> key;
  // The CA certificates the entry names (ca_file / ca).
  std::vector<std::shared_ptr<X509>> cas;
  std::string sha256;  // of the sources' contents, in a fixed order
  Clock::time_point notAfter{};  // the leaf's; a CA alone: the earliest CA's
  std::string subject;           // the leaf's (a CA alone: the first CA's)
};

class Certificates;

// What a listener serves. Made once per listener; session() hands each new
// connection the pair current at that moment.
class ServerTls {
 public:
  // A server session for a new connection: its pair, and (with clients)
  // the client certificate required and verified against the CA.
  SslPtr session();
  // After the handshake: an empty optional when the client's certificate
  // is allowed (or none is asked for), else why not, for the log ("the
  // client certificate's subject CN=x,O=y matches none of tls.clients.subjects").
  std::optional<std::string> refusal(X509* peer) const;
  const ListenerTls& settings() const { return settings_; }

 private:
  friend class Certificates;
  ServerTls(std::shared_ptr<const Certificates> owner, ListenerTls settings);
  // The context for the entries as they are now: rebuilt when a reload
  // replaced one (an SSL keeps the context it was made from).
  SSL_CTX* current();
  std::shared_ptr<const Certificates> owner_;
  ListenerTls settings_;
  std::mutex mutex_;
  SslCtxPtr ctx_;  // TLS 1.2 and 1.3, strong ciphers, client verification
  uint64_t generation_ = 0;
};

// What an outbound connection verifies and presents; shared by every
// connection naming the same ConnectTls.
class ClientTls {
 public:
  // A client session for `host` (SNI and the name checked against the
  // server's certificate; an IP address is checked as one).
  SslPtr session(const std::string& host);
  // The PEM a libcurl handle needs: the CA's certificates (empty when the
  // system's roots alone), and the client pair (empty when none). libcurl
  // takes them as blobs (CURLOPT_CAINFO_BLOB, CURLOPT_SSLCERT_BLOB,
  // CURLOPT_SSLKEY_BLOB); the pair current at the call.
  std::string caPem() const;
  std::string certPem() const;
  std::string keyPem() const;
  const ConnectTls& settings() const { return settings_; }

 private:
  friend class Certificates;
  ClientTls(std::shared_ptr<const Certificates> owner, ConnectTls settings);
  SSL_CTX* current();
  std::shared_ptr<const Certificates> owner_;
  ConnectTls settings_;
  std::mutex mutex_;
  SslCtxPtr ctx_;  // TLS 1.2 and 1.3, the system's roots + the CA, the client pair
  uint64_t generation_ = 0;
};

class Certificates : public std::enable_shared_from_this<Certificates> {
 public:
  // Loads every entry (files read relative to nothing: the loader resolved
  // them). The first error names its entry and where it is written.
  static Result<std::shared_ptr<Certificates>> load(std::vector<CertificateSource> sources,
                                                    Clock::time_point now = Clock::now());

  // Reads file-backed entries again; an entry whose contents changed and
  // load is replaced. Returns the names replaced; a failure is logged once
  // per distinct content (warn) and the old entry stays.
  std::vector<std::string> reload(Clock::time_point now = Clock::now());

  // For a listener: `settings.certificate` must be a pair, clients.ca an
  // entry with a CA (or a pair whose chain is the CA). Errors name the
  // entry and `settings.at`.
  Result<std::shared_ptr<ServerTls>> server(const ListenerTls& settings);
  // For an outbound connection; one per distinct ConnectTls, shared.
  Result<std::shared_ptr<ClientTls>> client(const ConnectTls& settings);

  // Every entry as loaded now (for the expiry gauge and `cert show`).
  std::vector<std::shared_ptr<const Loaded>> entries() const;
  std::shared_ptr<const Loaded> entry(const std::string& name) const;
  // Whether the entry comes from files (a renewal on disk is looked for).
  bool fromFiles(const std::string& name) const;
  // Counts the reloads that replaced an entry: users rebuild what they
  // made from the entries when it moves.
  uint64_t generation() const;

 private:
  friend class ServerTls;
  friend class ClientTls;
  Certificates() = default;
  uint64_t generation_ = 1;
  mutable std::mutex mutex_;  // reload() may run on the pool; sessions on the loop
  std::map<std::string, CertificateSource> sources_;
  std::map<std::string, std::shared_ptr<const Loaded>> loaded_;
  std::map<std::string, std::string> failedHash_;  // the content last logged as failing
  // By ConnectTls key. Weak: each ClientTls holds its owner (this), so a
  // strong reference back would keep both alive for ever.
  std::map<std::string, std::weak_ptr<ClientTls>> clients_;
};

// Loads one source alone (validate, `cert show`).
Result<Loaded> loadSource(const CertificateSource& source, Clock::time_point now);

}  // namespace ductus::tls
