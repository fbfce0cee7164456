#include "schema/conninfo.h"

#include <libpq-fe.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <optional>
#include <system_error>
#include <vector>

#include "common/tls/certificates.h"

namespace ductus::store {
namespace {

struct OptionsFree {
  void operator()(PQconninfoOption* o) const { PQconninfoFree(o); }
};
using Options = std::unique_ptr<PQconninfoOption, OptionsFree>;

Result<Options> parse(const std::string& conninfo) {
  char* err = nullptr;
  Options opts(PQconninfoParse(conninfo.c_str(), &err));
  if (!opts) {
    // libpq's reason names the mistake, never the password's value.
    std::string why = err ? err : "out of memory";
    PQfreemem(err);
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    return Error{"the connection string does not parse: " + why};
  }
  return opts;
}

// Single quotes, with ' and \ escaped: libpq's keyword/value syntax.
std::string quoted(const char* v) {
  std::string q = "'";
  for (const char* c = v; *c; ++c) {
    if (*c == '\'' || *c == '\\') q.push_back('\\');
    q.push_back(*c);
  }
  return q + "'";
}

}  // namespace

Result<std::string> withConninfoDefaults(const std::string& conninfo,
                                         const std::vector<ConninfoParam>& defaults) {
  auto opts = parse(conninfo);
  if (!opts) return opts.error();
  std::string out;
  auto add = [&](const char* keyword, const char* value) {
    if (!out.empty()) out += ' ';
    out += keyword;
    out += '=';
    out += quoted(value);
  };
  // PQconninfoParse fills in only what the string sets, so a value here is
  // the operator's: keep every one, in libpq's order.
  for (PQconninfoOption* o = opts->get(); o->keyword; ++o)
    if (o->val) add(o->keyword, o->val);
  for (auto& [keyword, value] : defaults) {
    const PQconninfoOption* o = opts->get();
    while (o->keyword && keyword != o->keyword) ++o;
    if (!o->keyword) continue;  // a libpq that does not know it: it would refuse the string
    if (o->val) continue;
    // libpq reads PGCONNECT_TIMEOUT and its like when the string is silent.
    if (o->envvar) {
      const char* env = std::getenv(o->envvar);
      if (env && *env) continue;
    }
    add(keyword.c_str(), value.c_str());
  }
  return out;
}

Result<std::string> hardenedConninfo(const std::string& conninfo, const ConnectionDefaults& d) {
  return withConninfoDefaults(conninfo,
                              {{"connect_timeout", std::to_string(d.connectTimeoutSeconds)},
                               {"keepalives", "1"},
                               {"keepalives_idle", std::to_string(d.keepalivesIdleSeconds)},
                               {"keepalives_interval", std::to_string(d.keepalivesIntervalSeconds)},
                               {"keepalives_count", std::to_string(d.keepalivesCount)}});
}

std::string conninfoValue(const std::string& conninfo, const std::string& keyword) {
  auto opts = parse(conninfo);
  if (!opts) return "";
  for (PQconninfoOption* o = opts->get(); o->keyword; ++o)
    if (keyword == o->keyword) return o->val ? o->val : "";
  return "";
}

namespace {

std::vector<std::string> commaList(const char* v) {
  std::vector<std::string> out;
  if (!v || !*v) return out;
  std::string item;
  for (const char* c = v;; ++c) {
    if (*c == ',' || !*c) {
      out.push_back(item);
      item.clear();
      if (!*c) break;
    } else {
      item.push_back(*c);
    }
  }
  return out;
}

std::string joined(const std::vector<std::string>& items, size_t from) {
  std::string out;
  for (size_t i = from; i < items.size(); ++i) out += (i == from ? "" : ",") + items[i];
  return out;
}

}  // namespace

std::optional<std::string> conninfoAfterHost(const std::string& conninfo, const std::string& host,
                                             const std::string& port) {
  auto opts = parse(conninfo);
  if (!opts) return std::nullopt;
  std::vector<std::string> hosts, addrs, ports;
  for (PQconninfoOption* o = opts->get(); o->keyword; ++o) {
    std::string k = o->keyword;
    if (k == "host") hosts = commaList(o->val);
    if (k == "hostaddr") addrs = commaList(o->val);
    if (k == "port") ports = commaList(o->val);
  }
  size_t n = std::max(hosts.size(), addrs.size());
  if (n < 2) return std::nullopt;
  // libpq's rules: one port for every host, or one each.
  auto portOf = [&](size_t i) {
    std::string p = ports.size() == n ? ports[i] : ports.size() == 1 ? ports[0] : "";
    return p.empty() ? std::string("5432") : p;
  };
  size_t at = n;
  for (size_t i = 0; i < n && at == n; ++i) {
    bool sameHost =
        (i < hosts.size() && hosts[i] == host) || (i < addrs.size() && addrs[i] == host);
    // No port in the string: it came from PGPORT or a service file, the
    // same for every host; the host alone says which one it was.
    if (sameHost && (port.empty() || ports.empty() || portOf(i) == port)) at = i;
  }
  if (at + 1 >= n) return std::nullopt;
  std::string out;
  auto add = [&out](const std::string& k, const std::string& v) {
    out += (out.empty() ? "" : " ") + k + "=" + quoted(v.c_str());
  };
  for (PQconninfoOption* o = opts->get(); o->keyword; ++o) {
    std::string k = o->keyword;
    if (k == "host") {
      if (!hosts.empty()) add(k, joined(hosts, at + 1));
    } else if (k == "hostaddr") {
      if (!addrs.empty()) add(k, joined(addrs, at + 1));
    } else if (k == "port") {
      if (ports.size() == n)
        add(k, joined(ports, at + 1));
      else if (o->val)
        add(k, o->val);
    } else if (o->val) {
      add(k, o->val);
    }
  }
  return out;
}

Result<std::string> withVerifiedTls(const std::string& conninfo, const std::string& caFile) {
  auto opts = parse(conninfo);
  if (!opts) return opts.error();
  std::string out;
  for (PQconninfoOption* o = opts->get(); o->keyword; ++o) {
    std::string k = o->keyword;
    if (!o->val || k == "sslmode" || k == "sslrootcert") continue;
    out += (out.empty() ? "" : " ") + k + "=" + quoted(o->val);
  }
  out += (out.empty() ? "" : " ") + std::string("sslmode='verify-full' sslrootcert=") +
         quoted(caFile.c_str());
  return out;
}

DatabaseTls::~DatabaseTls() {
  std::error_code ec;
  for (const auto& p : written_) std::filesystem::remove(p, ec);
}

Result<std::string> DatabaseTls::apply(const std::string& what, const std::string& conninfo,
                                       const tls::ConnectTls& tls,
                                       const std::map<std::string, tls::CertificateSource>& sources,
                                       tls::Certificates* certificates) {
  if (!tls.enabled || tls.ca.empty()) return conninfo;
  auto file = caFile(what, tls, sources, certificates);
  if (!file) return file.error();
  return withVerifiedTls(conninfo, file->string());
}

Result<std::filesystem::path> DatabaseTls::caFile(
    const std::string& what, const tls::ConnectTls& tls,
    const std::map<std::string, tls::CertificateSource>& sources, tls::Certificates* certificates) {
  if (!tls.enabled || tls.ca.empty()) return std::filesystem::path{};
  auto source = sources.find(tls.ca);
  if (source != sources.end() && !source->second.caFile.empty()) return source->second.caFile;
  // PEM text, or a pair whose chain is the CA: written for the client to read.
  if (!certificates) return Error{what + ": TLS with ca " + tls.ca + " without the engine's certificates"};
  auto client = certificates->client({.enabled = true, .ca = tls.ca, .certificate = {}, .at = tls.at});
  if (!client) return Error{what + ": " + client.error().message};
  std::string pem = (*client)->caPem();
  if (pem.empty()) return Error{what + ": certificates: entry " + tls.ca + " holds no CA"};
  std::string path = (std::filesystem::temp_directory_path() / "ductus-db-ca-XXXXXX").string();
  int fd = mkstemp(path.data());  // 0600
  if (fd < 0) return Error::fromErrno(what + ": a file for the CA of " + tls.ca);
  written_.emplace_back(path);
  size_t done = 0;
  while (done < pem.size()) {
    ssize_t n = ::write(fd, pem.data() + done, pem.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      return Error::fromErrno(what + ": writing " + path, err);
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return std::filesystem::path(path);
}

}  // namespace ductus::store
