#include "common/config/yaml_reader.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "common/config/address.h"
#include "common/config/duration.h"
#include "common/config/suggest.h"

namespace ductus::config {

std::string joinPath(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

Location YamlReader::at(const YAML::Node& node) const {
  if (!node.IsDefined()) return Location{file_, 0, 0};
  YAML::Mark m = node.Mark();
  if (m.is_null()) return Location{file_, 0, 0};
  return Location{file_, m.line + 1, m.column + 1};  // yaml-cpp counts from 0
}

Location YamlReader::keyAt(const YAML::Node& map, std::string_view key) const {
  if (map.IsMap())
    for (auto it = map.begin(); it != map.end(); ++it)
      if (it->first.IsScalar() && it->first.Scalar() == key) return at(it->first);
  return at(map);
}

void YamlReader::error(const YAML::Node& node, const std::string& path, std::string message) {
  error(at(node), path, std::move(message));
}

void YamlReader::error(const Location& where, const std::string& path, std::string message) {
  out_.push_back(diagnosticAt(where, path, std::move(message)));
}

bool YamlReader::map(const YAML::Node& node, const std::string& path, const Section& section) {
  std::vector<std::string_view> known;
  for (const auto& k : section.keys) known.push_back(k.name);
  return mapKeys(node, path, known, section.unsupported);
}

bool YamlReader::mapKeys(const YAML::Node& node, const std::string& path,
                         const std::vector<std::string_view>& known,
                         const std::vector<Unsupported>& unsupported) {
  if (node.IsNull()) return true;
  if (!node.IsMap()) {
    error(node, path, "expected a mapping of keys (key: value)");
    return false;
  }
  std::map<std::string, int> seen;  // key → line of its first use
  for (auto it = node.begin(); it != node.end(); ++it) {
    if (!it->first.IsScalar()) {
      error(it->first, path, "expected a plain key");
      continue;
    }
    const std::string& key = it->first.Scalar();
    // yaml-cpp keeps duplicate keys; one of them would be silently ignored.
    auto [first, fresh] = seen.emplace(key, at(it->first).line);
    if (!fresh) {
      error(it->first, joinPath(path, key),
            "duplicate key `" + key + "` (first given on line " + std::to_string(first->second) + ")");
      continue;
    }
    bool isKnown = false;
    for (auto k : known) isKnown = isKnown || k == key;
    if (isKnown) continue;
    bool refused = false;
    for (auto& u : unsupported) {
      if (u.key == key) {
        error(it->first, joinPath(path, key),
              "`" + key + "` (" + std::string(u.what) + ") is not supported yet");
        refused = true;
      }
    }
    if (refused) continue;
    std::vector<std::string_view> candidates = known;
    for (auto& u : unsupported) candidates.push_back(u.key);
    std::string near = nearestKey(key, candidates);
    std::string message = "unknown key `" + key + "`";
    if (!near.empty()) message += " \u2014 did you mean `" + near + "`?";
    else {
      message += " (expected one of:";
      for (auto k : known) message += " " + std::string(k);
      message += ")";
    }
    error(it->first, joinPath(path, key), std::move(message));
  }
  return true;
}

bool YamlReader::has(const YAML::Node& map, std::string_view key) {
  return map.IsMap() && map[std::string(key)].IsDefined();
}

std::optional<std::string> YamlReader::scalar(const YAML::Node& map, std::string_view key,
                                              const std::string& path) {
  if (!map.IsMap()) return std::nullopt;
  YAML::Node n = map[std::string(key)];
  if (!n.IsDefined() || n.IsNull()) return std::nullopt;
  if (!n.IsScalar()) {
    error(n, joinPath(path, key), "expected a single value, not a list or mapping");
    return std::nullopt;
  }
  return n.Scalar();
}

std::optional<std::string> YamlReader::substitute(const YAML::Node& node, const std::string& path,
                                                  const std::string& value, Subst subst,
                                                  bool* changed) {
  if (!Substituter::hasReference(value)) return value;
  if (subst == Subst::No) {
    error(node, path,
          "${...} is not allowed here (only in the database URL, resources.yaml, destination "
          "hosts, URLs and headers, SFTP credentials, and alerts:)");
    return std::nullopt;
  }
  auto outcome = subst_.apply(value);
  if (!outcome.errors.empty()) {
    for (auto& e : outcome.errors) error(node, path, e);
    return std::nullopt;
  }
  for (auto& w : outcome.warnings) subst_.warnings().push_back(diagnosticAt(at(node), path, w));
  // A secret known by name only, an unset variable: nothing to check the
  // value against, and no value for the project (then only validated, never run).
  if (outcome.unknown) return std::nullopt;
  if (changed) *changed = outcome.substituted;
  return std::move(outcome.value);
}

std::optional<std::string> YamlReader::text(const YAML::Node& map, std::string_view key,
                                            const std::string& path, Subst subst) {
  auto s = scalar(map, key, path);
  if (!s) return std::nullopt;
  return substitute(map[std::string(key)], joinPath(path, key), *s, subst, nullptr);
}

std::optional<std::string> YamlReader::required(const YAML::Node& map, std::string_view key,
                                                const std::string& path, Subst subst) {
  YAML::Node n = map.IsMap() ? map[std::string(key)] : YAML::Node();
  if (!n.IsDefined() || n.IsNull() || (n.IsScalar() && n.Scalar().empty())) {
    std::string message = "`";
    message.append(key).append("` is required");
    error(n.IsDefined() ? at(n) : at(map), joinPath(path, key), std::move(message));
    return std::nullopt;
  }
  return text(map, key, path, subst);
}

std::string YamlReader::raw(const YAML::Node& map, std::string_view key) {
  if (!map.IsMap()) return "";
  YAML::Node n = map[std::string(key)];
  return n.IsDefined() && n.IsScalar() ? n.Scalar() : "";
}

std::optional<uint64_t> YamlReader::whole(const YAML::Node& map, std::string_view key,
                                          const std::string& path, uint64_t min, uint64_t max) {
  auto s = scalar(map, key, path);
  if (!s) return std::nullopt;
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s->data(), s->data() + s->size(), v);
  if (s->empty() || ec != std::errc{} || end != s->data() + s->size() || v < min || v > max) {
    error(map[std::string(key)], joinPath(path, key),
          "expected a whole number from " + std::to_string(min) + " to " + std::to_string(max) +
              ", got `" + *s + "`");
    return std::nullopt;
  }
  return v;
}

std::optional<bool> YamlReader::flag(const YAML::Node& map, std::string_view key,
                                     const std::string& path) {
  auto s = scalar(map, key, path);
  if (!s) return std::nullopt;
  if (*s == "true") return true;
  if (*s == "false") return false;
  error(map[std::string(key)], joinPath(path, key), "expected true or false, got `" + *s + "`");
  return std::nullopt;
}

std::optional<Duration> YamlReader::duration(const YAML::Node& map, std::string_view key,
                                             const std::string& path, Duration min, Duration max) {
  auto s = scalar(map, key, path);
  if (!s) return std::nullopt;
  auto d = parseDuration(*s);
  if (!d) {
    error(map[std::string(key)], joinPath(path, key),
          "expected a duration such as 250ms, 5s, 10m or 1h, got `" + *s + "`");
    return std::nullopt;
  }
  if (*d < min || *d > max) {
    error(map[std::string(key)], joinPath(path, key),
          "must be from " + formatDuration(min) + " to " + formatDuration(max) + ", got `" + *s + "`");
    return std::nullopt;
  }
  return d;
}

std::optional<uint64_t> YamlReader::size(const YAML::Node& map, std::string_view key,
                                         const std::string& path, uint64_t min, uint64_t max) {
  auto s = scalar(map, key, path);
  if (!s) return std::nullopt;
  auto v = parseSize(*s);
  if (!v) {
    error(map[std::string(key)], joinPath(path, key),
          "expected a size such as 512KB, 64MB or 1GB, got `" + *s + "`");
    return std::nullopt;
  }
  if (*v < min || *v > max) {
    error(map[std::string(key)], joinPath(path, key),
          "must be from " + std::to_string(min >> 10) + "KB to " + std::to_string(max >> 20) +
              "MB, got `" + *s + "`");
    return std::nullopt;
  }
  return v;
}

std::optional<uint64_t> YamlReader::whole(const YAML::Node& map, const Section& section,
                                          std::string_view key, const std::string& path) {
  const Key& k = section.key(key);
  return whole(map, key, path, k.min, k.max);
}

std::optional<Duration> YamlReader::duration(const YAML::Node& map, const Section& section,
                                             std::string_view key, const std::string& path) {
  const Key& k = section.key(key);
  return duration(map, key, path, Duration(static_cast<int64_t>(k.min)),
                  Duration(static_cast<int64_t>(k.max)));
}

std::optional<uint64_t> YamlReader::size(const YAML::Node& map, const Section& section,
                                         std::string_view key, const std::string& path) {
  const Key& k = section.key(key);
  return size(map, key, path, k.min, k.max);
}

void YamlReader::checkChoices(const Key& key, size_t count) {
  if (key.choices.size() == count) return;
  std::fprintf(stderr, "ductus: the project format's `%.*s` has %zu words, its loader %zu values\n",
               static_cast<int>(key.name.size()), key.name.data(), key.choices.size(), count);
  std::abort();
}

std::optional<HostPort> YamlReader::hostPort(const YAML::Node& map, std::string_view key,
                                             const std::string& path) {
  auto s = required(map, key, path);
  if (!s) return std::nullopt;
  auto hp = parseHostPort(*s);
  if (!hp)
    error(map[std::string(key)], joinPath(path, key),
          "expected host:port with a port from 1 to 65535 (e.g. 127.0.0.1:2575), got `" + *s + "`");
  return hp;
}

std::optional<std::string> YamlReader::host(const YAML::Node& map, std::string_view key,
                                            const std::string& path) {
  auto s = scalar(map, key, path);
  if (!s) {
    if (!has(map, key)) {
      std::string message = "`";
      message.append(key).append("` is required");
      error(at(map), joinPath(path, key), std::move(message));
    }
    return std::nullopt;
  }
  bool changed = false;
  auto v = substitute(map[std::string(key)], joinPath(path, key), *s, Subst::Yes, &changed);
  if (!v) return std::nullopt;
  if (!isValidHost(*v)) {
    // A substituted value may be a credential's neighbour: name the
    // reference, not the value.
    error(map[std::string(key)], joinPath(path, key),
          changed ? "the substituted value of `" + *s + "` is not a host name or IP address"
                  : "expected a host name or IP address, got `" + *s + "`");
    return std::nullopt;
  }
  return v;
}

std::optional<Format> YamlReader::format(const YAML::Node& map, const Section& section,
                                         std::string_view key, const std::string& path) {
  return choice<Format>(map, section, key, path,
                        {Format::Hl7v2, Format::Json, Format::Text, Format::Csv, Format::Xml});
}

std::optional<Retention> YamlReader::retention(const YAML::Node& map, const Section& section,
                                               std::string_view key, const std::string& path) {
  return choice<Retention>(map, section, key, path,
                           {Retention::OneWeek, Retention::ThreeWeeks, Retention::SevenWeeks});
}

std::map<std::string, std::string> YamlReader::stringMap(const YAML::Node& map, std::string_view key,
                                                         const std::string& path, Subst subst) {
  std::map<std::string, std::string> out;
  if (!has(map, key)) return out;
  YAML::Node n = map[std::string(key)];
  std::string p = joinPath(path, key);
  if (n.IsNull()) return out;
  if (!n.IsMap()) {
    error(n, p, "expected a mapping of names to values");
    return out;
  }
  for (auto it = n.begin(); it != n.end(); ++it) {
    if (!it->first.IsScalar()) {
      error(it->first, p, "expected a plain key");
      continue;
    }
    auto v = text(n, it->first.Scalar(), p, subst);
    if (v) out[it->first.Scalar()] = *v;
  }
  return out;
}

}  // namespace ductus::config
