#include "api/auth/password_rules.h"

#include <algorithm>
#include <string>

// The list's bytes, read in by the assembler from the path the build gives
// (api/CMakeLists.txt), so the file is data in the repository, not code.
asm(".pushsection .rodata\n"
    ".balign 16\n"
    "ductus_common_passwords:\n"
    ".incbin \"" DUCTUS_COMMON_PASSWORDS "\"\n"
    "ductus_common_passwords_end:\n"
    ".popsection\n");
extern "C" const char ductus_common_passwords[];
extern "C" const char ductus_common_passwords_end[];

namespace ductus::api {
namespace {

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool equalsIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return lower(x) == lower(y); });
}

bool containsIgnoringCase(std::string_view hay, std::string_view needle) {
  return std::search(hay.begin(), hay.end(), needle.begin(), needle.end(), [](char x, char y) {
           return lower(x) == lower(y);
         }) != hay.end();
}

bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

Error weak(std::string message) { return Error{std::move(message), ErrorKind::WeakPassword}; }

}  // namespace

std::string_view commonPasswordList() {
  return {ductus_common_passwords,
          static_cast<size_t>(ductus_common_passwords_end - ductus_common_passwords)};
}

bool isCommonPassword(std::string_view password) {
  // A scan of ~800 KB, only when a password is set: no table kept in memory.
  std::string_view rest = commonPasswordList();
  while (!rest.empty()) {
    size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (equalsIgnoringCase(line, password)) return true;
  }
  return false;
}

Status checkNewPassword(std::string_view password, std::string_view userName,
                        const AuthPolicy& policy) {
  if (password.size() < policy.minPasswordLength)
    return weak("the password must have at least " + std::to_string(policy.minPasswordLength) +
                " characters");
  if (password.size() > policy.maxPasswordLength)
    return weak("the password must have at most " + std::to_string(policy.maxPasswordLength) +
                " bytes");
  if (std::all_of(password.begin(), password.end(), isSpace))
    return weak("the password is only spaces");
  // One character over and over, spaces around it or not ("aaaaaaaaaaaa").
  std::string_view core = password;
  while (!core.empty() && isSpace(core.front())) core.remove_prefix(1);
  while (!core.empty() && isSpace(core.back())) core.remove_suffix(1);
  if (std::all_of(core.begin(), core.end(), [&](char c) { return c == core.front(); }))
    return weak("the password is one character repeated");
  // Held inside it too ("Alice2026!xyz" for alice); a name of one or two
  // characters only when it is the whole password, or few would pass.
  if (!userName.empty() && (equalsIgnoringCase(password, userName) ||
                            (userName.size() >= 3 && containsIgnoringCase(password, userName))))
    return weak("the password must not be or contain the user's name");
  if (isCommonPassword(password))
    return weak("the password is on the list of the 100,000 most used passwords");
  return {};
}

}  // namespace ductus::api
