#include "schema/migrations.h"

#include "common/sha256.h"

#include <algorithm>
#include <optional>
#include <cctype>
#include <set>
#include <sstream>

namespace ductus::store {
namespace {

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

// The value of a "-- Key: value" line, or nullopt if line isn't one.
std::optional<std::string> header(const std::string& line, const std::string& key) {
  std::string prefix = "-- " + key + ":";
  if (line.rfind(prefix, 0) != 0) return std::nullopt;
  return trim(line.substr(prefix.size()));
}

}  // namespace

Result<std::vector<Migration>> parseMigrations(const std::vector<MigrationFile>& files) {
  std::vector<Migration> out;
  std::set<int> versions;
  for (const auto& f : files) {
    const std::string& n = f.name;
    bool named = n.size() > 9 && std::all_of(n.begin(), n.begin() + 4, ::isdigit) && n[4] == '_' &&
                 n.substr(n.size() - 4) == ".sql";
    if (!named) return Error{"migration file " + n + " is not named NNNN_name.sql"};
    Migration m;
    m.version = std::stoi(n.substr(0, 4));
    m.name = n.substr(0, n.size() - 4);
    m.sql = f.text;
    m.checksum = sha256Hex(f.text);
    if (!versions.insert(m.version).second)
      return Error{"migration " + m.name + " repeats version " + std::to_string(m.version)};
    std::istringstream in(f.text);
    std::string first, second;
    std::getline(in, first);
    std::getline(in, second);
    auto upgrade = header(first, "Upgrade");
    auto heavy = header(second, "Heavy");
    if (!upgrade || upgrade->empty())
      return Error{"migration " + m.name + " does not start with a '-- Upgrade: ' line"};
    if (!heavy || heavy->empty())
      return Error{"migration " + m.name + " has no '-- Heavy: ' second line (write 'none')"};
    m.upgrade = *upgrade;
    if (*heavy != "none") {
      std::istringstream tables(*heavy);
      std::string t;
      while (std::getline(tables, t, ',')) {
        t = trim(t);
        if (!t.empty()) m.heavy.push_back(t);
      }
    }
    out.push_back(std::move(m));
  }
  std::sort(out.begin(), out.end(),
            [](const Migration& a, const Migration& b) { return a.version < b.version; });
  return out;
}

Result<std::vector<Migration>> embeddedMigrations() {
  return parseMigrations(embeddedMigrationFiles());
}

}  // namespace ductus::store
