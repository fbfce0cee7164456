// ${env:NAME} and ${secret:NAME} in project files.
//
// Allowed only where a deployment differs or a credential sits: the engine's
// database URL; every string in resources.yaml (URLs, headers, credentials);
// destination hosts, URLs and headers; SFTP hosts, users, passwords and
// private keys.
// Anywhere else a `${` is refused, so a template can't silently become a
// literal file name or path.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/config/diagnostic.h"
#include "common/config/secrets.h"

namespace ductus::config {

class Substituter {
 public:
  using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

  // secretsFile: secrets/<env>.json; opened on the first ${secret:} only,
  // with the key from keyText (DUCTUS_SECRETS_KEY) or else keyFile.
  Substituter(EnvLookup env, std::filesystem::path secretsFile, std::optional<std::string> keyText,
               std::filesystem::path keyFile);

  struct Outcome {
    std::string value;
    bool substituted = false;         // the value holds something not written in the file
    bool unknown = false;  // a secret checked by name only, an unset variable: no value
    std::vector<std::string> errors;    // one per missing or malformed reference
    std::vector<std::string> warnings;  // one per unset variable, when that is no error
  };
  Outcome apply(std::string_view text);

  // Whether text holds a `${`: the sign of a reference where none is allowed.
  static bool hasReference(std::string_view text) { return text.find("${") != text.npos; }

  // The key file can only be known once ductus.yaml is read.
  void setKeyFile(std::filesystem::path keyFile) { keyFile_ = std::move(keyFile); }

  // With no key to be found, ${secret:NAME} is checked against the names in
  // the secrets file (kept in clear) and its value left unknown, instead of
  // being an error: `ductus validate` in CI, without production keys.
  void checkSecretsByNameWithoutKey() { byNameWithoutKey_ = true; }
  // Whether some secret was checked by name only.
  bool checkedByNameOnly() const { return byName_.has_value(); }

  // An unset ${env:NAME} is a warning and its value unknown, instead of an
  // error: `ductus validate` in CI, where production's variables are not
  // set, and `ductus try`, which connects and sends nothing. A project
  // loaded so is for checking, never for running.
  void warnOfUnsetEnv() { unsetEnvWarns_ = true; }
  // The warnings, placed where the references are (YamlReader adds them).
  Diagnostics& warnings() { return warnings_; }

  // One with the same sources and settings, for another thread: it opens
  // the secrets file itself if it meets a ${secret:}.
  Substituter sibling() const;
  // What a sibling found: its warnings, and whether it checked secrets by
  // name only.
  void absorb(Substituter&& other);

 private:
  std::optional<std::string> secret(const std::string& name, std::string& error);

  EnvLookup env_;
  std::filesystem::path secretsFile_;
  std::optional<std::string> keyText_;
  std::filesystem::path keyFile_;
  bool secretsTried_ = false;
  std::optional<SecretsFile> secrets_;
  std::string secretsError_;
  bool byNameWithoutKey_ = false;
  std::optional<std::vector<std::string>> byName_;  // the names, when there was no key
  bool unsetEnvWarns_ = false;
  Diagnostics warnings_;
};

}  // namespace ductus::config
