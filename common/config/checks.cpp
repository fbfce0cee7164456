#include "common/config/checks.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "common/config/address.h"
#include "common/config/suggest.h"

namespace ductus::config {
namespace {

std::string place(const Location& at) {
  std::string s = at.file;
  if (at.line > 0) s.append(":").append(std::to_string(at.line));
  return s;
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
                           "source.http.listen"});
  }
  for (size_t j = 0; j < listeners.size(); ++j) {
    for (size_t i = 0; i < j; ++i) {
      auto& a = listeners[i];
      auto& b = listeners[j];
      if (a.address->port == 0 || !sameListenAddress(*a.address, *b.address)) continue;
      if (a.httpPath && b.httpPath) {
        // HTTP interfaces may share a port, one path each. They then share
        // the port's TLS and allow-list too; neither is supported yet, so
        // they are identical (absent) by construction.
        if (*a.httpPath != *b.httpPath) continue;
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

}  // namespace ductus::config
