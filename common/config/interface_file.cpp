// interfaces/<name>/interface.yaml: source, format, ordering, destinations.
#include <cctype>
#include <chrono>

#include "common/base64.h"
#include "common/config/address.h"
#include "common/config/duration.h"
#include "common/config/project_files.h"
#include "common/cron.h"

namespace ductus::config {
namespace {

// A path written in a project file: relative, inside the project (".." would
// let one interface write into another's or the engine's files).
bool isInsideProject(const std::string& p) {
  std::filesystem::path path(p);
  if (path.is_absolute()) return true;  // an operator's own folder, e.g. /var/spool/feed
  for (auto& part : path)
    if (part == "..") return false;
  return true;
}

void checkFolder(YamlReader& r, const YAML::Node& map, const std::string& path, std::string_view key,
                 const std::string& value) {
  if (!isInsideProject(value))
    r.error(map[std::string(key)], joinPath(path, key),
            "`..` is not allowed: a relative path stays inside the project");
}

// Of a file or SFTP source: `sec` is its section (both hold the same keys).
FileSelection parseSelection(YamlReader& r, const YAML::Node& n, const std::string& path,
                             const Section& sec) {
  FileSelection f;
  if (auto v = r.required(n, "path", path)) {
    checkFolder(r, n, path, "path", *v);
    f.path = *v;
  }
  if (auto v = r.text(n, "pattern", path)) f.pattern = *v;
  if (auto v = r.choice<Split>(n, sec, "split", path, {Split::Records, Split::None})) f.split = *v;
  if (auto v = r.text(n, "move_to", path)) {
    checkFolder(r, n, path, "move_to", *v);
    f.moveTo = *v;
  }
  if (auto v = r.flag(n, "delete", path)) f.deleteAfter = *v;
  if (auto v = r.duration(n, sec, "poll", path)) f.poll = *v;
  // A file left in place would be read again at the next poll.
  bool move = YamlReader::has(n, "move_to"), del = f.deleteAfter;
  if (move == del)
    r.error(n, path,
            move ? "give either move_to or delete: true, not both"
                 : "a read file must leave the folder: give move_to: <folder> or delete: true");
  return f;
}

// ---- sftp: the server, shared by a source and a destination ----------------

// The key types OpenSSH's servers offer and ssh-keyscan prints.
bool isHostKeyType(std::string_view t) {
  for (std::string_view k : {"ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384",
                             "ecdsa-sha2-nistp521", "ssh-dss", "sk-ssh-ed25519@openssh.com",
                             "sk-ecdsa-sha2-nistp256@openssh.com"})
    if (t == k) return true;
  return false;
}

// A pinned key as ssh-keyscan prints it without the host: "<type> <base64>"
// (a comment after it is allowed). The blob is SSH's wire form, whose first
// field is the type's name again: a key pasted under the wrong type, or cut
// short, is caught here rather than as a mismatch at every connect.
std::optional<std::string> hostKeyProblem(const std::string& line) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    size_t start = i;
    while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    if (i > start) words.push_back(line.substr(start, i - start));
  }
  const std::string shape = "expected \"<type> <base64>\" as `ssh-keyscan` prints it without the host "
                            "(e.g. \"ssh-ed25519 AAAAC3Nza...\")";
  if (words.size() < 2) return shape;
  if (!isHostKeyType(words[0]))
    return "`" + words[0] + "` is not a host key type (ssh-ed25519, ecdsa-sha2-nistp256, ssh-rsa, ...); " +
           shape;
  auto blob = base64Decode(words[1]);
  if (!blob) return "the key after " + words[0] + " is not valid base64";
  const std::string& b = *blob;
  uint32_t n = 0;
  if (b.size() >= 4)
    n = (uint32_t(uint8_t(b[0])) << 24) | (uint32_t(uint8_t(b[1])) << 16) |
        (uint32_t(uint8_t(b[2])) << 8) | uint32_t(uint8_t(b[3]));
  if (b.size() < 4 || n != words[0].size() || b.compare(4, n, words[0]) != 0)
    return "the base64 is not a " + words[0] + " key (a key of another type, or cut short?)";
  return std::nullopt;
}

// The project folder: iface.folder is <project>/interfaces/<name>.
std::filesystem::path projectRootOf(const InterfaceConfig& iface) {
  return iface.folder.parent_path().parent_path();
}

// host, port, user, password, private_key and host_key | known_hosts.
// Sign-in needs a key or a password; the server's key must be pinned, so a
// server that is not the one meant is refused before any credential is sent.
void parseSftpServer(YamlReader& r, const YAML::Node& n, const std::string& path,
                     const Section& sec, const InterfaceConfig& iface, sftp::ServerSettings& s,
                     Location& privateKeyAt, Location& knownHostsAt) {
  s.at = r.file() + ":" + std::to_string(r.at(n).line);
  if (!YamlReader::has(n, "host")) r.error(r.at(n), path + ".host", "`host` is required");
  if (auto v = r.host(n, "host", path)) s.host = *v;
  if (auto v = r.whole(n, sec, "port", path)) s.port = static_cast<uint16_t>(*v);
  if (auto v = r.required(n, "user", path, Subst::Yes)) s.user = *v;
  if (auto v = r.text(n, "password", path, Subst::Yes)) s.password = *v;
  bool key = YamlReader::has(n, "private_key"), password = YamlReader::has(n, "password");
  if (!key && !password)
    r.error(n, path, "no sign-in: give private_key: <a file or ${secret:...} PEM> or password:, or both");
  if (key) {
    privateKeyAt = r.at(n["private_key"]);
    if (auto v = r.required(n, "private_key", path, Subst::Yes)) {
      if (v->rfind("-----BEGIN", 0) == 0) {
        s.privateKeyPem = *v;
      } else if (!isInsideProject(*v)) {
        checkFolder(r, n, path, "private_key", *v);
      } else {
        s.privateKeyFile = projectPath(projectRootOf(iface), *v);
      }
    }
  }
  bool pinned = YamlReader::has(n, "host_key"), known = YamlReader::has(n, "known_hosts");
  if (!pinned && !known) {
    std::string port = YamlReader::has(n, "port") ? YamlReader::raw(n, "port") : "22";
    std::string host = YamlReader::raw(n, "host").empty() ? "HOST" : YamlReader::raw(n, "host");
    r.error(n, path,
            "the server's key is not pinned: add host_key: \"<type> <base64>\" (get it with `ssh-keyscan -p " +
                port + " " + host +
                "` and check it with the server's owner) or known_hosts: <file>; an unpinned "
                "server could be anyone's");
  } else if (pinned && known) {
    r.error(r.keyAt(n, "known_hosts"), path + ".known_hosts", "give host_key: or known_hosts:, not both");
  }
  if (pinned) {
    YAML::Node h = n["host_key"];
    std::vector<YAML::Node> lines;
    if (h.IsSequence())
      for (const auto& e : h) lines.push_back(e);
    else
      lines.push_back(h);
    if (lines.empty()) r.error(h, path + ".host_key", "host_key: lists no key");
    for (size_t k = 0; k < lines.size(); ++k) {
      std::string kp = path + ".host_key" + (h.IsSequence() ? "[" + std::to_string(k) + "]" : "");
      if (!lines[k].IsScalar()) {
        r.error(lines[k], kp, "expected a line \"<type> <base64>\"");
        continue;
      }
      if (auto problem = hostKeyProblem(lines[k].Scalar())) r.error(lines[k], kp, *problem);
      else s.hostKeys.push_back(lines[k].Scalar());
    }
  }
  if (known) {
    knownHostsAt = r.at(n["known_hosts"]);
    if (auto v = r.required(n, "known_hosts", path)) {
      checkFolder(r, n, path, "known_hosts", *v);
      if (isInsideProject(*v)) s.knownHostsFile = projectPath(projectRootOf(iface), *v);
    }
  }
}

void parseSource(YamlReader& r, const YAML::Node& root, InterfaceConfig& iface) {
  YAML::Node src = root["source"];
  if (!src.IsDefined()) {
    r.error(r.at(root), "source",
            "`source` is required (one of mllp, http, file, sftp, schedule, internal)");
    return;
  }
  iface.sourceAt = r.at(src);
  const auto& kSourceKinds = section(SectionId::Source).exactlyOne;
  if (!r.map(src, "source", section(SectionId::Source))) return;
  if (!src.IsMap() || src.size() != 1) {
    r.error(src, "source", "expected exactly one source kind: mllp, http, file, sftp, schedule or internal");
    if (!src.IsMap() || src.size() == 0) return;
  }
  std::string kind = src.begin()->first.IsScalar() ? src.begin()->first.Scalar() : "";
  bool known = false;
  for (auto k : kSourceKinds) known = known || k == kind;
  if (!known) return;  // map() has named it
  YAML::Node n = src.begin()->second;
  std::string path = "source." + kind;
  if (kind == "mllp") {
    MllpSource s;
    if (r.map(n, path, section(SectionId::MllpSource))) {
      if (auto hp = r.hostPort(n, "listen", path)) s.listen = *hp;
      s.tls = parseListenerTls(r, n, path);
      s.allow = parseAllowList(r, n, path);
    }
    iface.sourceDescribe = "mllp " + s.listen.toString();
    iface.source = s;
  } else if (kind == "http") {
    HttpSource s;
    const Section& sec = section(SectionId::HttpSource);
    if (r.map(n, path, sec)) {
      if (auto hp = r.hostPort(n, "listen", path)) s.listen = *hp;
      s.tls = parseListenerTls(r, n, path);
      s.allow = parseAllowList(r, n, path);
      if (auto v = r.text(n, "path", path)) {
        if (v->empty() || v->front() != '/') r.error(n["path"], path + ".path", "expected a path starting with /");
        else s.path = *v;
      }
      if (auto v = r.choice<HttpMode>(n, sec, "mode", path, {HttpMode::Queue, HttpMode::Respond}))
        s.mode = *v;
    }
    iface.sourceDescribe = "http " + s.listen.toString() + s.path +
                           (s.mode == HttpMode::Respond ? " (respond)" : " (queue)");
    iface.source = s;
  } else if (kind == "file") {
    FileSource s;
    const Section& sec = section(SectionId::FileSource);
    if (r.map(n, path, sec)) s.files = parseSelection(r, n, path, sec);
    iface.sourceDescribe = "file " + s.files.path + s.files.pattern +
                           (s.files.split == Split::Records ? " (split: records)" : "");
    iface.source = s;
  } else if (kind == "sftp") {
    SftpSource s;
    const Section& sec = section(SectionId::SftpSource);
    if (r.map(n, path, sec)) {
      parseSftpServer(r, n, path, sec, iface, s.server, s.privateKeyAt, s.knownHostsAt);
      s.files = parseSelection(r, n, path, sec);
    }
    iface.sourceDescribe = "sftp " + YamlReader::raw(n, "host") + ":" + s.files.path;
    iface.source = s;
  } else if (kind == "schedule") {
    ScheduleSource s;
    const Section& sec = section(SectionId::ScheduleSource);
    if (r.map(n, path, sec)) {
      bool every = YamlReader::has(n, "every"), cron = YamlReader::has(n, "cron");
      if (every == cron)
        r.error(n, path, "give exactly one of every: <duration> or cron: \"<5 fields>\"");
      if (every) s.every = r.duration(n, sec, "every", path);
      if (cron) {
        if (auto v = r.required(n, "cron", path)) {
          // The schedule source's own parser, so what validates is what runs.
          if (auto parsed = parseCron(*v); !parsed)
            r.error(n["cron"], path + ".cron", parsed.error().message);
          else s.cron = *v;
        }
      }
    }
    iface.sourceDescribe =
        s.every ? "schedule every " + formatDuration(*s.every) : "schedule cron \"" + s.cron + "\"";
    iface.source = s;
  } else if (kind == "internal") {
    r.map(n, path, section(SectionId::InternalSource));
    iface.sourceDescribe = "internal";
    iface.source = InternalSource{};
  }
}

// A file or SFTP destination's name: (placeholders are checked where the
// sender is made: validateNameTemplate in file_sender.h).
void parseFileName(YamlReader& r, const YAML::Node& t, const std::string& tp, std::string& name) {
  if (auto v = r.text(t, "name", tp)) {
    if (v->find('/') != v->npos) r.error(t["name"], tp + ".name", "a file name has no `/`");
    else name = *v;
  }
}

// mode: of the files a destination writes, octal as chmod takes it: "0640", "640".
void parseFileMode(YamlReader& r, const YAML::Node& t, const std::string& tp, int& out) {
  if (auto v = r.text(t, "mode", tp)) {
    bool octal = !v->empty() && v->size() <= 4 &&
                 v->find_first_not_of("01234567") == std::string::npos;
    int mode = octal ? std::stoi(*v, nullptr, 8) : -1;
    if (!octal || mode > 0777)
      r.error(t["mode"], tp + ".mode", "expected an octal file mode such as \"0640\"");
    else if ((mode & 0600) != 0600)
      r.error(t["mode"], tp + ".mode", "the engine must be able to read and write its files (0600 at least)");
    else
      out = mode;
  }
}

std::string methodOf(YamlReader& r, const YAML::Node& n, const std::string& path) {
  const Key& k = section(SectionId::HttpTarget).key("method");
  auto v = r.choice<std::string_view>(n, section(SectionId::HttpTarget), "method", path, k.choices);
  return v ? std::string(*v) : "POST";
}

// One destination's map: exactly one kind, then its common settings.
std::optional<Destination> parseDestination(YamlReader& r, const YAML::Node& n, const std::string& path,
                                            std::string name, const InterfaceConfig& iface) {
  Destination d;
  d.name = std::move(name);
  d.at = r.at(n);
  d.transformAt = YamlReader::has(n, "transform") ? r.at(n["transform"]) : d.at;
  d.keyPath = path;
  d.output = iface.format;
  const Section& sec = section(SectionId::Destination);
  const auto& kTargetKinds = sec.exactlyOne;
  if (!r.map(n, path, sec)) return std::nullopt;
  std::vector<std::string> kinds;
  for (auto k : kTargetKinds)
    if (YamlReader::has(n, k)) kinds.emplace_back(k);
  if (kinds.size() != 1) {
    r.error(n, path,
            kinds.empty() ? "a destination needs one of mllp, http, file, sftp or interface"
                          : "a destination has exactly one of mllp, http, file, sftp or interface; "
                            "found " + kinds[0] + " and " + kinds[1] +
                                " (use `destinations:` with a name for each)");
    if (kinds.empty()) return std::nullopt;
  }
  const std::string& kind = kinds[0];
  YAML::Node t = n[kind];
  std::string tp = joinPath(path, kind);
  d.targetAt = r.keyAt(n, kind);
  if (kind == "mllp") {
    MllpDestination m;
    const Section& ms = section(SectionId::MllpTarget);
    if (r.map(t, tp, ms)) {
      m.tls = parseConnectTls(r, t, tp);
      if (auto v = r.host(t, "host", tp)) m.address.host = *v;
      if (!YamlReader::has(t, "port")) r.error(r.at(t), tp + ".port", "`port` is required");
      if (auto v = r.whole(t, ms, "port", tp)) m.address.port = static_cast<uint16_t>(*v);
      if (auto v = r.duration(t, ms, "ack_timeout", tp)) m.ackTimeout = *v;
    }
    d.describe = "mllp " + YamlReader::raw(t, "host") + ":" + YamlReader::raw(t, "port");
    d.target = m;
  } else if (kind == "http") {
    HttpDestination h;
    const Section& hs = section(SectionId::HttpTarget);
    if (r.map(t, tp, hs)) {
      bool url = YamlReader::has(t, "url"), api = YamlReader::has(t, "api");
      if (url == api)
        r.error(t, tp, "give exactly one of url: <http(s) URL> or api: <a resources.yaml api>");
      if (url) {
        if (auto v = r.text(t, "url", tp, Subst::Yes)) {
          if (!isValidHttpUrl(*v))
            r.error(t["url"], tp + ".url",
                    Substituter::hasReference(YamlReader::raw(t, "url"))
                        ? "the substituted URL is not an http:// or https:// URL"
                        : "expected an http:// or https:// URL, got `" + *v + "`");
          else h.url = *v;
        }
      }
      if (url) {
        h.tls = parseUrlTls(r, t, tp, h.url);
      } else {
        for (std::string_view k : {"ca", "certificate"})
          if (YamlReader::has(t, k))
            r.error(r.keyAt(t, k), joinPath(tp, k),
                    "`" + std::string(k) + "` goes on the apis: entry this destination names");
      }
      if (api) {
        if (auto v = r.text(t, "api", tp)) h.api = *v;
        if (auto v = r.text(t, "path", tp)) h.path = *v;
      } else if (YamlReader::has(t, "path")) {
        r.error(r.keyAt(t, "path"), tp + ".path", "`path` goes with api:; put the path in the url");
      }
      h.method = methodOf(r, t, tp);
      h.headers = r.stringMap(t, "headers", tp, Subst::Yes);
      if (auto v = r.duration(t, hs, "timeout", tp)) h.timeout = *v;
    }
    d.describe = "http " + h.method + " " +
                 (h.api.empty() ? YamlReader::raw(t, "url") : "api " + h.api + h.path);
    d.target = h;
  } else if (kind == "file") {
    FileDestination f;
    const Section& fs = section(SectionId::FileTarget);
    if (r.map(t, tp, fs)) {
      if (auto v = r.required(t, "path", tp)) {
        checkFolder(r, t, tp, "path", *v);
        f.path = *v;
      }
      parseFileName(r, t, tp, f.name);
      parseFileMode(r, t, tp, f.mode);
      if (auto v = r.choice<FileSyncMode>(
              t, fs, "sync", tp, {FileSyncMode::Group, FileSyncMode::Each, FileSyncMode::None})) {
        f.sync = *v;
        f.syncAt = r.keyAt(t, "sync");
      }
      if (auto v = r.choice<FilePublish>(t, fs, "publish", tp,
                                         {FilePublish::Link, FilePublish::Rename}))
        f.publish = *v;
    }
    d.describe = "file " + f.path;
    d.target = f;
  } else if (kind == "sftp") {
    SftpDestination s;
    const Section& ss = section(SectionId::SftpTarget);
    if (r.map(t, tp, ss)) {
      parseSftpServer(r, t, tp, ss, iface, s.server, s.privateKeyAt, s.knownHostsAt);
      if (auto v = r.required(t, "path", tp)) s.path = *v;
      parseFileName(r, t, tp, s.name);
      parseFileMode(r, t, tp, s.mode);
    }
    d.describe = "sftp " + YamlReader::raw(t, "host") + ":" + s.path;
    d.target = s;
  } else {
    RouteDestination route;
    if (auto v = r.required(n, "interface", path)) route.interface = *v;
    d.describe = "route to " + route.interface;
    d.target = route;
  }
  if (auto v = r.text(n, "transform", path)) {
    bool ident = !v->empty() && !std::isdigit(static_cast<unsigned char>((*v)[0]));
    for (char c : *v) ident = ident && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$');
    if (!ident) r.error(n["transform"], path + ".transform", "expected the name of an exported function, got `" + *v + "`");
    else d.transform = *v;
  }
  if (auto v = r.format(n, sec, "output", path)) d.output = *v;
  if (YamlReader::has(n, "retry")) {
    YAML::Node retry = n["retry"];
    const Section& rs = section(SectionId::Retry);
    if (r.map(retry, path + ".retry", rs))
      if (auto v = r.whole(retry, rs, "max_attempts", path + ".retry")) d.maxAttempts = *v;
  }
  if (YamlReader::has(n, "rate_limit")) {
    YAML::Node rl = n["rate_limit"];
    std::string rp = path + ".rate_limit";
    const Section& ls = section(SectionId::RateLimit);
    if (r.map(rl, rp, ls)) {
      RateLimit limit;
      if (!YamlReader::has(rl, "messages")) r.error(rl, rp + ".messages", "`messages` is required");
      if (auto v = r.whole(rl, ls, "messages", rp)) limit.messages = *v;
      if (auto v = r.duration(rl, ls, "per", rp)) limit.per = *v;
      if (auto v = r.choice<bool>(rl, ls, "over", rp, {false, true})) limit.dropOver = *v;
      d.rateLimit = limit;
    }
  }
  if (auto v = r.flag(n, "save_output", path)) d.saveOutput = *v;
  if (YamlReader::has(n, "monitor")) {
    monitor::Expectations own;
    parseMonitor(r, n["monitor"], path + ".monitor", own, true);
    d.behind = own.behind;
  }
  return d;
}

bool isValidDestinationName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
  return true;
}

}  // namespace

void parseInterface(YamlReader& r, const YAML::Node& root, InterfaceConfig& iface) {
  const Section& sec = section(SectionId::Interface);
  if (!r.map(root, "", sec)) return;
  if (root.IsNull()) {
    r.error(r.at(root), "", "the file is empty: an interface needs at least a source and a destination");
    return;
  }
  parseSource(r, root, iface);
  if (auto v = r.format(root, sec, "format", "")) iface.format = *v;
  if (auto v = r.choice<Charset>(root, sec, "charset", "",
                                 {Charset::Auto, Charset::Utf8, Charset::Latin1}))
    iface.charset = *v;

  if (YamlReader::has(root, "ordering")) {
    YAML::Node o = root["ordering"];
    const Section& os = section(SectionId::Ordering);
    if (r.map(o, "ordering", os)) {
      Ordering ord;
      if (auto v = r.required(o, "key", "ordering")) ord.key = *v;
      if (auto v = r.whole(o, os, "partitions", "ordering")) ord.partitions = *v;
      iface.ordering = ord;
    }
  }
  if (YamlReader::has(root, "dedupe")) {
    YAML::Node dd = root["dedupe"];
    const Section& ds = section(SectionId::Dedupe);
    if (r.map(dd, "dedupe", ds)) {
      if (auto v = r.required(dd, "key", "dedupe")) iface.dedupeKey = *v;
      if (auto v = r.duration(dd, ds, "window", "dedupe")) iface.dedupeWindow = *v;
    }
  }
  if (auto v = r.choice<Durability>(root, sec, "durability", "",
                                    {Durability::Strict, Durability::Relaxed}))
    iface.durability = *v;
  if (auto v = r.duration(root, sec, "timeout", "")) iface.timeout = *v;
  if (auto v = r.choice<Isolation>(root, sec, "isolation", "",
                                   {Isolation::Shared, Isolation::Dedicated}))
    iface.isolation = *v;
  if (auto v = r.whole(root, sec, "workers", "")) {
    iface.workers = *v;
    if (iface.isolation != Isolation::Dedicated)
      r.error(root["workers"], "workers",
              "workers: is for isolation: dedicated (shared interfaces use the engine's pool)");
  }
  if (auto v = r.retention(root, sec, "retention", "")) iface.retention = *v;
  if (auto v = r.choice<QuarantinedRetention>(
          root, sec, "quarantined", "", {QuarantinedRetention::Keep, QuarantinedRetention::Purge}))
    iface.quarantined = *v;
  if (auto v = r.size(root, sec, "max_message_size", "")) iface.maxMessageBytes = *v;
  if (auto v = r.text(root, "code", "")) {
    std::filesystem::path p(*v);
    if (p.is_absolute() || !isInsideProject(*v) || p.extension() != ".js")
      r.error(root["code"], "code", "expected a .js file inside the interface's folder, got `" + *v + "`");
    else iface.code = *v;
  }
  if (auto v = r.text(root, "respond", "")) iface.respond = *v;
  iface.respondAt = YamlReader::has(root, "respond") ? r.at(root["respond"]) : iface.sourceAt;

  if (YamlReader::has(root, "dedicated_pools")) {
    YAML::Node pools = root["dedicated_pools"];
    iface.dedicatedPoolsAt = r.at(pools);
    if (!pools.IsMap()) {
      r.error(pools, "dedicated_pools", "expected a mapping of database resources to connection counts");
    } else {
      for (auto it = pools.begin(); it != pools.end(); ++it) {
        std::string db = it->first.IsScalar() ? it->first.Scalar() : "";
        const Key& k = sec.key("dedicated_pools");
        if (auto v = r.whole(pools, db, "dedicated_pools", k.min, k.max))
          iface.dedicatedPools[db] = *v;
      }
      if (iface.isolation != Isolation::Dedicated)
        r.error(r.keyAt(root, "dedicated_pools"), "dedicated_pools",
                "dedicated_pools is for isolation: dedicated (a shared isolate can't tell which "
                "interface is calling)");
    }
  }

  if (YamlReader::has(root, "monitor")) {
    iface.monitorAt = r.keyAt(root, "monitor");
    parseMonitor(r, root["monitor"], "monitor", iface.monitor, false);
  }
  bool one = YamlReader::has(root, "destination"), many = YamlReader::has(root, "destinations");
  if (iface.respondMode()) {
    if (iface.monitor.behind)
      r.error(iface.monitorAt, "monitor.behind",
              "a respond-mode interface has no queue to fall behind (active_within and active_by "
              "still apply)");
    if (one || many)
      r.error(r.keyAt(root, one ? "destination" : "destinations"), one ? "destination" : "destinations",
              "a respond-mode interface answers the request itself and has no destination");
    if (iface.ordering) r.error(r.keyAt(root, "ordering"), "ordering", "a respond-mode interface has no queue to order");
    if (iface.dedupeKey) r.error(r.keyAt(root, "dedupe"), "dedupe", "a respond-mode interface has no queue to dedupe");
    return;
  }
  if (YamlReader::has(root, "respond"))
    r.error(r.keyAt(root, "respond"), "respond", "respond: is for http sources with mode: respond");
  if (one && many) {
    r.error(r.keyAt(root, "destinations"), "destinations",
            "give either destination: (one) or destinations: (by name), not both");
  } else if (one) {
    if (auto d = parseDestination(r, root["destination"], "destination", "default", iface))
      iface.destinations.push_back(std::move(*d));
  } else if (many) {
    YAML::Node ds = root["destinations"];
    if (!ds.IsMap() || ds.size() == 0) {
      r.error(ds, "destinations", "expected a mapping of destination names to destinations");
    } else {
      for (auto it = ds.begin(); it != ds.end(); ++it) {
        std::string name = it->first.IsScalar() ? it->first.Scalar() : "";
        if (!isValidDestinationName(name)) {
          r.error(it->first, "destinations", "`" + name + "` is not a valid destination name (letters, digits, _ and -)");
          continue;
        }
        if (auto d = parseDestination(r, it->second, "destinations." + name, name, iface))
          iface.destinations.push_back(std::move(*d));
      }
    }
  } else {
    r.error(r.at(root), "destination",
            "`destination` (or `destinations`) is required: where do messages go?");
  }
}

}  // namespace ductus::config
