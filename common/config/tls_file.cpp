// certificates: (resources.yaml), a listener's tls: and allow: (interface
// sources and ductus.yaml's api:), read into common/tls/settings.h's shapes.
#include <yaml-cpp/yaml.h>

#include <charconv>

#include "common/config/address.h"
#include "common/config/project_files.h"
#include "common/tls/certificate.h"

namespace ductus::config {
namespace {

std::string where(const Location& at) { return at.file + ":" + std::to_string(at.line); }

// "10.20.0.0/16", "2001:db8::/32": an address and a prefix in range.
bool isNetwork(std::string_view s) {
  auto slash = s.find('/');
  if (slash == std::string_view::npos) return false;
  std::string_view addr = s.substr(0, slash), bits = s.substr(slash + 1);
  unsigned prefix = 0;
  auto [p, ec] = std::from_chars(bits.data(), bits.data() + bits.size(), prefix);
  if (ec != std::errc() || p != bits.data() + bits.size() || bits.empty()) return false;
  if (isIpv4(addr)) return prefix <= 32;
  if (isIpv6(addr)) return prefix <= 128;
  return false;
}

}  // namespace

std::map<std::string, tls::CertificateSource> parseCertificates(
    YamlReader& r, const YAML::Node& root, const std::filesystem::path& projectRoot) {
  std::map<std::string, tls::CertificateSource> out;
  if (!YamlReader::has(root, "certificates")) return out;
  YAML::Node all = root["certificates"];
  if (all.IsNull()) return out;
  if (!all.IsMap()) {
    r.error(all, "certificates", "expected a mapping of names to certificates");
    return out;
  }
  for (auto it = all.begin(); it != all.end(); ++it) {
    std::string name = it->first.IsScalar() ? it->first.Scalar() : "";
    std::string path = joinPath("certificates", name);
    if (!isValidName(name)) {
      r.error(it->first, "certificates",
              "`" + name + "` is not a valid name (letters, digits, _ and -, at most 64)");
      continue;
    }
    YAML::Node n = it->second;
    if (!r.map(n, path, section(SectionId::Certificate))) continue;
    tls::CertificateSource s;
    s.name = name;
    s.at = where(r.at(it->first));
    auto file = [&](std::string_view key) -> std::filesystem::path {
      auto v = r.text(n, key, path, Subst::Yes);
      if (!v || v->empty()) return {};
      return projectPath(projectRoot, *v);
    };
    s.certFile = file("cert_file");
    s.keyFile = file("key_file");
    s.caFile = file("ca_file");
    if (auto v = r.text(n, "cert", path, Subst::Yes)) s.certPem = *v;
    if (auto v = r.text(n, "key", path, Subst::Yes)) s.keyPem = *v;
    if (auto v = r.text(n, "ca", path, Subst::Yes)) s.caPem = *v;
    auto both = [&](std::string_view a, std::string_view b) {
      if (YamlReader::has(n, a) && YamlReader::has(n, b))
        r.error(n[std::string(b)], joinPath(path, b),
                "give " + std::string(a) + " or " + std::string(b) + ", not both");
    };
    both("cert_file", "cert");
    both("key_file", "key");
    both("ca_file", "ca");
    bool cert = YamlReader::has(n, "cert_file") || YamlReader::has(n, "cert");
    bool key = YamlReader::has(n, "key_file") || YamlReader::has(n, "key");
    bool ca = YamlReader::has(n, "ca_file") || YamlReader::has(n, "ca");
    if (cert != key)
      r.error(n, path,
              cert ? "a certificate needs its key: add key_file (or key)"
                   : "a key needs its certificate: add cert_file (or cert)");
    else if (!cert && !ca)
      r.error(n, path,
              "expected a pair (cert_file and key_file, or cert and key) or a CA (ca_file or ca)");
    out.emplace(name, std::move(s));
  }
  return out;
}

std::optional<tls::ListenerTls> parseListenerTls(YamlReader& r, const YAML::Node& map,
                                                 const std::string& path) {
  if (!YamlReader::has(map, "tls")) return std::nullopt;
  YAML::Node n = map["tls"];
  std::string p = joinPath(path, "tls");
  tls::ListenerTls t;
  t.at = where(r.at(n));
  if (!r.map(n, p, section(SectionId::ListenerTls))) return t;
  if (auto v = r.required(n, "certificate", p)) t.certificate = *v;
  if (YamlReader::has(n, "clients")) {
    YAML::Node c = n["clients"];
    std::string cp = joinPath(p, "clients");
    if (r.map(c, cp, section(SectionId::ClientCertificates))) {
      if (auto v = r.required(c, "ca", cp)) t.clientCa = *v;
      if (YamlReader::has(c, "subjects")) {
        YAML::Node subjects = c["subjects"];
        std::string sp = joinPath(cp, "subjects");
        if (!subjects.IsSequence() || subjects.size() == 0) {
          r.error(subjects, sp,
                  "expected a list of subjects, e.g. [\"CN=lab-analyzer\", \"O=Hospital,OU=Lab\", "
                  "lab-gw.hospital.org]");
        } else {
          for (const auto& s : subjects) {
            if (!s.IsScalar()) {
              r.error(s, sp, "expected a subject (text), e.g. \"CN=lab-analyzer\"");
              continue;
            }
            if (auto ok = tls::checkSubjectPattern(s.Scalar()); !ok) {
              r.error(s, sp, ok.error().message);
              continue;
            }
            t.subjects.push_back(s.Scalar());
          }
        }
      }
    }
  }
  return t;
}

tls::AllowList parseAllowList(YamlReader& r, const YAML::Node& map, const std::string& path) {
  tls::AllowList a;
  if (!YamlReader::has(map, "allow")) return a;
  YAML::Node n = map["allow"];
  std::string p = joinPath(path, "allow");
  a.at = where(r.at(n));
  if (!n.IsSequence()) {
    r.error(n, p, "expected a list of addresses, networks and host names, e.g. [10.1.2.3, "
                  "10.20.0.0/16, lab-gw.hospital.org]");
    return a;
  }
  if (n.size() == 0) {
    r.error(n, p, "an empty allow: list would refuse every connection; remove allow: to let "
                  "everyone connect");
    return a;
  }
  for (const auto& e : n) {
    std::string v = e.IsScalar() ? e.Scalar() : "";
    if (v.empty() || !(isNetwork(v) || isValidHost(v))) {
      r.error(e, p, "`" + v + "` is not an address (10.1.2.3, 2001:db8::1), a network "
                    "(10.20.0.0/16) or a host name");
      continue;
    }
    a.entries.push_back(v);
  }
  return a;
}

tls::ConnectTls parseConnectTls(YamlReader& r, const YAML::Node& map, const std::string& path) {
  tls::ConnectTls t;
  if (!YamlReader::has(map, "tls")) return t;
  YAML::Node n = map["tls"];
  std::string p = joinPath(path, "tls");
  t.at = where(r.at(n));
  if (n.IsMap()) {
    t.enabled = true;
    if (r.map(n, p, section(SectionId::ConnectTls))) {
      if (auto v = r.text(n, "ca", p)) t.ca = *v;
      if (auto v = r.text(n, "certificate", p)) t.certificate = *v;
    }
    return t;
  }
  if (!n.IsScalar() || (n.Scalar() != "true" && n.Scalar() != "false")) {
    r.error(n, p,
            "expected true, false or { ca: <certificates: entry>, certificate: <certificates: "
            "entry> }");
    return t;
  }
  t.enabled = n.Scalar() == "true";
  return t;
}

tls::ConnectTls parseUrlTls(YamlReader& r, const YAML::Node& map, const std::string& path,
                            const std::string& url) {
  tls::ConnectTls t;
  bool ca = YamlReader::has(map, "ca"), cert = YamlReader::has(map, "certificate");
  t.at = where(ca ? r.keyAt(map, "ca") : cert ? r.keyAt(map, "certificate") : r.at(map));
  if (auto v = r.text(map, "ca", path)) t.ca = *v;
  if (auto v = r.text(map, "certificate", path)) t.certificate = *v;
  bool https = url.rfind("https://", 0) == 0;
  if ((ca || cert) && url.rfind("http://", 0) == 0)
    r.error(r.keyAt(map, ca ? "ca" : "certificate"), joinPath(path, ca ? "ca" : "certificate"),
            "`" + std::string(ca ? "ca" : "certificate") +
                "` is for TLS, but the URL is http://; use https:// or remove it");
  t.enabled = https || ca || cert;
  return t;
}

}  // namespace ductus::config
