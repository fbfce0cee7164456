// ductus.yaml and resources.yaml.
#include "common/config/project_files.h"

#include <algorithm>
#include <cctype>

#include "common/config/address.h"
#include "common/config/sqlserver_url.h"

namespace ductus::config {
namespace {

// groups: roles: { group: role } as both auth: sections write it; keys in
// lower case (groups are compared without case).
std::map<std::string, std::string> parseGroupRoles(YamlReader& r, const YAML::Node& parent,
                                                   const std::string& path) {
  std::map<std::string, std::string> out;
  YAML::Node roles = parent["roles"];
  if (!YamlReader::has(parent, "roles") || !roles.IsMap() || roles.size() == 0) {
    r.error(YamlReader::has(parent, "roles") ? roles : parent, path + ".roles",
            "expected a mapping of group names to roles, like { ductus-operators: operator }");
    return out;
  }
  for (auto it = roles.begin(); it != roles.end(); ++it) {
    std::string group = it->first.IsScalar() ? it->first.Scalar() : "";
    std::string role = it->second.IsScalar() ? it->second.Scalar() : "";
    if (group.empty()) {
      r.error(it->first, path + ".roles", "a group's name");
      continue;
    }
    if (role != "viewer" && role != "operator" && role != "admin") {
      r.error(it->second, path + ".roles." + group,
              "expected viewer, operator or admin, got `" + role + "`");
      continue;
    }
    std::string key = group;
    std::transform(key.begin(), key.end(), key.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    if (!out.emplace(key, role).second)
      r.error(it->first, path + ".roles", "`" + group + "` is named twice");
  }
  return out;
}

// {name} (and in groups' filter {dn}) must be where the filter says; the
// filter as a whole within parentheses, as RFC 4515 writes one.
void checkFilter(YamlReader& r, const YAML::Node& n, const std::string& path,
                 const std::string& filter, bool needsName) {
  if (filter.size() < 2 || filter.front() != '(' || filter.back() != ')')
    return r.error(n, path, "an LDAP filter is written in parentheses, like (uid={name})");
  int depth = 0;
  for (char c : filter) {
    depth += c == '(' ? 1 : c == ')' ? -1 : 0;
    if (depth < 0) break;
  }
  if (depth != 0) return r.error(n, path, "the parentheses of `" + filter + "` don't pair up");
  if (needsName && filter.find("{name}") == std::string::npos)
    r.error(n, path, "the filter must hold {name}, where the name signed in with goes");
}

// auth: { ldap: { url, start_tls, ca, bind: { dn, password }, users: { base,
// filter }, groups: { base, filter, roles }, refresh, timeout } }
ldap::DirectorySettings parseLdap(YamlReader& r, const YAML::Node& n) {
  const std::string path = "auth.ldap";
  ldap::DirectorySettings s;
  const Section& sec = section(SectionId::Ldap);
  if (!r.map(n, path, sec)) return s;
  s.at = r.file() + ":" + std::to_string(r.at(n).line);
  if (auto v = r.required(n, "url", path, Subst::Yes)) {
    bool ldaps = v->rfind("ldaps://", 0) == 0;
    if (!ldaps && v->rfind("ldap://", 0) != 0)
      r.error(n["url"], path + ".url",
              "expected ldap://host[:port] or ldaps://host[:port], not `" + *v + "`");
    else if (v->find_first_of(" ,") != std::string::npos || v->size() <= (ldaps ? 8u : 7u))
      r.error(n["url"], path + ".url", "one server, like ldaps://dc1.hospital.org");
    else
      s.url = *v;
    s.tls.enabled = ldaps;
  }
  if (auto v = r.flag(n, "start_tls", path)) {
    s.startTls = *v;
    if (*v && s.tls.enabled)
      r.error(n["start_tls"], path + ".start_tls",
              "ldaps:// is TLS from the first byte; start_tls: is for ldap:// only");
    if (*v) s.tls.enabled = true;
  }
  if (auto v = r.text(n, "ca", path)) {
    s.tls.ca = *v;
    s.tls.at = r.file() + ":" + std::to_string(r.keyAt(n, "ca").line);
    if (!s.tls.enabled && !s.url.empty())
      r.error(n["ca"], path + ".ca",
              "ca: verifies a TLS server: use ldaps:// or start_tls: true with it");
  }
  if (YamlReader::has(n, "bind")) {
    YAML::Node b = n["bind"];
    if (r.map(b, path + ".bind", section(SectionId::LdapBind))) {
      if (auto v = r.required(b, "dn", path + ".bind", Subst::Yes)) s.bindDn = *v;
      if (auto v = r.required(b, "password", path + ".bind", Subst::Yes)) s.bindPassword = *v;
    }
  }
  if (!YamlReader::has(n, "users")) {
    r.error(n, path, "users: { base: ..., filter: \"(uid={name})\" } is needed: where people are");
  } else {
    YAML::Node u = n["users"];
    if (r.map(u, path + ".users", section(SectionId::LdapUsers))) {
      if (auto v = r.required(u, "base", path + ".users")) s.usersBase = *v;
      if (auto v = r.text(u, "filter", path + ".users")) {
        s.usersFilter = *v;
        checkFilter(r, u["filter"], path + ".users.filter", *v, true);
      }
    }
  }
  if (!YamlReader::has(n, "groups")) {
    r.error(n, path,
            "groups: { base: ..., roles: { ductus-operators: operator } } is needed: a role "
            "comes only from a group");
  } else {
    YAML::Node g = n["groups"];
    std::string gp = path + ".groups";
    if (r.map(g, gp, section(SectionId::LdapGroups))) {
      if (auto v = r.required(g, "base", gp)) s.groupsBase = *v;
      if (auto v = r.text(g, "filter", gp)) {
        s.groupsFilter = *v;
        checkFilter(r, g["filter"], gp + ".filter", *v, false);
      }
      s.roles = parseGroupRoles(r, g, gp);
    }
  }
  // A plain ldap:// connection carries every password in clear: only to
  // this machine.
  if (!s.url.empty() && !s.tls.enabled) {
    std::string host = s.url.substr(7);
    host = host.substr(0, host.find_first_of(":/"));
    if (host != "127.0.0.1" && host != "localhost" && host != "[::1]")
      r.error(n["url"], path + ".url",
              "ldap:// without start_tls: true would send every password in clear: use "
              "ldaps://, or start_tls: true (ldap:// alone only to this machine)");
  }
  if (auto v = r.duration(n, sec, "refresh", path))
    s.refresh = std::chrono::duration_cast<std::chrono::milliseconds>(*v);
  if (auto v = r.duration(n, sec, "timeout", path))
    s.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(*v);
  return s;
}

// auth: { oidc: { issuer, client_id, client_secret, redirect_uri, label,
// scopes, name_claim, groups_claim, roles, ca, timeout } }
oidc::ProviderSettings parseOidc(YamlReader& r, const YAML::Node& n) {
  const std::string path = "auth.oidc";
  oidc::ProviderSettings s;
  const Section& sec = section(SectionId::Oidc);
  if (!r.map(n, path, sec)) return s;
  s.at = r.file() + ":" + std::to_string(r.at(n).line);
  if (auto v = r.required(n, "issuer", path, Subst::Yes)) {
    if (!oidc::secureOrLoopback(*v))
      r.error(n["issuer"], path + ".issuer",
              "expected an https:// URL (http:// only to this machine), not `" + *v + "`");
    else
      s.issuer = *v;
  }
  if (auto v = r.required(n, "client_id", path, Subst::Yes)) s.clientId = *v;
  if (auto v = r.text(n, "client_secret", path, Subst::Yes)) s.clientSecret = *v;
  if (auto v = r.required(n, "redirect_uri", path, Subst::Yes)) {
    if (!oidc::secureOrLoopback(*v) || v->find("/api/v1/auth/oidc/callback") == std::string::npos)
      r.error(n["redirect_uri"], path + ".redirect_uri",
              "expected the engine's own https:// URL ending in /api/v1/auth/oidc/callback "
              "(http:// only to this machine), as registered with the provider");
    else
      s.redirectUri = *v;
  }
  if (auto v = r.text(n, "label", path)) s.label = *v;
  if (YamlReader::has(n, "scopes")) {
    YAML::Node sc = n["scopes"];
    if (!sc.IsSequence()) {
      r.error(sc, path + ".scopes", "expected a list, like [openid, profile, groups]");
    } else {
      s.scopes.clear();
      for (const auto& item : sc) s.scopes.push_back(item.IsScalar() ? item.Scalar() : "");
      if (std::find(s.scopes.begin(), s.scopes.end(), "openid") == s.scopes.end())
        r.error(sc, path + ".scopes", "must hold openid: without it there is no ID token");
    }
  }
  if (auto v = r.text(n, "name_claim", path)) s.nameClaim = *v;
  if (auto v = r.text(n, "groups_claim", path)) s.groupsClaim = *v;
  s.roles = parseGroupRoles(r, n, path);
  if (auto v = r.text(n, "ca", path)) {
    s.tls.enabled = true;
    s.tls.ca = *v;
    s.tls.at = r.file() + ":" + std::to_string(r.keyAt(n, "ca").line);
  }
  if (auto v = r.duration(n, sec, "timeout", path))
    s.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(*v);
  return s;
}

}  // namespace

EngineConfig parseEngine(YamlReader& r, const YAML::Node& root,
                         const std::filesystem::path& projectRoot) {
  EngineConfig e;
  const Section& sec = section(SectionId::Engine);
  if (!r.map(root, "", sec)) return e;
  if (YamlReader::has(root, "database") && root["database"].IsMap()) {
    // database: { url: ..., ca: pg-ca }: the server verified (verify-full)
    // against the CA named.
    YAML::Node db = root["database"];
    if (r.map(db, "database", section(SectionId::Database))) {
      if (auto v = r.required(db, "url", "database", Subst::Yes)) e.database = *v;
      if (auto v = r.required(db, "ca", "database")) {
        e.databaseTls.enabled = true;
        e.databaseTls.ca = *v;
        e.databaseTls.at = r.file() + ":" + std::to_string(r.keyAt(db, "ca").line);
      }
    }
  } else if (auto v = r.text(root, "database", "", Subst::Yes)) {
    e.database = *v;
  }

  if (YamlReader::has(root, "api")) {
    YAML::Node api = root["api"];
    if (r.map(api, "api", section(SectionId::Api))) {
      e.apiTls = parseListenerTls(r, api, "api");
      e.apiAllow = parseAllowList(r, api, "api");
      if (YamlReader::raw(api, "listen") == "off") {
        e.apiEnabled = false;
      } else if (YamlReader::has(api, "listen")) {
        e.apiListenAt = r.at(api["listen"]);
        if (auto hp = r.hostPort(api, "listen", "api")) e.apiListen = *hp;
      }
    }
  }
  if (YamlReader::has(root, "auth")) {
    YAML::Node a = root["auth"];
    if (r.map(a, "auth", section(SectionId::Auth))) {
      if (YamlReader::has(a, "ldap")) e.ldap = parseLdap(r, a["ldap"]);
      if (YamlReader::has(a, "oidc")) e.oidc = parseOidc(r, a["oidc"]);
    }
  }
  if (YamlReader::has(root, "alerts")) {
    parseAlerts(r, root["alerts"], e);
    e.alertsAt = r.keyAt(root, "alerts");
  }
  if (YamlReader::has(root, "isolates")) {
    YAML::Node iso = root["isolates"];
    const Section& is = section(SectionId::Isolates);
    if (r.map(iso, "isolates", is)) {
      if (auto v = r.whole(iso, is, "workers", "isolates")) e.isolateWorkers = *v;
      if (auto v = r.whole(iso, is, "heap_mb", "isolates")) e.heapMb = *v;
    }
  }
  if (YamlReader::has(root, "limits")) {
    YAML::Node lim = root["limits"];
    const Section& ls = section(SectionId::Limits);
    if (r.map(lim, "limits", ls)) {
      // Each connection takes a descriptor; the engine's open files limit
      // (raised to the hard limit at start) is the real ceiling.
      if (auto v = r.whole(lim, ls, "connections_per_listener", "limits"))
        e.limits.connectionsPerListener = static_cast<uint32_t>(*v);
      // Not given: a quarter of the listener's, so one host holding idle
      // connections leaves three quarters to the others. At least
      // connections_per_listener turns it off.
      e.limits.connectionsPerAddress = std::max<uint32_t>(1, e.limits.connectionsPerListener / 4);
      if (auto v = r.whole(lim, ls, "connections_per_address", "limits"))
        e.limits.connectionsPerAddress = static_cast<uint32_t>(*v);
      if (auto v = r.duration(lim, ls, "idle_timeout", "limits")) e.limits.idleTimeout = *v;
      // A 64 MB message over a slow link takes minutes: up to an hour.
      if (auto v = r.duration(lim, ls, "frame_deadline", "limits")) e.limits.frameDeadline = *v;
      // At least one ACK or response must fit; at most what a large answer
      // of a respond-mode script takes.
      if (auto v = r.size(lim, ls, "unread_answers", "limits")) e.limits.unreadAnswers = *v;
    }
  }
  if (YamlReader::has(root, "audit")) {
    YAML::Node a = root["audit"];
    const Section& as = section(SectionId::Audit);
    if (r.map(a, "audit", as) && YamlReader::has(a, "keep")) {
      // Years are how such periods are written ("6y": 365 days each);
      // any other duration as everywhere else.
      std::string text = YamlReader::raw(a, "keep");
      constexpr Duration kYear = std::chrono::hours(24 * 365);
      const Key& keep = as.key("keep");
      int64_t minYears = static_cast<int64_t>(keep.min) / kYear.count();
      int64_t maxYears = static_cast<int64_t>(keep.max) / kYear.count();
      if (text.size() >= 2 && text.size() <= 4 && text.back() == 'y' &&
          std::all_of(text.begin(), text.end() - 1, [](char c) { return c >= '0' && c <= '9'; })) {
        int years = std::stoi(text.substr(0, text.size() - 1));
        if (years < minYears || years > maxYears)
          r.error(a["keep"], "audit.keep",
                  "must be from " + std::to_string(minYears) + "y to " + std::to_string(maxYears) +
                      "y, got `" + text + "`");
        else
          e.auditKeep = kYear * years;
      } else if (auto v = r.duration(a, as, "keep", "audit")) {
        e.auditKeep = *v;
      }
    }
  }
  if (YamlReader::has(root, "events")) {
    YAML::Node ev = root["events"];
    const Section& es = section(SectionId::Events);
    if (r.map(ev, "events", es)) {
      // An hour at least (the console's page looks back a day); a year at
      // most: the table is a recent history, the audit log the long one.
      if (auto v = r.duration(ev, es, "keep", "events")) e.eventsKeep = *v;
      if (auto v = r.whole(ev, es, "max_rows", "events"))
        e.eventsMaxRows = static_cast<int64_t>(*v);
    }
  }
  if (auto v = r.retention(root, sec, "retention", "")) e.retention = *v;
  if (auto v = r.size(root, sec, "max_message_size", "")) e.maxMessageBytes = *v;
  if (YamlReader::has(root, "secrets")) {
    YAML::Node s = root["secrets"];
    if (r.map(s, "secrets", section(SectionId::Secrets))) {
      if (auto v = r.required(s, "key_file", "secrets")) {
        e.secretsKeyFile = projectPath(projectRoot, *v);
      }
    }
  }
  return e;
}

bool isValidName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
  return true;
}

namespace {

// Calls each(name, node) for every entry of the mapping at root[key].
template <typename F>
void forEachNamed(YamlReader& r, const YAML::Node& root, std::string_view key, F each) {
  if (!YamlReader::has(root, key)) return;
  YAML::Node n = root[std::string(key)];
  if (n.IsNull()) return;
  if (!n.IsMap()) {
    r.error(n, std::string(key), "expected a mapping of names to settings");
    return;
  }
  for (auto it = n.begin(); it != n.end(); ++it) {
    std::string name = it->first.IsScalar() ? it->first.Scalar() : "";
    std::string path = joinPath(std::string(key), name);
    if (!isValidName(name)) {
      r.error(it->first, std::string(key),
              "`" + name + "` is not a valid name (letters, digits, _ and -, at most 64)");
      continue;
    }
    each(name, path, it->second, r.at(it->first));
  }
}

}  // namespace

Resources parseResources(YamlReader& r, const YAML::Node& root,
                         const std::filesystem::path& projectRoot) {
  Resources res;
  if (!r.map(root, "", section(SectionId::Resources))) return res;
  forEachNamed(
      r, root, "databases",
      [&](const std::string& name, const std::string& path, const YAML::Node& n, Location at) {
        const Section& ds = section(SectionId::DatabaseResource);
        if (!r.map(n, path, ds)) return;
        DatabaseResource db;
        db.name = name;
        db.at = at;
        if (auto v = r.text(n, "kind", path)) {
          if (*v == "sqlserver")
            db.kind = DatabaseKind::SqlServer;
          else if (*v != "postgresql")
            r.error(n["kind"], joinPath(path, "kind"),
                    "expected postgresql or sqlserver, not \"" + *v + "\"");
        }
        bool sqlServer = db.kind == DatabaseKind::SqlServer;
        if (auto v = r.text(n, "ca", path)) {
          db.tls.enabled = true;
          db.tls.ca = *v;
          db.tls.at = r.file() + ":" + std::to_string(r.keyAt(n, "ca").line);
        }
        if (auto v = r.flag(n, "trust_server_certificate", path)) {
          if (!sqlServer)
            r.error(
                n["trust_server_certificate"], joinPath(path, "trust_server_certificate"),
                "only a kind: sqlserver database takes it (PostgreSQL: ca: verifies the server)");
          else if (*v && db.tls.enabled)
            r.error(n["trust_server_certificate"], joinPath(path, "trust_server_certificate"),
                    "ca: and trust_server_certificate: true contradict each other: the CA is "
                    "there to verify the server");
          db.trustServerCertificate = *v;
        }
        if (auto v = r.required(n, "url", path, Subst::Yes)) {
          if (sqlServer) {
            if (auto u = parseSqlServerUrl(*v); !u)
              r.error(n["url"], joinPath(path, "url"), u.error().message);
            else
              db.url = *v;
          } else if (v->rfind("postgres://", 0) != 0 && v->rfind("postgresql://", 0) != 0) {
            r.error(n["url"], joinPath(path, "url"),
                    v->rfind("sqlserver://", 0) == 0
                        ? "a sqlserver:// URL needs kind: sqlserver beside it"
                        : "expected a PostgreSQL URL (postgresql://user@host/db)");
          } else {
            db.url = *v;
          }
        }
        if (auto v = r.whole(n, ds, "max_connections", path)) db.maxConnections = *v;
        res.databases.emplace(name, std::move(db));
      });
  forEachNamed(
      r, root, "apis",
      [&](const std::string& name, const std::string& path, const YAML::Node& n, Location at) {
        const Section& as = section(SectionId::ApiResource);
        if (!r.map(n, path, as)) return;
        ApiResource api;
        api.name = name;
        api.at = at;
        if (auto v = r.required(n, "url", path, Subst::Yes)) {
          if (!isValidHttpUrl(*v))
            r.error(n["url"], joinPath(path, "url"), "expected an http:// or https:// URL");
          else
            api.url = *v;
        }
        api.tls = parseUrlTls(r, n, path, api.url);
        api.headers = r.stringMap(n, "headers", path, Subst::Yes);
        if (auto v = r.duration(n, as, "timeout", path)) api.timeout = *v;
        res.apis.emplace(name, std::move(api));
      });
  res.certificates = parseCertificates(r, root, projectRoot);
  return res;
}

}  // namespace ductus::config
