// The project an operator writes (ductus.yaml, resources.yaml, secrets/,
// interfaces/<name>/), as typed values: ductus.yaml → EngineConfig,
// resources.yaml → Resources, interfaces/<name>/interface.yaml →
// InterfaceConfig. Everything here has been checked by the loader; ${env:}
// and ${secret:} are already substituted, so secret values live in these
// structs and must never be logged (describe() texts are built from what was
// written, not the values).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "common/config/diagnostic.h"
#include "common/ldap/settings.h"
#include "common/monitor/settings.h"
#include "common/oidc/settings.h"
#include "common/sftp/settings.h"
#include "common/tls/settings.h"

namespace ductus::config {

using Duration = std::chrono::milliseconds;

enum class Format { Hl7v2, Json, Text, Csv, Xml };
enum class Durability { Strict, Relaxed };
enum class Isolation { Shared, Dedicated };
// Whole weeks only: partitions are per day (1w) or per week (3w, 7w), and
// few tiers keep the partition count low (statements Postgres cannot prune
// pay for every partition). The value is the window in days.
enum class Retention { OneWeek = 7, ThreeWeeks = 21, SevenWeeks = 49 };
// `quarantined:` of an interface: what retention does with its quarantined
// messages when their period expires. Keep: they move to the held area
// until someone resends, edits or dismisses them. Purge: they go with
// their period, after the retention's days.
enum class QuarantinedRetention { Keep, Purge };

const char* formatName(Format f);
const char* retentionName(Retention r);

// `charset:` of an interface: how its payload's bytes become text. Auto
// follows MSH-18, then the bytes (UTF-8 with a multi-byte sequence, else
// ISO-8859-1); the other two force one for senders whose MSH-18 is wrong.
enum class Charset { Auto, Utf8, Latin1 };
// The name the worker's SDK takes: "auto" | "utf-8" | "iso-8859-1".
inline const char* charsetName(Charset c) {
  return c == Charset::Utf8 ? "utf-8" : c == Charset::Latin1 ? "iso-8859-1" : "auto";
}

// Messages carrying documents (base64 PDFs in OBX-5) run to tens of MB.
constexpr uint64_t kDefaultMaxMessageBytes = 64ull << 20;
// Also the most max_message_size may say: a worker call carries the whole
// message (proto/frame.h allows 64 MB plus its envelope), and a bigger one
// would be stored, then refused by every call that tried to transform it.
constexpr uint64_t kMaxMessageBytesLimit = 64ull << 20;
constexpr Duration kDefaultTimeout = std::chrono::seconds(5);
constexpr Duration kMinTimeout = std::chrono::milliseconds(10);
constexpr Duration kMaxTimeout = std::chrono::minutes(10);
// dedupe.window: at least a minute (purges run hourly), at most a year.
constexpr Duration kMinDedupeWindow = std::chrono::minutes(1);
constexpr Duration kMaxDedupeWindow = std::chrono::hours(24 * 365);
// With an ordering key and no partitions: 16 lanes.
constexpr uint32_t kDefaultPartitions = 16;
constexpr uint32_t kMaxPartitions = 4096;

struct HostPort {
  std::string host;  // a name, an IPv4 address or an IPv6 address (no brackets)
  uint16_t port = 0;
  std::string toString() const;  // brackets around IPv6
};

// ---- ductus.yaml ----------------------------------------------------------

// isolates.heap_mb when not given: every worker heap's default (the pool,
// `ductus try`/`validate`/`test`, `ductus worker` without --heap-mb).
inline constexpr uint32_t kDefaultHeapMb = 512;

struct EngineConfig {
  // Empty when not given: `ductus dev` provides one, `ductus run` takes
  // --database or DUCTUS_DATABASE_URL. Substitution allowed.
  std::string database;
  // database: { url, ca }: verify-full against the CA named (a
  // certificates: entry); not enabled for the plain string form.
  tls::ConnectTls databaseTls;
  bool apiEnabled = true;  // `api: { listen: off }` disables it
  HostPort apiListen{"127.0.0.1", 7700};
  Location apiListenAt;
  std::optional<tls::ListenerTls> apiTls;  // api: { tls: } (HSTS with it)
  tls::AllowList apiAllow;                 // api: { allow: }
  // auth: { ldap: ... }: sign-in with the directory's passwords, roles
  // from its groups (api/auth/directory.h). Not enabled when absent.
  ldap::DirectorySettings ldap;
  // auth: { oidc: ... }: the console's single sign-on (api/auth/oidc.h).
  oidc::ProviderSettings oidc;
  uint32_t isolateWorkers = 0;  // 0 = one per core
  uint32_t heapMb = kDefaultHeapMb;
  Retention retention = Retention::SevenWeeks;  // each interface's default
  uint64_t maxMessageBytes = kDefaultMaxMessageBytes;
  // secrets: { key_file: ... }, resolved against the project folder; empty
  // when not given (the key then comes from DUCTUS_SECRETS_KEY only).
  std::filesystem::path secretsKeyFile;
  // limits: what one peer may hold of the engine, for every MLLP listener
  // and HTTP port (each its own count).
  struct Limits {
    uint32_t connectionsPerListener = 1000;  // past it: the longest idle closed, or the new one
    // From one address (IPv4-mapped IPv6 as IPv4); past it: the new one
    // accepted and closed at once. Not given: connectionsPerListener / 4.
    uint32_t connectionsPerAddress = 250;
    Duration idleTimeout = std::chrono::minutes(5);     // nothing in flight, nothing partial
    Duration frameDeadline = std::chrono::seconds(60);  // from a request's first byte
    uint64_t unreadAnswers = 1ull << 20;  // answers the peer has not read: reading stops
  } limits;
  // audit: { keep: 6y }: audit rows older than this are deleted (hourly, in
  // batches). At least a year: the log is what an inspection asks for.
  Duration auditKeep = std::chrono::hours(24 * 365 * 6);
  // events: { keep: 30d, max_rows: 100000 }: the engine's events table
  // (supervisor/monitor/event_recorder.h) is kept within both bounds.
  Duration eventsKeep = std::chrono::hours(24 * 30);
  int64_t eventsMaxRows = 100'000;
  monitor::AlertSettings alerts;  // alerts: (enabled when present)
  Location alertsAt;
  // Where the cross-file checks and warnings place their words: smtp.ca
  // (a certificates: entry), and each channel and rule, in alerts' order.
  Location alertsSmtpCaAt;
  std::vector<Location> alertChannelsAt;
  std::vector<Location> alertRulesAt;
};

// ---- resources.yaml -------------------------------------------------------

enum class DatabaseKind { Postgresql, SqlServer };

struct DatabaseResource {
  std::string name;
  DatabaseKind kind = DatabaseKind::Postgresql;
  // postgresql://... (libpq's URL) or sqlserver://user:password@host/db
  // (common/config/sqlserver_url.h); substitution allowed.
  std::string url;
  uint32_t maxConnections = 10;
  // ca: a certificates: entry. PostgreSQL: verify-full against it. SQL
  // Server: TLS always, the server's certificate and name verified against
  // it (or the system's roots without ca:), unless trustServerCertificate.
  tls::ConnectTls tls;
  bool trustServerCertificate = false;  // SQL Server only
  Location at;
};

struct ApiResource {
  std::string name;
  std::string url;  // base URL; substitution allowed
  std::map<std::string, std::string> headers;  // substitution allowed (tokens)
  Duration timeout = std::chrono::seconds(30);
  // ca:/certificate: beside the URL; enabled for https:// or either given.
  tls::ConnectTls tls;
  Location at;
};

struct Resources {
  std::map<std::string, DatabaseResource> databases;
  std::map<std::string, ApiResource> apis;
  // certificates: for TLS, by name (common/tls/settings.h).
  std::map<std::string, tls::CertificateSource> certificates;
};

// ---- sources ---------------------------------------------------------------

struct MllpSource {
  HostPort listen;
  std::optional<tls::ListenerTls> tls;
  tls::AllowList allow;
};

enum class HttpMode { Queue, Respond };
struct HttpSource {
  HostPort listen;
  // Shared by every interface on the same port (their endpoints are one
  // server's): the checks refuse different ones.
  std::optional<tls::ListenerTls> tls;
  tls::AllowList allow;
  std::string path = "/";
  HttpMode mode = HttpMode::Queue;
};

enum class Split { None, Records };
// What a file or SFTP source reads and what it does with a file once read.
struct FileSelection {
  std::string path;  // folder; local ones relative to the project
  std::string pattern = "*";
  Split split = Split::None;
  std::string moveTo;        // empty when deleteAfter
  bool deleteAfter = false;  // `delete: true`
  Duration poll = std::chrono::seconds(5);
};

struct FileSource {
  FileSelection files;
};

struct SftpSource {
  // host, user, password and an inline private_key may be substituted;
  // private_key and known_hosts files are resolved against the project.
  sftp::ServerSettings server;
  FileSelection files;
  // Where private_key: and known_hosts: are written, for the checks.
  Location privateKeyAt, knownHostsAt;
};

struct ScheduleSource {
  std::optional<Duration> every;  // exactly one of every / cron
  std::string cron;               // 5 fields, server local time
};

struct InternalSource {};

using Source =
    std::variant<MllpSource, HttpSource, FileSource, SftpSource, ScheduleSource, InternalSource>;

const char* sourceKind(const Source& s);  // "mllp", "http", ...

// ---- destinations ----------------------------------------------------------

struct MllpDestination {
  HostPort address;  // host substitution allowed
  Duration ackTimeout = std::chrono::seconds(30);
  tls::ConnectTls tls;  // tls: true | { ca, certificate }
};

struct HttpDestination {
  std::string url;  // substitution allowed; empty when api is set
  std::string api;  // a resources.yaml apis: entry; path goes under its URL
  std::string path;
  std::string method = "POST";
  std::map<std::string, std::string> headers;  // substitution allowed
  Duration timeout = std::chrono::seconds(30);
  // With url: ca:/certificate: beside it; enabled for https:// or either
  // given. With api: the apis: entry's.
  tls::ConnectTls tls;
};

// How a file destination makes a write durable before it counts as sent
// (senders::FileSync says what each does).
enum class FileSyncMode { Group, Each, None };

// How a finished file gets its name (`publish:`): linked, written unnamed
// (a folder watcher sees IN_CREATE), or renamed from a hidden dot-name
// (IN_MOVED_TO, for readers that wait for a rename).
enum class FilePublish { Link, Rename };

struct FileDestination {
  std::string path;  // folder, relative to the project
  std::string name = "{id}";
  // Permissions of the files written (before the umask); folders made for
  // them get the same, plus search where reading is allowed. Messages are
  // patient data: not world-readable unless the project says so.
  int mode = 0640;
  FileSyncMode sync = FileSyncMode::Group;
  Location syncAt;  // for validate's warning about sync: none
  FilePublish publish = FilePublish::Link;
};

struct SftpDestination {
  sftp::ServerSettings server;  // as SftpSource's
  std::string path;             // the folder on the server
  std::string name = "{id}";    // as a file destination's (no `/`)
  int mode = 0640;              // the files written; patient data
  Location privateKeyAt, knownHostsAt;
};

// `interface: <name>`: routes to an interface whose source is internal.
struct RouteDestination {
  std::string interface;
};

using Target =
    std::variant<MllpDestination, HttpDestination, FileDestination, SftpDestination, RouteDestination>;

const char* targetKind(const Target& t);

struct RateLimit {
  uint32_t messages = 0;  // at most this many
  Duration per = std::chrono::seconds(1);
  bool dropOver = false;  // `over: drop` filters the excess; `wait` (default) delays it
};

struct Destination {
  std::string name;  // "default" for `destination:`
  Target target;
  std::string transform = "transform";  // the exported function
  Format output = Format::Hl7v2;        // defaults to the interface's format
  uint32_t maxAttempts = 0;             // retry.max_attempts; 0 = forever (transient)
  std::optional<RateLimit> rateLimit;
  // Its own monitor: { behind: }; unset: the interface's.
  std::optional<monitor::Behind> behind;
  bool saveOutput = false;
  std::string describe;  // "file out/" — from the text as written, never secret values
  Location at;           // the destination's map
  Location targetAt;     // the kind's key (route checks point here)
  Location transformAt;  // `transform:`'s value, else the destination's map
  std::string keyPath;   // "destination" or "destinations.<name>", as diagnostics name it
};

// ---- interface.yaml --------------------------------------------------------

struct Ordering {
  std::string key;  // e.g. PID.3.1
  uint32_t partitions = kDefaultPartitions;
};

struct InterfaceConfig {
  std::string name;  // its folder's name
  std::filesystem::path folder;
  std::string file;  // interface.yaml as reported in diagnostics
  Source source;
  std::string sourceDescribe;  // "mllp 127.0.0.1:2575"
  Location sourceAt;
  Format format = Format::Hl7v2;
  Charset charset = Charset::Auto;
  std::optional<Ordering> ordering;
  std::optional<std::string> dedupeKey;
  // dedupe.window: how long a key is remembered; none: the retention's days.
  std::optional<Duration> dedupeWindow;
  Durability durability = Durability::Strict;
  Duration timeout = kDefaultTimeout;
  Isolation isolation = Isolation::Shared;
  uint32_t workers = 1;  // dedicated only
  Retention retention = Retention::SevenWeeks;
  QuarantinedRetention quarantined = QuarantinedRetention::Keep;
  uint64_t maxMessageBytes = kDefaultMaxMessageBytes;
  std::string code = "transform.js";  // the module, relative to the folder
  std::string respond = "transform";  // respond mode: the function that answers
  Location respondAt;                 // `respond:`'s value, else the source
  std::map<std::string, uint32_t> dedicatedPools;  // database resource → connections
  Location dedicatedPoolsAt;
  std::vector<Destination> destinations;  // empty only in respond mode
  monitor::Expectations monitor;          // monitor:
  Location monitorAt;

  // Lanes: the partition count with an ordering key, else one.
  uint32_t partitionCount() const { return ordering ? ordering->partitions : 1; }
  bool respondMode() const {
    auto* h = std::get_if<HttpSource>(&source);
    return h && h->mode == HttpMode::Respond;
  }
};

struct Project {
  std::filesystem::path root;
  std::string environment;  // which secrets/<env>.json was used
  EngineConfig engine;
  Resources resources;
  std::vector<InterfaceConfig> interfaces;  // sorted by name

  const InterfaceConfig* find(std::string_view name) const;
};

}  // namespace ductus::config
