#include "common/config/checks.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <map>
#include <set>

#include <sys/stat.h>
#include <unistd.h>

#include "common/config/address.h"
#include "common/config/suggest.h"
#include "common/file_text.h"
#include "common/sftp/known_hosts.h"

namespace ductus::config {
namespace {

std::string place(const Location& at) {
  std::string s = at.file;
  if (at.line > 0) s.append(":").append(std::to_string(at.line));
  return s;
}

bool sameListenerTls(const std::optional<tls::ListenerTls>& a,
                     const std::optional<tls::ListenerTls>& b) {
  if (!a || !b) return !a && !b;
  return a->certificate == b->certificate && a->clientCa == b->clientCa &&
         a->subjects == b->subjects;
}

// "interfaces/adt/interface.yaml:7" (settings.h's `at`) as a Location.
Location locationOf(const std::string& at) {
  auto colon = at.rfind(':');
  if (colon == std::string::npos) return Location{at, 0, 0};
  int line = 0;
  for (char c : at.substr(colon + 1)) {
    if (c < '0' || c > '9') return Location{at, 0, 0};
    line = line * 10 + (c - '0');
  }
  return Location{at.substr(0, colon), line, 0};
}

// The same words as api::isLoopbackHost (config/ may not include api/).
bool isLoopback(std::string_view host) {
  return host == "localhost" || host == "::1" || host.starts_with("127.");
}

// The SFTP servers of the project's sources and destinations, each with the
// key path of its sftp: map.
struct SftpUse {
  const sftp::ServerSettings* server;
  Location privateKeyAt, knownHostsAt;
  std::string path;
};

std::vector<SftpUse> sftpUses(const Project& project) {
  std::vector<SftpUse> out;
  for (auto& iface : project.interfaces) {
    if (auto* s = std::get_if<SftpSource>(&iface.source))
      out.push_back({&s->server, s->privateKeyAt, s->knownHostsAt, "source.sftp"});
    for (auto& d : iface.destinations)
      if (auto* t = std::get_if<SftpDestination>(&d.target))
        out.push_back({&t->server, t->privateKeyAt, t->knownHostsAt, d.keyPath + ".sftp"});
  }
  return out;
}

template <typename Map>
std::string didYouMean(const std::string& name, const Map& names) {
  std::vector<std::string_view> candidates;
  for (auto& [n, v] : names) candidates.push_back(n);
  std::string near = nearestKey(name, candidates);
  return near.empty() ? "" : " \u2014 did you mean `" + near + "`?";
}

}  // namespace

void checkRoutes(const Project& project, Diagnostics& out) {
  std::map<std::string, std::vector<std::pair<const Destination*, const InterfaceConfig*>>> edges;
  std::map<std::string, const InterfaceConfig*> byName;
  for (auto& i : project.interfaces) byName[i.name] = &i;

  for (auto& iface : project.interfaces) {
    for (auto& d : iface.destinations) {
      auto* route = std::get_if<RouteDestination>(&d.target);
      if (!route || route->interface.empty()) continue;
      std::string path = (d.name == "default" ? "destination" : "destinations." + d.name) + ".interface";
      const InterfaceConfig* target = project.find(route->interface);
      if (!target) {
        out.push_back(diagnosticAt(d.targetAt, path,
                                   "route target `" + route->interface + "` is not an interface of this project" +
                                       didYouMean(route->interface, byName)));
        continue;
      }
      if (!std::holds_alternative<InternalSource>(target->source)) {
        out.push_back(diagnosticAt(
            d.targetAt, path,
            "route target `" + target->name + "` must have `source: internal` (its source is " +
                sourceKind(target->source) + ", " + place(target->sourceAt) + ")"));
        continue;
      }
      if (target->format != d.output) {
        out.push_back(diagnosticAt(d.targetAt, path,
                                   "this destination outputs " + std::string(formatName(d.output)) +
                                       " but `" + target->name + "` reads " + formatName(target->format) +
                                       " (set output: or the target's format:)"));
      }
      edges[iface.name].push_back({&d, target});
    }
  }

  // Depth-first search; an edge back into the current path closes a loop,
  // reported once at that edge with the whole loop spelt out.
  std::map<std::string, int> state;  // 0 unseen, 1 on the path, 2 done
  std::vector<std::string> stack;
  std::function<void(const std::string&)> visit = [&](const std::string& name) {
    state[name] = 1;
    stack.push_back(name);
    for (auto& [d, target] : edges[name]) {
      int s = state[target->name];
      if (s == 1) {
        std::string loop;
        auto it = std::find(stack.begin(), stack.end(), target->name);
        for (; it != stack.end(); ++it) loop += *it + " \u2192 ";
        loop += target->name;
        std::string path = (d->name == "default" ? "destination" : "destinations." + d->name) + ".interface";
        out.push_back(diagnosticAt(d->targetAt, path, "route loop: " + loop));
      } else if (s == 0) {
        visit(target->name);
      }
    }
    stack.pop_back();
    state[name] = 2;
  };
  for (auto& iface : project.interfaces)
    if (state[iface.name] == 0) visit(iface.name);
}

void checkEndpoints(const Project& project, Diagnostics& out) {
  struct Listener {
    std::string owner;  // "interface `adt`" or "the API"
    const HostPort* address;
    const std::string* httpPath;  // null for MLLP and the API
    Location at;
    std::string keyPath;
    const HttpSource* http = nullptr;
  };
  std::vector<Listener> listeners;
  if (project.engine.apiEnabled)
    listeners.push_back({"the API (ductus.yaml api.listen)", &project.engine.apiListen, nullptr,
                         project.engine.apiListenAt, "api.listen"});
  for (auto& iface : project.interfaces) {
    if (auto* m = std::get_if<MllpSource>(&iface.source))
      listeners.push_back({"interface `" + iface.name + "`", &m->listen, nullptr, iface.sourceAt,
                           "source.mllp.listen"});
    if (auto* h = std::get_if<HttpSource>(&iface.source))
      listeners.push_back({"interface `" + iface.name + "`", &h->listen, &h->path, iface.sourceAt,
                           "source.http.listen", h});
  }
  for (size_t j = 0; j < listeners.size(); ++j) {
    for (size_t i = 0; i < j; ++i) {
      auto& a = listeners[i];
      auto& b = listeners[j];
      if (a.address->port == 0 || !sameListenAddress(*a.address, *b.address)) continue;
      if (a.httpPath && b.httpPath) {
        // HTTP interfaces may share a port, one path each. They then share
        // one server, so its tls: and allow: too: they must say the same.
        if (*a.httpPath != *b.httpPath) {
          const char* differs = !sameListenerTls(a.http->tls, b.http->tls) ? "tls:"
                                : a.http->allow.entries != b.http->allow.entries ? "allow:"
                                                                                 : nullptr;
          if (!differs) continue;
          out.push_back(diagnosticAt(
              b.at, "source.http." + std::string(differs, std::strlen(differs) - 1),
              b.owner + " and " + a.owner + " (" + place(a.at) + ") both listen on " +
                  b.address->toString() + " but their " + differs +
                  " differ; HTTP interfaces on one port share one server, so give both the same " +
                  differs));
          break;
        }
        out.push_back(diagnosticAt(b.at, b.keyPath,
                                   "path " + *b.httpPath + " on " + b.address->toString() + " is also " +
                                       a.owner + "'s (" + place(a.at) +
                                       "); HTTP interfaces sharing a port need distinct paths"));
      } else {
        out.push_back(diagnosticAt(b.at, b.keyPath,
                                   b.address->toString() + " is also where " + a.owner + " listens (" +
                                       place(a.at) + "); only HTTP interfaces may share a port"));
      }
      break;
    }
  }
}

void checkResources(const Project& project, Diagnostics& out) {
  for (auto& iface : project.interfaces) {
    for (auto& d : iface.destinations) {
      auto* h = std::get_if<HttpDestination>(&d.target);
      if (!h || h->api.empty() || project.resources.apis.count(h->api)) continue;
      std::string path = (d.name == "default" ? "destination" : "destinations." + d.name) + ".http.api";
      out.push_back(diagnosticAt(d.targetAt, path,
                                 "api `" + h->api + "` is not in resources.yaml (apis:)" +
                                     didYouMean(h->api, project.resources.apis)));
    }
    for (auto& [db, n] : iface.dedicatedPools) {
      if (project.resources.databases.count(db)) continue;
      out.push_back(diagnosticAt(iface.dedicatedPoolsAt, "dedicated_pools." + db,
                               "database `" + db + "` is not in resources.yaml (databases:)" +
                                   didYouMean(db, project.resources.databases)));
    }
  }
}

void checkCertificates(const Project& project, Diagnostics& out) {
  const auto& entries = project.resources.certificates;
  // needPair: a listener's or client's certificate; else a CA (an entry
  // with one, or a pair whose chain is then the CA).
  auto use = [&](const std::string& name, const std::string& at, const std::string& key,
                 bool needPair) {
    if (name.empty()) return;
    auto fits = [&](const tls::CertificateSource& e) { return needPair ? e.isPair() : e.isPair() || e.hasCa(); };
    std::string fitting;
    for (auto& [n, e] : entries)
      if (fits(e)) fitting += (fitting.empty() ? "" : ", ") + n;
    std::string kind = needPair ? "a pair (cert_file and key_file, or cert and key)"
                                : "an entry with a CA (ca_file or ca) or a pair";
    std::string which = fitting.empty() ? "; no certificates: entry is " + kind
                                        : "; entries that fit: " + fitting;
    auto it = entries.find(name);
    if (it == entries.end()) {
      out.push_back(diagnosticAt(locationOf(at), key,
                                 "certificate `" + name +
                                     "` is not in resources.yaml (certificates:)" +
                                     didYouMean(name, entries) + which));
    } else if (!fits(it->second)) {
      out.push_back(diagnosticAt(locationOf(at), key,
                                 "certificate `" + name + "` (" + it->second.at +
                                     ") is a CA alone; " + key + " needs " + kind + which));
    }
  };
  auto listener = [&](const std::optional<tls::ListenerTls>& t, const std::string& path) {
    if (!t) return;
    use(t->certificate, t->at, path + ".tls.certificate", true);
    use(t->clientCa, t->at, path + ".tls.clients.ca", false);
  };
  auto connect = [&](const tls::ConnectTls& t, const std::string& path) {
    use(t.ca, t.at, path + ".ca", false);
    use(t.certificate, t.at, path + ".certificate", true);
  };
  listener(project.engine.apiTls, "api");
  connect(project.engine.databaseTls, "database");
  connect(project.engine.ldap.tls, "auth.ldap");
  connect(project.engine.oidc.tls, "auth.oidc");
  // The SMTP server is verified with smtp.ca like any outbound connection.
  if (const auto& smtp = project.engine.alerts.smtp) {
    const Location& at = project.engine.alertsSmtpCaAt;
    use(smtp->ca, at.file + ":" + std::to_string(at.line), "alerts.smtp.ca", false);
  }
  for (auto& [name, db] : project.resources.databases) connect(db.tls, "databases." + name);
  for (auto& [name, api] : project.resources.apis) connect(api.tls, "apis." + name);
  for (auto& iface : project.interfaces) {
    if (auto* m = std::get_if<MllpSource>(&iface.source)) listener(m->tls, "source.mllp");
    if (auto* h = std::get_if<HttpSource>(&iface.source)) listener(h->tls, "source.http");
    for (auto& d : iface.destinations) {
      if (auto* m = std::get_if<MllpDestination>(&d.target)) connect(m->tls, d.keyPath + ".mllp.tls");
      if (auto* h = std::get_if<HttpDestination>(&d.target)) connect(h->tls, d.keyPath + ".http");
    }
  }
}

void checkSftpFiles(const Project& project, Diagnostics& out) {
  for (const auto& use : sftpUses(project)) {
    const auto& server = *use.server;
    if (!server.privateKeyFile.empty() && ::access(server.privateKeyFile.c_str(), R_OK) != 0)
      out.push_back(diagnosticAt(use.privateKeyAt, use.path + ".private_key",
                                 server.privateKeyFile.string() + ": " + std::strerror(errno) +
                                     " (the engine reads the key at each connect)"));
    if (server.knownHostsFile.empty()) continue;
    auto text = readFileBounded(server.knownHostsFile, sftp::kMaxKnownHostsBytes);
    if (!text) {
      out.push_back(diagnosticAt(use.knownHostsAt, use.path + ".known_hosts", text.error().message));
      continue;
    }
    if (sftp::knownHostKeys(*text, server.host, server.port).empty())
      out.push_back(diagnosticAt(use.knownHostsAt, use.path + ".known_hosts",
                                 server.knownHostsFile.string() + " has no key for " +
                                     sftp::knownHostsName(server.host, server.port) +
                                     ": add the line `ssh-keyscan -p " +
                                     std::to_string(server.port) + " " + server.host +
                                     "` prints (and check it with the server's owner)"));
  }
}

Diagnostics projectWarnings(const Project& project) {
  Diagnostics out;
  const EngineConfig& e = project.engine;
  // A private key others can read is a key others may have copied.
  for (const auto& use : sftpUses(project)) {
    struct stat st {};
    const auto& key = use.server->privateKeyFile;
    if (!key.empty() && ::stat(key.c_str(), &st) == 0 && (st.st_mode & 0044) != 0)
      out.push_back(diagnosticAt(use.privateKeyAt, use.path + ".private_key",
                                 key.string() + " can be read by its group or others: chmod 600 it"));
  }
  // A choice, but one that gives up what the engine otherwise promises.
  for (const auto& iface : project.interfaces)
    for (const auto& d : iface.destinations)
      if (auto* f = std::get_if<FileDestination>(&d.target); f && f->sync == FileSyncMode::None)
        out.push_back(
            diagnosticAt(f->syncAt, d.keyPath + ".file.sync",
                         "sync: none reports a file sent before it is on disk: a power loss "
                         "or a kernel crash may lose files already reported sent, or leave "
                         "a final name over an empty file (sync: group, the default, makes "
                         "many files durable with two syncs and loses nothing)"));
  if (e.apiEnabled && !e.apiTls && !isLoopback(e.apiListen.host))
    out.push_back(diagnosticAt(
        e.apiListenAt, "api.listen",
        "the API listens on " + e.apiListen.toString() +
            " without tls: { certificate }: its session cookie is Secure (browsers will not send it over "
            "plain HTTP) and passwords would cross in clear; add tls: { certificate: ... } "
            "(resources.yaml certificates:) or listen on loopback behind a proxy"));
  // Alerts that would tell no one, and channels no alert reaches: valid,
  // but almost always a rule or a name forgotten.
  const auto& a = e.alerts;
  auto placed = [](const std::vector<Location>& at, size_t i, const Location& whole) {
    return i < at.size() ? at[i] : whole;
  };
  for (size_t i = 0; i < a.rules.size(); ++i)
    if (a.rules[i].notify.empty())
      out.push_back(diagnosticAt(placed(e.alertRulesAt, i, e.alertsAt),
                                 "alerts.rules[" + std::to_string(i) + "].notify",
                                 "the rule notifies no channel: its alerts are recorded (the API, "
                                 "the console) but no one is told"));
  for (size_t i = 0; i < a.channels.size(); ++i) {
    bool used = false;
    for (const auto& rule : a.rules)
      for (const auto& n : rule.notify) used = used || n == a.channels[i].name;
    if (!used)
      out.push_back(diagnosticAt(placed(e.alertChannelsAt, i, e.alertsAt),
                                 "alerts.channels." + a.channels[i].name,
                                 "no rule notifies this channel (alerts.rules[].notify)"));
  }
  return out;
}

}  // namespace ductus::config
