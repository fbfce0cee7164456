// Connection strings: the one place where the engine adds what every
// PostgreSQL connection it opens must have (PgConnection::connect applies
// it, so the store's pool, migrations, `ductus check` and scripts' db()
// connections all get it). A string is parsed with PQconninfoParse and
// rebuilt as keyword='value' pairs, so a URL (postgresql://...) and a
// keyword/value string are treated alike, and a parameter the operator set
// (in the string, or through its environment variable, e.g.
// PGCONNECT_TIMEOUT) is never replaced.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"
#include "common/tls/settings.h"

namespace ductus::tls {
class Certificates;
}

namespace ductus::store {

// Without these a PostgreSQL that stops answering hangs a connect forever
// (libpq has no connect timeout of its own by default), and a server or
// network that vanishes leaves a connection waiting for an answer that
// never comes until the kernel gives up, hours later. Keepalives: idle 15
// s, then 3 probes 5 s apart, so a dead peer is noticed in ~30 s.
struct ConnectionDefaults {
  int connectTimeoutSeconds = 10;
  int keepalivesIdleSeconds = 15;
  int keepalivesIntervalSeconds = 5;
  int keepalivesCount = 3;
};

using ConninfoParam = std::pair<std::string, std::string>;

// `conninfo` with each of `defaults` (keyword, value) added unless the
// string or the keyword's environment variable already sets it. An error
// (libpq's reason) when the string is not a connection string.
Result<std::string> withConninfoDefaults(const std::string& conninfo,
                                         const std::vector<ConninfoParam>& defaults);

// withConninfoDefaults with connect_timeout and the TCP keepalives.
Result<std::string> hardenedConninfo(const std::string& conninfo,
                                     const ConnectionDefaults& defaults = {});

// Run on a session whose locks another engine may wait for (the ownership
// lock's, the store's): the server's own keepalives and TCP user timeout
// end it ~25 s after the engine's host vanished, where the server's
// defaults would keep it, and every lock it holds, for two hours. Through
// pg_settings, so a server without one of them is not an error; on a Unix
// socket the TCP ones are taken and ignored.
// And client_connection_check_interval (PostgreSQL 14 on): a statement
// checks every second that its client is still there. A backend waiting on
// a lock does not otherwise notice that its engine was killed (the socket
// is closed, but nothing reads it until the statement ends): it waited on,
// and when the lock went it committed what the dead engine asked, after
// the next engine's start had settled and read the queue (a route's
// deliveries done, its source messages left pending). Now it is cancelled
// within a second of the death.
inline constexpr const char* kServerSideKeepalives =
    "SELECT set_config(s.name, s.value, false) FROM (VALUES ('tcp_keepalives_idle', '10'), "
    "('tcp_keepalives_interval', '5'), ('tcp_keepalives_count', '3'), "
    "('tcp_user_timeout', '25000'), ('client_connection_check_interval', '1000')) "
    "AS s(name, value) JOIN pg_settings p ON p.name = s.name";

// The value a connection string sets for `keyword` ("" when it sets none
// or does not parse).
std::string conninfoValue(const std::string& conninfo, const std::string& keyword);

// A multi-host connection string (host=a,b,c) without its hosts up to and
// including the one at `host`:`port` (PQhost and PQport of the attempt
// that timed out), everything else kept: libpq's non-blocking connect has
// no per-host timeout, so the caller starts again on what is left, as
// libpq's blocking connect moves on. nullopt when that host is the last
// one, or is not in the string.
std::optional<std::string> conninfoAfterHost(const std::string& conninfo, const std::string& host,
                                             const std::string& port);

// `conninfo` with sslmode=verify-full (TLS required, the server's
// certificate checked against the CA and its name against the host) and
// sslrootcert=`caFile`, replacing what the string says for these two: a
// project that names a CA for a database must not be weakened by its URL.
Result<std::string> withVerifiedTls(const std::string& conninfo, const std::string& caFile);

// A database's ca: (databases: in resources.yaml, the engine's database:)
// as libpq takes it: withVerifiedTls with a file holding the CA's PEM, the
// entry's own ca_file when it has one, else a 0600 temporary file written
// here and removed when this object goes (libpq reads sslrootcert at each
// connect, so it lives as long as the connections' owner).
class DatabaseTls {
 public:
  DatabaseTls() = default;
  ~DatabaseTls();
  DatabaseTls(const DatabaseTls&) = delete;
  DatabaseTls& operator=(const DatabaseTls&) = delete;

  // `conninfo` unchanged when `tls` is not enabled or names no CA. Errors
  // name `what` ("database lab").
  Result<std::string> apply(const std::string& what, const std::string& conninfo,
                            const tls::ConnectTls& tls,
                            const std::map<std::string, tls::CertificateSource>& sources,
                            tls::Certificates* certificates);
  // The file holding the CA's PEM, for a client that takes a path (SQL
  // Server's driver too): the entry's own ca_file, else a file written
  // here. Empty when `tls` names no CA.
  Result<std::filesystem::path> caFile(const std::string& what, const tls::ConnectTls& tls,
                                       const std::map<std::string, tls::CertificateSource>& sources,
                                       tls::Certificates* certificates);
  const std::vector<std::filesystem::path>& written() const { return written_; }

 private:
  std::vector<std::filesystem::path> written_;
};

}  // namespace ductus::store
