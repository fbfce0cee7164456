// YamlReader: typed reads of one project file's YAML, each mistake recorded
// as a Diagnostic at the node's line and column, so a whole project is
// checked in one run instead of stopping at the first error. Every read
// returns nullopt when the value is absent or wrong; callers keep defaults.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/config/diagnostic.h"
#include "common/config/format.h"
#include "common/config/model.h"
#include "common/config/substitute.h"

namespace ductus::config {

enum class Subst { No, Yes };

std::string joinPath(const std::string& path, std::string_view key);

class YamlReader {
 public:
  YamlReader(std::string file, Diagnostics& out, Substituter& substituter)
      : file_(std::move(file)), out_(out), subst_(substituter) {}

  const std::string& file() const { return file_; }
  Location at(const YAML::Node& node) const;
  Location keyAt(const YAML::Node& map, std::string_view key) const;
  void error(const YAML::Node& node, const std::string& path, std::string message);
  void error(const Location& at, const std::string& path, std::string message);

  // Checks node is a mapping whose keys are all the section's (format.h);
  // reports the others (with the nearest known key) and the unsupported
  // ones. False when node is not a mapping. A null node (`internal:`)
  // counts as an empty mapping.
  bool map(const YAML::Node& node, const std::string& path, const Section& section);

  static bool has(const YAML::Node& map, std::string_view key);

  std::optional<std::string> text(const YAML::Node& map, std::string_view key,
                                  const std::string& path, Subst subst = Subst::No);
  // As text, and an error when absent or empty.
  std::optional<std::string> required(const YAML::Node& map, std::string_view key,
                                      const std::string& path, Subst subst = Subst::No);
  // The raw text as written (for describe()s: never a substituted value).
  static std::string raw(const YAML::Node& map, std::string_view key);

  std::optional<uint64_t> whole(const YAML::Node& map, std::string_view key, const std::string& path,
                                uint64_t min, uint64_t max);
  std::optional<bool> flag(const YAML::Node& map, std::string_view key, const std::string& path);
  std::optional<Duration> duration(const YAML::Node& map, std::string_view key,
                                   const std::string& path, Duration min, Duration max);
  std::optional<uint64_t> size(const YAML::Node& map, std::string_view key, const std::string& path,
                               uint64_t min, uint64_t max);
  // As above, bounded by the section's key of that name (format.h).
  std::optional<uint64_t> whole(const YAML::Node& map, const Section& section, std::string_view key,
                                const std::string& path);
  std::optional<Duration> duration(const YAML::Node& map, const Section& section,
                                   std::string_view key, const std::string& path);
  std::optional<uint64_t> size(const YAML::Node& map, const Section& section, std::string_view key,
                               const std::string& path);
  std::optional<HostPort> hostPort(const YAML::Node& map, std::string_view key,
                                   const std::string& path);
  std::optional<std::string> host(const YAML::Node& map, std::string_view key,
                                  const std::string& path);
  std::optional<Format> format(const YAML::Node& map, const Section& section, std::string_view key,
                               const std::string& path);
  std::optional<Retention> retention(const YAML::Node& map, const Section& section,
                                     std::string_view key, const std::string& path);

  // One of a fixed set of words.
  template <typename E>
  std::optional<E> choice(const YAML::Node& map, std::string_view key, const std::string& path,
                          const std::vector<std::pair<std::string_view, E>>& options) {
    auto t = text(map, key, path);
    if (!t) return std::nullopt;
    std::string expected;
    for (auto& [word, value] : options) {
      if (*t == word) return value;
      expected += (expected.empty() ? "" : " | ") + std::string(word);
    }
    error(map[std::string(key)], joinPath(path, key), "expected " + expected + ", got `" + *t + "`");
    return std::nullopt;
  }

  // One of the section's key's words (format.h), as the value at the same
  // place in `values`.
  template <typename E>
  std::optional<E> choice(const YAML::Node& map, const Section& section, std::string_view key,
                          const std::string& path, const std::vector<E>& values) {
    const Key& k = section.key(key);
    checkChoices(k, values.size());
    std::vector<std::pair<std::string_view, E>> options;
    for (size_t i = 0; i < values.size(); ++i) options.emplace_back(k.choices[i], values[i]);
    return choice<E>(map, key, path, options);
  }

  // A mapping of strings (headers); values may be substituted.
  std::map<std::string, std::string> stringMap(const YAML::Node& map, std::string_view key,
                                               const std::string& path, Subst subst);

 private:
  // The check map() makes, given the known keys.
  bool mapKeys(const YAML::Node& node, const std::string& path,
               const std::vector<std::string_view>& known,
               const std::vector<Unsupported>& unsupported);
  // Aborts when the key has not `count` words (the table and a loader's
  // values apart).
  static void checkChoices(const Key& key, size_t count);
  // The scalar at map[key], or an error when it is a list or mapping.
  std::optional<std::string> scalar(const YAML::Node& map, std::string_view key,
                                    const std::string& path);
  std::optional<std::string> substitute(const YAML::Node& node, const std::string& path,
                                        const std::string& value, Subst subst, bool* changed);

  std::string file_;
  Diagnostics& out_;
  Substituter& subst_;
};

}  // namespace ductus::config
