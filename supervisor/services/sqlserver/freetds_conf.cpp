#include "supervisor/services/sqlserver/freetds_conf.h"

#include <stdlib.h>

#include <filesystem>
#include <map>
#include <mutex>

#include "common/file_text.h"
#include "supervisor/services/sqlserver/odbc_connection.h"

namespace ductus::supervisor::services::sqlserver {
namespace {

// The process's file, in a folder of its own, removed when the process
// ends normally (a killed engine leaves a folder of a few hundred bytes
// with no secret in it).
struct ConfFile {
  std::filesystem::path dir;
  std::filesystem::path file;
  std::mutex mutex;
  std::map<std::string, std::pair<std::string, std::string>> sections;  // key → name, text
  ~ConfFile() {
    std::error_code ec;
    if (!dir.empty()) std::filesystem::remove_all(dir, ec);
  }
};

ConfFile& conf() {
  static ConfFile c;
  return c;
}

// A freetds.conf value is the rest of its line; the parser also ends it
// at ; or # (comments) and trims spaces.
Status confValue(const std::string& what, const std::string& v) {
  if (v.empty()) return Error{what + " is empty", ErrorKind::Invalid};
  for (unsigned char c : v)
    if (c < 0x20 || c == 0x7f || c == ';' || c == '#' || c == '[' || c == ']')
      return Error{
          what + " \"" + v +
              "\" has a character freetds.conf cannot hold (a control character, ; # [ or ])",
          ErrorKind::Invalid};
  if (v.front() == ' ' || v.back() == ' ')
    return Error{what + " \"" + v + "\" starts or ends with a space", ErrorKind::Invalid};
  return {};
}

}  // namespace

Status FreetdsConf::prepare() {
  static std::once_flag once;
  static Status made;
  std::call_once(once, [] {
    const char* tmp = getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/ductus-freetds.XXXXXX";
    if (!mkdtemp(pattern.data())) {
      made = Error::fromErrno("cannot make a folder for freetds.conf (" + pattern + ")");
      return;
    }
    ConfFile& c = conf();
    c.dir = pattern;
    c.file = c.dir / "freetds.conf";
    auto written = replaceFile(c.file, "# Written by ductus for its SQL Server connections.\n");
    if (!written) {
      made = written.error();
      return;
    }
    setenv("FREETDSCONF", c.file.c_str(), 1);
  });
  return made;
}

Result<std::string> FreetdsConf::sectionText(const std::string& name, const ConnectSettings& s) {
  if (auto ok = confValue("the SQL Server host", s.url.host); !ok) return ok.error();
  std::string text = "[" + name + "]\n";
  text += "\thost = " + s.url.host + "\n";
  text += "\tport = " + std::to_string(s.url.port) + "\n";
  text += "\ttds version = 7.4\n";
  text += "\tencryption = require\n";
  if (s.trustServerCertificate) {
    text += "\tcheck certificate hostname = no\n";
  } else {
    std::string ca = s.caFile.empty() ? "system" : s.caFile.string();
    if (auto ok = confValue("the CA file", ca); !ok) return ok.error();
    text += "\tca file = " + ca + "\n";
    text += "\tcheck certificate hostname = yes\n";
  }
  return text;
}

Result<std::string> FreetdsConf::sectionFor(const ConnectSettings& s) {
  if (auto ready = prepare(); !ready) return ready.error();
  ConfFile& c = conf();
  std::string key = s.url.host + "\n" + std::to_string(s.url.port) + "\n" +
                    (s.trustServerCertificate ? std::string("trust") : "ca:" + s.caFile.string());
  std::lock_guard lock(c.mutex);
  auto found = c.sections.find(key);
  if (found != c.sections.end()) return found->second.first;
  std::string name = "ductus-" + std::to_string(c.sections.size() + 1);
  auto text = sectionText(name, s);
  if (!text) return text.error();
  std::string all = "# Written by ductus for its SQL Server connections.\n";
  for (const auto& [k, section] : c.sections) all += section.second;
  all += *text;
  if (auto written = replaceFile(c.file, all); !written) return written.error();
  c.sections.emplace(key, std::make_pair(name, std::move(*text)));
  return name;
}

}  // namespace ductus::supervisor::services::sqlserver
