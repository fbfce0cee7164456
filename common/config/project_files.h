// Parsers of each project file into the model; each records its mistakes in
// the reader and returns what it could read (defaults where a value was
// wrong), so later checks still run and every error is reported at once.
#pragma once

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "common/config/model.h"
#include "common/config/yaml_reader.h"

namespace ductus::config {

// A file a project names: absolute as written, else relative to the
// project folder (never to the engine's working directory).
inline std::filesystem::path projectPath(const std::filesystem::path& projectRoot,
                                         const std::string& value) {
  std::filesystem::path p(value);
  return p.is_absolute() ? p : projectRoot / p;
}

// ductus.yaml
EngineConfig parseEngine(YamlReader& r, const YAML::Node& root, const std::filesystem::path& projectRoot);

// Resource names are what interfaces and code refer to: db("lab"), api:
// lab, tls: { certificate: server }: letters, digits, _ and -, at most 64.
bool isValidName(const std::string& name);

// resources.yaml
Resources parseResources(YamlReader& r, const YAML::Node& root,
                         const std::filesystem::path& projectRoot);

// TLS and allow: (tls_file.cpp). certificates: of resources.yaml, files
// resolved against the project; a listener's tls: and allow: in `map`
// (absent: nullopt / an empty list).
std::map<std::string, tls::CertificateSource> parseCertificates(
    YamlReader& r, const YAML::Node& root, const std::filesystem::path& projectRoot);
std::optional<tls::ListenerTls> parseListenerTls(YamlReader& r, const YAML::Node& map,
                                                 const std::string& path);
tls::AllowList parseAllowList(YamlReader& r, const YAML::Node& map, const std::string& path);
// An MLLP destination's tls: true | false | { ca, certificate } (absent:
// plain TCP).
tls::ConnectTls parseConnectTls(YamlReader& r, const YAML::Node& map, const std::string& path);
// ca:/certificate: beside a URL (apis:, HTTP destinations): TLS for an
// https:// `url` or when either is given; either on an http:// URL is a
// mistake (nothing would use it). An empty url (not read): names only.
tls::ConnectTls parseUrlTls(YamlReader& r, const YAML::Node& map, const std::string& path,
                            const std::string& url);

// interfaces/<name>/interface.yaml; name, folder and file are already set
// in iface, and the engine's defaults (retention, max size) applied.
void parseInterface(YamlReader& r, const YAML::Node& root, InterfaceConfig& iface);

// monitor: (common/config/monitor_file.cpp): an interface's expectations,
// or (destinationOnly) a destination's own behind:.
void parseMonitor(YamlReader& r, const YAML::Node& n, const std::string& path,
                  monitor::Expectations& out, bool destinationOnly);
// ductus.yaml's alerts:, the one section of it whose texts may use ${...}
// for a password or a webhook's token: into e.alerts, with the places the
// cross-file checks need (e.alertsSmtpCaAt, alertChannelsAt, alertRulesAt).
void parseAlerts(YamlReader& r, const YAML::Node& n, EngineConfig& e);

}  // namespace ductus::config
