// secrets/<env>.json: named values encrypted at rest with AES-256-GCM.
//
// The file is JSON so it diffs by name in a repository:
//   { "format": "ductus-secrets-1",
//     "secrets": { "LAB_TOKEN": "<base64 of nonce(12) | ciphertext | tag(16)>" } }
// Each value is sealed with a fresh random nonce on every write and with its
// name as additional data, so a value moved under another name fails to open.
// A wrong key fails the GCM tag check: an error, never garbage.
//
// The key is 32 bytes, written as 64 hex digits or as base64 (44 characters),
// taken from DUCTUS_SECRETS_KEY or else from the key file ductus.yaml names
// (`secrets: { key_file: ... }`). Values never reach a log or a message.
#pragma once

#include <array>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace ductus::config {

struct SecretsKey {
  std::array<unsigned char, 32> bytes{};
  ~SecretsKey();
};

// 64 hex digits or base64 of exactly 32 bytes; surrounding whitespace ignored.
Result<SecretsKey> parseSecretsKey(std::string_view text);

// DUCTUS_SECRETS_KEY when set (envValue non-null and non-empty), else the
// key file's content; an error saying where a key can come from otherwise.
Result<SecretsKey> findSecretsKey(const char* envValue, const std::filesystem::path& keyFile);

// A valid secret name: a letter or _, then letters, digits or _, at most 128.
bool isValidSecretName(std::string_view name);

class SecretsFile {
 public:
  // Opens and decrypts every value (a missing file is an empty store), so a
  // wrong key is found here, before anything is changed.
  static Result<SecretsFile> open(const std::filesystem::path& file, const SecretsKey& key);
  // The names in the file without opening a value (names are kept in
  // clear, so `ductus validate` needs no key); empty for a missing file.
  static Result<std::vector<std::string>> namesIn(const std::filesystem::path& file);

  SecretsFile(SecretsFile&&) = default;
  SecretsFile& operator=(SecretsFile&&) = default;
  ~SecretsFile();

  std::vector<std::string> names() const;
  const std::string* find(const std::string& name) const;
  void set(const std::string& name, std::string value);
  bool remove(const std::string& name);

  // Seals every value with a fresh nonce and replaces the file atomically
  // (written beside it with mode 0600, then renamed).
  Status save() const;

 private:
  SecretsFile(std::filesystem::path file, const SecretsKey& key) : file_(std::move(file)), key_(key.bytes) {}
  std::filesystem::path file_;
  std::array<unsigned char, 32> key_;
  std::map<std::string, std::string> values_;
};

}  // namespace ductus::config
