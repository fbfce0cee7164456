// The project format's table (format.h): every section and key of
// ductus.yaml, resources.yaml and interface.yaml. The loader's files read
// the values; what keys exist, their bounds and their words are here.
#include "common/config/format.h"

#include <cstdio>
#include <cstdlib>
#include <iterator>

#include "common/config/duration.h"
#include "common/config/model.h"

namespace ductus::config {

Key Key::req() const {
  Key k = *this;
  k.required = true;
  return k;
}
Key Key::subst() const {
  Key k = *this;
  k.substituted = true;
  return k;
}
Key Key::def(std::string_view text) const {
  Key k = *this;
  k.defaultText = text;
  return k;
}
Key Key::or_(ValueKind scalar) const {
  Key k = *this;
  k.orScalar = scalar;
  return k;
}

const Key& Section::key(std::string_view name) const {
  for (const auto& k : keys)
    if (k.name == name) return k;
  std::fprintf(stderr, "ductus: the project format's section %.*s has no key `%.*s`\n",
               static_cast<int>(path.size()), path.data(), static_cast<int>(name.size()),
               name.data());
  std::abort();
}

bool Section::has(std::string_view name) const {
  for (const auto& k : keys)
    if (k.name == name) return true;
  return false;
}

std::string_view kindName(ValueKind kind) {
  switch (kind) {
    case ValueKind::Text:
      return "text";
    case ValueKind::Whole:
      return "whole number";
    case ValueKind::Flag:
      return "true | false";
    case ValueKind::Duration:
      return "duration";
    case ValueKind::Period:
      return "duration or years";
    case ValueKind::Size:
      return "size";
    case ValueKind::Address:
      return "host:port";
    case ValueKind::Host:
      return "host";
    case ValueKind::Choice:
      return "one of";
    case ValueKind::Section:
      return "mapping";
    case ValueKind::Named:
      return "mapping of names";
    case ValueKind::SectionList:
      return "list of mappings";
    case ValueKind::TextList:
      return "list of text";
    case ValueKind::TextOrList:
      return "text or list of text";
    case ValueKind::WholeList:
      return "list of whole numbers";
    case ValueKind::TextMap:
      return "mapping of names to text";
    case ValueKind::WholeMap:
      return "mapping of names to whole numbers";
  }
  return "text";
}

namespace {

std::string sizeText(uint64_t bytes) {
  if (bytes >= (1ull << 30) && bytes % (1ull << 30) == 0) return std::to_string(bytes >> 30) + "GB";
  if (bytes >= (1ull << 20) && bytes % (1ull << 20) == 0) return std::to_string(bytes >> 20) + "MB";
  if (bytes >= (1ull << 10) && bytes % (1ull << 10) == 0) return std::to_string(bytes >> 10) + "KB";
  return std::to_string(bytes) + "B";
}

std::string durationText(uint64_t ms, bool years) {
  constexpr uint64_t kYearMs = 365ull * 24 * 3600 * 1000;
  if (years && ms >= kYearMs && ms % kYearMs == 0) return std::to_string(ms / kYearMs) + "y";
  return formatDuration(std::chrono::milliseconds(static_cast<int64_t>(ms)));
}

}  // namespace

std::string boundText(const Key& key) {
  switch (key.kind) {
    case ValueKind::Whole:
    case ValueKind::WholeList:
    case ValueKind::WholeMap:
      return std::to_string(key.min) + " to " + std::to_string(key.max);
    case ValueKind::Duration:
    case ValueKind::Period:
      return durationText(key.min, key.kind == ValueKind::Period) + " to " +
             durationText(key.max, key.kind == ValueKind::Period);
    case ValueKind::Size:
      return sizeText(key.min) + " to " + sizeText(key.max);
    case ValueKind::Section:
      if (key.orScalar == ValueKind::Duration)
        return durationText(key.min, false) + " to " + durationText(key.max, false);
      return "";
    default:
      return "";
  }
}

std::string choicesText(const Key& key) {
  std::string out;
  for (auto w : key.choices) out += (out.empty() ? "" : " | ") + std::string(w);
  return out;
}

namespace {

using K = ValueKind;
using S = SectionId;

constexpr uint64_t kMs = 1;
constexpr uint64_t kSecond = 1000 * kMs;
constexpr uint64_t kMinute = 60 * kSecond;
constexpr uint64_t kHour = 60 * kMinute;
constexpr uint64_t kDay = 24 * kHour;
constexpr uint64_t kYear = 365 * kDay;
constexpr uint64_t kKB = 1024;
constexpr uint64_t kMB = 1024 * kKB;
constexpr uint64_t kGB = 1024 * kMB;

Key text(std::string_view name, std::string_view meaning) { return Key{name, K::Text, meaning}; }
Key whole(std::string_view name, uint64_t min, uint64_t max, std::string_view meaning) {
  Key k{name, K::Whole, meaning};
  k.min = min;
  k.max = max;
  return k;
}
Key flag(std::string_view name, std::string_view meaning) { return Key{name, K::Flag, meaning}; }
Key duration(std::string_view name, uint64_t minMs, uint64_t maxMs, std::string_view meaning) {
  Key k{name, K::Duration, meaning};
  k.min = minMs;
  k.max = maxMs;
  return k;
}
Key size(std::string_view name, uint64_t min, uint64_t max, std::string_view meaning) {
  Key k{name, K::Size, meaning};
  k.min = min;
  k.max = max;
  return k;
}
Key address(std::string_view name, std::string_view meaning) {
  return Key{name, K::Address, meaning};
}
Key host(std::string_view name, std::string_view meaning) { return Key{name, K::Host, meaning}; }
Key choice(std::string_view name, std::vector<std::string_view> words, std::string_view meaning) {
  Key k{name, K::Choice, meaning};
  k.choices = std::move(words);
  return k;
}
Key wholeMap(std::string_view name, uint64_t min, uint64_t max, std::string_view meaning) {
  Key k{name, K::WholeMap, meaning};
  k.min = min;
  k.max = max;
  return k;
}
Key mapping(std::string_view name, SectionId id, std::string_view meaning) {
  Key k{name, K::Section, meaning};
  k.section = id;
  return k;
}
Key named(std::string_view name, SectionId id, std::string_view meaning) {
  Key k{name, K::Named, meaning};
  k.section = id;
  return k;
}
Key list(std::string_view name, SectionId id, std::string_view meaning) {
  Key k{name, K::SectionList, meaning};
  k.section = id;
  return k;
}
Key of(std::string_view name, ValueKind kind, std::string_view meaning) {
  return Key{name, kind, meaning};
}

// The keys written the same way in several places.
Key listenerTls() {
  return mapping("tls", S::ListenerTls,
                 "TLS on this listener: the certificate it serves, and the client certificates it "
                 "asks for");
}
Key allowList() {
  return of("allow", K::TextList,
            "who may connect: addresses (10.1.2.3), networks (10.20.0.0/16) and host names; "
            "others are dropped unread. Absent: anyone");
}
Key groupRoles() {
  Key k = of("roles", K::TextMap,
             "group name → role (viewer, operator or admin), like { ductus-operators: operator }; "
             "groups are compared without case")
              .req();
  k.choices = {"viewer", "operator", "admin"};
  return k;
}
Key certificateName(std::string_view name, std::string_view meaning) { return text(name, meaning); }

std::vector<Key> sftpServerKeys() {
  return {
      host("host", "the SFTP server").req().subst(),
      whole("port", 1, 65535, "its SSH port").def("22"),
      text("user", "the user to sign in as").req().subst(),
      text("password", "the password (give private_key:, password:, or both)").subst(),
      text("private_key",
           "the key to sign in with: a file (relative to the project) or an inline PEM, such as "
           "${secret:sftp-key}")
          .subst(),
      of("host_key", K::TextOrList,
         "the server's key(s) as `ssh-keyscan` prints them without the host: \"ssh-ed25519 "
         "AAAA...\" (give host_key: or known_hosts:)"),
      text("known_hosts", "an OpenSSH known_hosts file that holds the server's key"),
  };
}

std::vector<Key> selectionKeys() {
  return {
      text("path", "the folder read (local ones relative to the project)").req(),
      text("pattern", "which files: a glob on the file name").def("*"),
      choice("split", {"records", "none"},
             "none: a file is one message; records: each record (an HL7 message, a line) is one")
          .def("none"),
      text("move_to", "where a read file goes (give move_to: or delete: true)"),
      flag("delete", "true: a read file is deleted (give move_to: or delete: true)").def("false"),
      duration("poll", 100 * kMs, 60 * kMinute, "how often the folder is listed").def("5s"),
  };
}

std::vector<Key> join(std::vector<Key> a, const std::vector<Key>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<Section> makeSections() {
  std::vector<Section> s;
  // ---- ductus.yaml ----------------------------------------------------
  s.push_back(Section{
      S::Engine,
      "ductus.yaml",
      "",
      "The engine's settings, at the top of the project folder.",
      {
          mapping("database", S::Database,
                  "the PostgreSQL URL (postgresql://user@host/db; a multi-host URL for failover), "
                  "or { url, ca }. Absent: `run` takes --database or DUCTUS_DATABASE_URL, `dev` "
                  "makes its own")
              .subst()
              .or_(K::Text),
          mapping("api", S::Api, "the REST API and web console"),
          mapping("isolates", S::Isolates, "the shared group of script workers"),
          choice("retention", {"1w", "3w", "7w"},
                 "how long messages are kept: each interface's default")
              .def("7w"),
          size("max_message_size", kKB, kMaxMessageBytesLimit,
               "the largest message an interface accepts: each interface's default")
              .def("64MB"),
          mapping("secrets", S::Secrets, "where the key of secrets/<env>.json is"),
          mapping("limits", S::Limits,
                  "what one peer may hold of the engine, per MLLP listener and HTTP port"),
          mapping("audit", S::Audit, "the audit log"),
          mapping("events", S::Events, "the engine's events table (the console's Events page)"),
          mapping("alerts", S::Alerts, "alerts: who is told of what, and how"),
          mapping("auth", S::Auth, "sign-in through a directory or a single sign-on provider"),
      },
      {{"doctor", "scheduled certificate and connection checks"},
       {"monitor", "monitoring settings"},
       {"owners", "owners of interfaces"}}});
  // database: written as a mapping.
  s.push_back(Section{S::Database,
                      "ductus.yaml",
                      "database",
                      "The database as a mapping, to verify its server's certificate.",
                      {
                          text("url", "the PostgreSQL URL").req().subst(),
                          certificateName("ca",
                                          "a certificates: entry (resources.yaml) the server's "
                                          "certificate is verified against (verify-full)")
                              .req(),
                      }});
  {
    Key listen =
        address("listen", "where the API and console listen, or off. --api-listen overrides it")
            .def("127.0.0.1:7700");
    listen.choices = {"off"};
    s.push_back(Section{S::Api,
                        "ductus.yaml",
                        "api",
                        "The REST API and the web console.",
                        {listen, listenerTls(), allowList()}});
  }
  s.push_back(Section{
      S::ListenerTls,
      "ductus.yaml, interface.yaml",
      "tls (of a listener)",
      "TLS on a listener: an MLLP or HTTP source, or the API.",
      {
          certificateName("certificate", "the certificates: entry (resources.yaml) served").req(),
          mapping("clients", S::ClientCertificates,
                  "client certificates: required, verified against a CA, and optionally limited "
                  "to subjects"),
      }});
  s.push_back(Section{
      S::ClientCertificates,
      "ductus.yaml, interface.yaml",
      "tls.clients",
      "Client certificates a listener requires.",
      {
          certificateName("ca", "the certificates: entry whose CA signs the clients' certificates")
              .req(),
          of("subjects", K::TextList,
             "the subjects allowed: \"CN=lab-analyzer\", \"O=Hospital,OU=Lab\" or a DNS name; "
             "absent: any certificate the CA signed"),
      }});
  s.push_back(Section{S::Auth,
                      "ductus.yaml",
                      "auth",
                      "Sign-in besides the engine's own users.",
                      {
                          mapping("ldap", S::Ldap,
                                  "sign-in with a directory's passwords (LDAP, "
                                  "Active Directory), roles from its groups"),
                          mapping("oidc", S::Oidc, "the console's single sign-on (OpenID Connect)"),
                      }});
  s.push_back(Section{
      S::Ldap,
      "ductus.yaml",
      "auth.ldap",
      "Directory sign-in.",
      {
          text("url",
               "one server: ldaps://host[:port], or ldap:// (with start_tls: true, or to "
               "this machine only)")
              .req()
              .subst(),
          flag("start_tls", "upgrade an ldap:// connection to TLS before anything is sent")
              .def("false"),
          certificateName("ca",
                          "a certificates: entry to verify the server with; absent: the "
                          "system's roots"),
          mapping("bind", S::LdapBind, "the account searches run as; absent: anonymous"),
          mapping("users", S::LdapUsers, "where people are").req(),
          mapping("groups", S::LdapGroups, "where groups are, and each group's role").req(),
          duration("refresh", kSecond, kDay,
                   "how often signed-in directory users are looked up again (a user who left "
                   "loses access)")
              .def("15m"),
          duration("timeout", 100 * kMs, 2 * kMinute, "one directory request's limit").def("10s"),
      }});
  s.push_back(Section{S::LdapBind,
                      "ductus.yaml",
                      "auth.ldap.bind",
                      "The directory account the engine searches as.",
                      {
                          text("dn", "its distinguished name").req().subst(),
                          text("password", "its password, e.g. ${secret:ldap-bind}").req().subst(),
                      }});
  s.push_back(Section{S::LdapUsers,
                      "ductus.yaml",
                      "auth.ldap.users",
                      "Where people are.",
                      {
                          text("base", "the subtree searched").req(),
                          text("filter",
                               "the filter finding one person; {name} is the name "
                               "signed in with")
                              .def("(uid={name})"),
                      }});
  s.push_back(Section{
      S::LdapGroups,
      "ductus.yaml",
      "auth.ldap.groups",
      "Where groups are; a role comes only from a group.",
      {
          text("base", "the subtree searched").req(),
          text("filter", "the filter finding a person's groups; {dn} and {name} are the person's")
              .def("(|(member={dn})(uniqueMember={dn})(memberUid={name}))"),
          groupRoles(),
      }});
  s.push_back(Section{
      S::Oidc,
      "ductus.yaml",
      "auth.oidc",
      "The console's single sign-on (OpenID Connect).",
      {
          text("issuer", "the provider's issuer URL (https://; http:// only to this machine)")
              .req()
              .subst(),
          text("client_id", "the engine's client id at the provider").req().subst(),
          text("client_secret", "its secret, e.g. ${secret:oidc}; absent: a public client (PKCE)")
              .subst(),
          text("redirect_uri",
               "the engine's own URL ending in /api/v1/auth/oidc/callback, as registered")
              .req()
              .subst(),
          text("label", "the console's button: \"Sign in with <label>\"").def("single sign-on"),
          of("scopes", K::TextList, "the scopes asked for; must hold openid")
              .def("[openid, profile, email]"),
          text("name_claim", "the ID token's claim that names the user").def("preferred_username"),
          text("groups_claim", "the claim listing the user's groups").def("groups"),
          groupRoles(),
          certificateName("ca",
                          "a certificates: entry to verify the provider with; absent: "
                          "the system's roots"),
          duration("timeout", 100 * kMs, 2 * kMinute, "one request to the provider's limit")
              .def("10s"),
      }});
  s.push_back(Section{
      S::Isolates,
      "ductus.yaml",
      "isolates",
      "The shared group of script workers.",
      {
          whole("workers", 1, 256, "worker processes of the shared group").def("one per core"),
          whole("heap_mb", 16, 16384, "each worker's V8 heap limit, in MB").def("512"),
      }});
  s.push_back(Section{
      S::Limits,
      "ductus.yaml",
      "limits",
      "What one peer may hold of the engine: each MLLP listener and HTTP port counts its own.",
      {
          whole("connections_per_listener", 1, 1'000'000,
                "open connections; past it the longest idle one (or the new one) is closed")
              .def("1000"),
          whole("connections_per_address", 1, 1'000'000,
                "open connections from one address; past it a new one is closed at once")
              .def("a quarter of connections_per_listener"),
          duration("idle_timeout", kSecond, kDay,
                   "a connection with nothing in flight and nothing partial is closed after this")
              .def("5m"),
          duration("frame_deadline", kSecond, kHour,
                   "a request must be complete this long after its first byte")
              .def("60s"),
          size("unread_answers", kKB, kGB,
               "answers the peer has not read; past it the engine stops reading from it")
              .def("1MB"),
      }});
  {
    Key keep{"keep", K::Period,
             "audit rows older than this are deleted (hourly, in batches): 6y, or a duration"};
    keep.min = kYear;
    keep.max = 100 * kYear;
    s.push_back(Section{S::Audit, "ductus.yaml", "audit", "The audit log.", {keep.def("6y")}});
  }
  s.push_back(Section{
      S::Events,
      "ductus.yaml",
      "events",
      "The engine's events table: refusals, retries given up, restarts, alerts; kept within both "
      "bounds.",
      {
          duration("keep", kHour, 365 * kDay,
                   "events older than this are deleted (an hour at least: the console looks back "
                   "a day)")
              .def("30d"),
          whole("max_rows", 1'000, 10'000'000, "at most this many events are kept").def("100000"),
      }});
  s.push_back(Section{S::Secrets,
                      "ductus.yaml",
                      "secrets",
                      "Where the key that opens secrets/<env>.json is.",
                      {
                          text("key_file",
                               "a file holding the key (relative to the project); "
                               "absent: DUCTUS_SECRETS_KEY")
                              .req(),
                      }});
  s.push_back(Section{
      S::Alerts,
      "ductus.yaml",
      "alerts",
      "Alerts: present, the monitor's states are told.",
      {
          mapping("smtp", S::Smtp, "the mail server e-mail channels send through"),
          named("channels", S::Channel, "where alerts go: e-mail addresses, a webhook, or both"),
          list("rules", S::Rule,
               "which states alert, how severe, and who is told; the first rule naming a state "
               "applies"),
          mapping("heartbeat", S::Heartbeat, "a GET to an outside monitor while the engine serves"),
          mapping("quiet_hours", S::QuietHours, "a window when lesser alerts wait"),
          duration("remind", 15 * kSecond, 7 * kDay,
                   "an unacknowledged alert is sent again after this")
              .def("1h"),
          duration("settle", 0, kDay, "an alert recovers after its state has been good this long")
              .def("2m"),
          duration("keep", kDay, 3660 * kDay, "how long alerts' history is kept").def("365d"),
          mapping("certificates", S::AlertCertificates, "when an expiring certificate alerts"),
      }});
  s.push_back(
      Section{S::Smtp,
              "ductus.yaml",
              "alerts.smtp",
              "The mail server.",
              {
                  text("host", "its host").req().subst(),
                  whole("port", 1, 65535, "its port").def("587 (465 with tls: tls)"),
                  text("from", "the sender address, like ductus@hospital.org").req().subst(),
                  text("user", "the user to sign in as (with password:)").subst(),
                  text("password", "its password, e.g. ${secret:smtp}").subst(),
                  choice("tls", {"starttls", "required", "tls", "off"},
                         "starttls: when offered (required with a user); required: refuse a server "
                         "without it; tls: TLS from the first byte; off: plain (test servers)")
                      .def("starttls"),
                  certificateName("ca",
                                  "a certificates: entry to verify the server with; absent: the "
                                  "system's roots"),
              }});
  s.push_back(
      Section{S::Channel,
              "ductus.yaml",
              "alerts.channels.<name>",
              "One channel: e-mail addresses, a webhook, or both.",
              {
                  of("email", K::TextOrList, "addresses, like oncall@hospital.org"),
                  text("webhook", "a URL alerts are POSTed to (http:// or https://)").subst(),
                  choice("format", {"json", "slack", "teams"}, "the webhook's body").def("json"),
              }});
  {
    Key when = of("when", K::TextList,
                  "the states: stopped, paused, stalled, error, behind, intake_stopped, late, "
                  "quiet, expiring")
                   .req();
    when.choices = {"stopped",        "paused", "stalled", "error",   "behind",
                    "intake_stopped", "late",   "quiet",   "expiring"};
    s.push_back(Section{
        S::Rule,
        "ductus.yaml",
        "alerts.rules[]",
        "One rule.",
        {
            when,
            choice("severity", {"info", "warning", "critical"}, "how severe").def("warning"),
            of("notify", K::TextOrList, "the channels told (names under alerts.channels)"),
        }});
  }
  s.push_back(Section{S::Heartbeat,
                      "ductus.yaml",
                      "alerts.heartbeat",
                      "A GET while the engine serves, so an outside monitor notices it is gone.",
                      {
                          text("url", "the URL (http:// or https://)").req().subst(),
                          duration("every", 10 * kSecond, kDay, "how often").def("60s"),
                      }});
  {
    Key hold =
        of("hold", K::TextList, "the severities held until the window ends").def("[info, warning]");
    hold.choices = {"info", "warning", "critical"};
    s.push_back(Section{
        S::QuietHours,
        "ductus.yaml",
        "alerts.quiet_hours",
        "A part of the day when lesser alerts wait (a recovery meanwhile cancels them).",
        {text("between",
              "\"HH:MM-HH:MM\", e.g. \"22:00-07:00\" (past midnight runs into the next day)")
             .req(),
         hold}});
  }
  {
    Key days = of("warn_days", K::WholeList,
                  "days before a certificate's expiry when it alerts, descending")
                   .def("[30, 14, 7]");
    days.min = 1;
    days.max = 3650;
    s.push_back(Section{S::AlertCertificates,
                        "ductus.yaml",
                        "alerts.certificates",
                        "When an expiring certificate alerts.",
                        {days}});
  }
  // ---- resources.yaml -------------------------------------------------
  s.push_back(
      Section{S::Resources,
              "resources.yaml",
              "",
              "What interfaces' code and destinations use by name: databases, APIs, certificates.",
              {
                  named("databases", S::DatabaseResource, "databases scripts use: db(\"name\")"),
                  named("apis", S::ApiResource,
                        "HTTP APIs scripts use (api(\"name\")) and destinations "
                        "name (http: { api: name })"),
                  named("certificates", S::Certificate,
                        "certificates and CAs for TLS, named by tls:, ca: and certificate: keys"),
              },
              {{"ldap", "directory connections"}, {"sftp", "named SFTP servers"}}});
  s.push_back(Section{
      S::DatabaseResource,
      "resources.yaml",
      "databases.<name>",
      "A database scripts use.",
      {
          choice("kind", {"postgresql", "sqlserver"}, "which server").def("postgresql"),
          text("url", "postgresql://user@host/db, or sqlserver://user:password@host[:port]/db")
              .req()
              .subst(),
          whole("max_connections", 1, 1000, "connections the engine opens to it").def("10"),
          certificateName("ca", "a certificates: entry the server is verified against"),
          flag("trust_server_certificate",
               "sqlserver only: TLS without verifying the server (not with ca:)")
              .def("false"),
      }});
  s.push_back(Section{
      S::ApiResource,
      "resources.yaml",
      "apis.<name>",
      "An HTTP API.",
      {
          text("url", "its base URL (http:// or https://)").req().subst(),
          of("headers", K::TextMap, "headers sent with every request (tokens: ${secret:...})")
              .subst(),
          duration("timeout", 10 * kMs, 10 * kMinute, "one request's limit").def("30s"),
          certificateName("ca", "a certificates: entry to verify the server with"),
          certificateName("certificate", "a certificates: entry presented as the client's"),
      }});
  s.push_back(Section{
      S::Certificate,
      "resources.yaml",
      "certificates.<name>",
      "A certificate and its key, a CA, or both; as files or inline PEM.",
      {
          text("cert_file", "the certificate chain's PEM file (relative to the project)").subst(),
          text("key_file", "its private key's PEM file").subst(),
          text("cert", "the certificate chain as PEM text, e.g. ${secret:server-cert}").subst(),
          text("key", "the private key as PEM text").subst(),
          text("ca_file", "a CA's PEM file").subst(),
          text("ca", "a CA as PEM text").subst(),
      }});
  // ---- interface.yaml -------------------------------------------------
  s.push_back(Section{
      S::Interface,
      "interface.yaml",
      "",
      "One interface: interfaces/<name>/interface.yaml, beside its code.",
      {
          mapping("source", S::Source, "where messages come from").req(),
          choice("format", {"hl7v2", "json", "text", "csv", "xml"}, "what the messages are")
              .def("hl7v2"),
          choice("charset", {"auto", "utf-8", "iso-8859-1"},
                 "how the bytes become text; auto follows MSH-18, then the bytes")
              .def("auto"),
          mapping("ordering", S::Ordering, "delivery in order per key, in lanes"),
          mapping("dedupe", S::Dedupe, "messages whose key was seen are taken as duplicates"),
          choice("durability", {"strict", "relaxed"},
                 "strict: a message is on disk before it is acknowledged; relaxed: committed "
                 "without waiting for the flush")
              .def("strict"),
          duration("timeout", static_cast<uint64_t>(kMinTimeout.count()),
                   static_cast<uint64_t>(kMaxTimeout.count()), "one script call's limit")
              .def("5s"),
          choice("isolation", {"shared", "dedicated"},
                 "shared: the engine's worker group; dedicated: a group of its own")
              .def("shared"),
          whole("workers", 1, 64, "isolation: dedicated: its worker processes and delivery slots")
              .def("1"),
          choice("retention", {"1w", "3w", "7w"}, "how long its messages are kept")
              .def("ductus.yaml's retention"),
          choice("quarantined", {"keep", "purge"},
                 "at the end of retention: keep moves quarantined messages to the held area, "
                 "purge lets them go")
              .def("keep"),
          size("max_message_size", kKB, kMaxMessageBytesLimit, "the largest message accepted")
              .def("ductus.yaml's max_message_size"),
          text("code", "its module, a .js file in the interface's folder").def("transform.js"),
          text("respond", "respond mode: the exported function that answers").def("transform"),
          wholeMap("dedicated_pools", 1, 100,
                   "isolation: dedicated: database resource → the connections it has of its own"),
          mapping("destination", S::Destination, "its one destination (named default)"),
          named("destinations", S::Destination, "its destinations, by name"),
          mapping("monitor", S::Monitor, "what the monitor expects of it"),
      },
      {{"owners", "owners of an interface"},
       {"owner", "owners of an interface"},
       {"alerts", "per-interface alert rules"},
       {"description", "interface descriptions"}}});
  s.push_back(Section{
      S::Source,
      "interface.yaml",
      "source",
      "Where messages come from: exactly one kind.",
      {
          mapping("mllp", S::MllpSource, "HL7 v2 over MLLP; each message acknowledged once stored"),
          mapping("http", S::HttpSource, "HTTP requests: queued, or answered by the script"),
          mapping("file", S::FileSource, "files in a local folder"),
          mapping("sftp", S::SftpSource, "files on an SFTP server"),
          mapping("schedule", S::ScheduleSource, "a run on a schedule (the script fetches)"),
          mapping("internal", S::InternalSource, "messages routed from other interfaces"),
      },
      {},
      {"mllp", "http", "file", "sftp", "schedule", "internal"}});
  s.push_back(
      Section{S::MllpSource,
              "interface.yaml",
              "source.mllp",
              "An MLLP listener.",
              {address("listen", "host:port to listen on").req(), listenerTls(), allowList()}});
  s.push_back(
      Section{S::HttpSource,
              "interface.yaml",
              "source.http",
              "An HTTP endpoint (interfaces on one port share its server).",
              {
                  address("listen", "host:port to listen on").req(),
                  text("path", "the endpoint's path, starting with /").def("/"),
                  choice("mode", {"queue", "respond"},
                         "queue: stored, then 202; respond: the script's answer is the response")
                      .def("queue"),
                  listenerTls(),
                  allowList(),
              }});
  s.push_back(Section{S::FileSource,
                      "interface.yaml",
                      "source.file",
                      "A local folder.",
                      selectionKeys(),
                      {{"marker", "ready-marker files"}}});
  s.push_back(Section{S::SftpSource,
                      "interface.yaml",
                      "source.sftp",
                      "A folder on an SFTP server.",
                      join(sftpServerKeys(), selectionKeys()),
                      {{"marker", "ready-marker files"}}});
  s.push_back(Section{S::ScheduleSource,
                      "interface.yaml",
                      "source.schedule",
                      "A run on a schedule: give every: or cron:.",
                      {
                          duration("every", kSecond, 31 * kDay, "the time between runs"),
                          text("cron", "5 cron fields, the server's local time: \"0 6 * * 1-5\""),
                      },
                      {},
                      {"every", "cron"}});
  s.push_back(Section{S::InternalSource,
                      "interface.yaml",
                      "source.internal",
                      "Messages routed here by other interfaces' `interface:` destinations; no "
                      "keys.",
                      {}});
  s.push_back(Section{
      S::Ordering,
      "interface.yaml",
      "ordering",
      "Delivery in order per key.",
      {
          text("key", "the field whose value orders messages, e.g. PID.3.1").req(),
          whole("partitions", 1, kMaxPartitions, "lanes: keys are spread over them").def("16"),
      }});
  s.push_back(Section{
      S::Dedupe,
      "interface.yaml",
      "dedupe",
      "Duplicates by key.",
      {
          text("key", "the field whose value names a message, e.g. MSH.10").req(),
          duration("window", static_cast<uint64_t>(kMinDedupeWindow.count()),
                   static_cast<uint64_t>(kMaxDedupeWindow.count()), "how long a key is remembered")
              .def("the retention's days"),
      }});
  s.push_back(
      Section{S::Destination,
              "interface.yaml",
              "destination, destinations.<name>",
              "Where messages go: exactly one kind, and how they get there.",
              {
                  mapping("mllp", S::MllpTarget, "an MLLP receiver"),
                  mapping("http", S::HttpTarget, "an HTTP endpoint"),
                  mapping("file", S::FileTarget, "a local folder"),
                  mapping("sftp", S::SftpTarget, "a folder on an SFTP server"),
                  text("interface", "another interface (its source internal:): a route"),
                  text("transform", "the exported function that makes this destination's output")
                      .def("transform"),
                  choice("output", {"hl7v2", "json", "text", "csv", "xml"}, "what the output is")
                      .def("the interface's format"),
                  mapping("retry", S::Retry, "how often a transient failure is tried again"),
                  mapping("rate_limit", S::RateLimit, "at most so many messages per period"),
                  flag("save_output", "keep each output beside its message").def("false"),
                  mapping("monitor", S::DestinationMonitor, "its own monitor: { behind: }"),
              },
              {{"tls", "TLS on outbound connections"}, {"batch", "batched deliveries"}},
              {"mllp", "http", "file", "sftp", "interface"}});
  s.push_back(
      Section{S::MllpTarget,
              "interface.yaml",
              "destination.mllp",
              "An MLLP receiver.",
              {
                  host("host", "the receiver").req().subst(),
                  whole("port", 1, 65535, "its port").req(),
                  duration("ack_timeout", 100 * kMs, 10 * kMinute, "how long an ACK is waited for")
                      .def("30s"),
                  mapping("tls", S::ConnectTls, "TLS: true, or { ca, certificate }")
                      .or_(K::Flag)
                      .def("false"),
              }});
  s.push_back(
      Section{S::ConnectTls,
              "interface.yaml",
              "destination.mllp.tls",
              "TLS to a receiver.",
              {
                  certificateName("ca",
                                  "a certificates: entry to verify the receiver with; absent: the "
                                  "system's roots"),
                  certificateName("certificate", "a certificates: entry presented as the client's"),
              }});
  s.push_back(Section{
      S::HttpTarget,
      "interface.yaml",
      "destination.http",
      "An HTTP endpoint: give url: or api:.",
      {
          text("url", "the URL (http:// or https://)").subst(),
          text("api", "an apis: entry of resources.yaml"),
          text("path", "with api:, the path under its URL"),
          choice("method", {"POST", "PUT", "PATCH"}, "the request's method").def("POST"),
          of("headers", K::TextMap, "headers sent (tokens: ${secret:...})").subst(),
          duration("timeout", 100 * kMs, 10 * kMinute, "one request's limit").def("30s"),
          certificateName("ca", "with url:, a certificates: entry to verify the server with"),
          certificateName("certificate",
                          "with url:, a certificates: entry presented as the "
                          "client's"),
      },
      {},
      {"url", "api"}});
  s.push_back(Section{S::FileTarget,
                      "interface.yaml",
                      "destination.file",
                      "A local folder.",
                      {
                          text("path", "the folder (relative to the project)").req(),
                          text("name", "each file's name; placeholders such as {id}").def("{id}"),
                          text("mode", "the files' permissions, octal: \"0640\"").def("0640"),
                          choice("sync", {"group", "each", "none"},
                                 "how a write is made durable before it counts as sent")
                              .def("group"),
                          choice("publish", {"link", "rename"},
                                 "how a finished file gets its name: link (written unnamed, "
                                 "then linked; a folder watcher sees IN_CREATE) or rename "
                                 "(written under a hidden dot-name, then renamed; IN_MOVED_TO)")
                              .def("link"),
                      }});
  s.push_back(
      Section{S::SftpTarget, "interface.yaml", "destination.sftp", "A folder on an SFTP server.",
              join(sftpServerKeys(),
                   {
                       text("path", "the folder on the server").req(),
                       text("name", "each file's name; placeholders such as {id}").def("{id}"),
                       text("mode", "the files' permissions, octal: \"0640\"").def("0640"),
                   })});
  s.push_back(Section{
      S::Retry,
      "interface.yaml",
      "destination.retry",
      "How often a transient failure is tried again.",
      {whole("max_attempts", 0, 1'000'000, "then the message is quarantined; 0: forever").def("0")},
      {{"backoff", "custom back-off"}}});
  s.push_back(
      Section{S::RateLimit,
              "interface.yaml",
              "destination.rate_limit",
              "At most so many messages per period.",
              {
                  whole("messages", 1, 1'000'000, "messages allowed per period").req(),
                  duration("per", 100 * kMs, kDay, "the period").def("1s"),
                  choice("over", {"wait", "drop"}, "the excess waits, or is filtered").def("wait"),
              }});
  {
    Key activeWithin = mapping("active_within", S::ActiveWithin,
                               "something must be received within every so long: 30m, or "
                               "{ within, between }")
                           .or_(K::Duration);
    activeWithin.min = kMinute;
    activeWithin.max = 30 * kDay;
    s.push_back(Section{
        S::Monitor,
        "interface.yaml",
        "monitor",
        "What the monitor expects of an interface.",
        {
            mapping("behind", S::Behind,
                    "each destination is behind past these (unless it sets "
                    "its own)"),
            activeWithin,
            mapping("active_by", S::ActiveBy, "something must have arrived by a time of day"),
        }});
  }
  s.push_back(Section{S::DestinationMonitor,
                      "interface.yaml",
                      "destination.monitor",
                      "A destination's own expectation.",
                      {mapping("behind", S::Behind, "behind past these")}});
  s.push_back(
      Section{S::Behind,
              "interface.yaml",
              "monitor.behind",
              "Behind: give waiting:, oldest:, or both.",
              {
                  whole("waiting", 1, 100'000'000, "more messages than this wait"),
                  duration("oldest", kSecond, 30 * kDay, "the oldest has waited longer than this"),
              }});
  s.push_back(Section{
      S::ActiveWithin,
      "interface.yaml",
      "monitor.active_within",
      "Activity expected.",
      {
          duration("within", kMinute, 30 * kDay, "something received within every so long").req(),
          text("between", "counted only inside \"HH:MM-HH:MM\""),
      }});
  s.push_back(Section{S::ActiveBy,
                      "interface.yaml",
                      "monitor.active_by",
                      "Something must have arrived by a deadline: give daily:, weekly: or cron:.",
                      {
                          text("daily", "\"HH:MM\" each day"),
                          text("weekly", "\"mon 06:00\""),
                          text("cron", "5 cron fields"),
                          text("from", "\"HH:MM\": the window starts here, not at midnight"),
                      },
                      {},
                      {"daily", "weekly", "cron"}});
  // Every id has its section, in order.
  for (size_t i = 0; i < s.size(); ++i)
    if (static_cast<size_t>(s[i].id) != i) {
      std::fprintf(stderr, "ductus: the project format's table is out of order at %zu\n", i);
      std::abort();
    }
  if (s.size() != static_cast<size_t>(SectionId::Count)) {
    std::fprintf(stderr, "ductus: the project format's table misses a section\n");
    std::abort();
  }
  return s;
}

}  // namespace

const std::vector<Section>& allSections() {
  static const std::vector<Section> sections = makeSections();
  return sections;
}

const Section& section(SectionId id) { return allSections()[static_cast<size_t>(id)]; }

std::string_view sectionName(SectionId id) {
  static constexpr std::string_view kNames[] = {"Engine",
                                                "Database",
                                                "Api",
                                                "ListenerTls",
                                                "ClientCertificates",
                                                "Auth",
                                                "Ldap",
                                                "LdapBind",
                                                "LdapUsers",
                                                "LdapGroups",
                                                "Oidc",
                                                "Isolates",
                                                "Limits",
                                                "Audit",
                                                "Events",
                                                "Secrets",
                                                "Alerts",
                                                "Smtp",
                                                "Channel",
                                                "Rule",
                                                "Heartbeat",
                                                "QuietHours",
                                                "AlertCertificates",
                                                "Resources",
                                                "DatabaseResource",
                                                "ApiResource",
                                                "Certificate",
                                                "Interface",
                                                "Source",
                                                "MllpSource",
                                                "HttpSource",
                                                "FileSource",
                                                "SftpSource",
                                                "ScheduleSource",
                                                "InternalSource",
                                                "Ordering",
                                                "Dedupe",
                                                "Destination",
                                                "MllpTarget",
                                                "ConnectTls",
                                                "HttpTarget",
                                                "FileTarget",
                                                "SftpTarget",
                                                "Retry",
                                                "RateLimit",
                                                "Monitor",
                                                "DestinationMonitor",
                                                "Behind",
                                                "ActiveWithin",
                                                "ActiveBy"};
  static_assert(std::size(kNames) == static_cast<size_t>(SectionId::Count),
                "a name for every section");
  return kNames[static_cast<size_t>(id)];
}

const std::vector<FileFormat>& projectFiles() {
  static const std::vector<FileFormat> files = {
      {"ductus.yaml", "ductus", "ductus.yaml: the engine's settings", SectionId::Engine},
      {"resources.yaml", "resources", "resources.yaml: databases, APIs and certificates",
       SectionId::Resources},
      {"interface.yaml", "interface", "interfaces/<name>/interface.yaml: one interface",
       SectionId::Interface},
  };
  return files;
}

}  // namespace ductus::config
