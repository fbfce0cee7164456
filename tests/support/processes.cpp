#include "tests/support/processes.h"

#include "tests/support/test_env.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>
#include <utility>

namespace ductus::test {
namespace {

// (pid, parent) of every process now.
std::vector<std::pair<pid_t, pid_t>> processTable() {
  std::vector<std::pair<pid_t, pid_t>> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    std::string name = e.path().filename();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string stat = fileText(e.path() / "stat");  // "" for a process already gone
    // The name in parentheses may hold spaces and parentheses: the fields
    // after it start after the last ')'.
    auto close = stat.rfind(')');
    if (close == std::string::npos || close + 2 > stat.size()) continue;
    std::istringstream rest(stat.substr(close + 2));
    char state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    out.emplace_back(static_cast<pid_t>(std::atoi(name.c_str())), ppid);
  }
  return out;
}

}  // namespace

std::vector<pid_t> childrenOf(pid_t parent) {
  std::vector<pid_t> out;
  for (auto [pid, ppid] : processTable())
    if (ppid == parent) out.push_back(pid);
  return out;
}

std::vector<pid_t> descendantsOf(pid_t pid) {
  auto table = processTable();
  std::set<pid_t> found{pid};
  for (bool grew = true; grew;) {
    grew = false;
    for (auto [p, pp] : table)
      if (found.count(pp) && found.insert(p).second) grew = true;
  }
  found.erase(pid);
  return {found.begin(), found.end()};
}

}  // namespace ductus::test
