#include "common/config/secrets.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <cctype>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/base64.h"
#include "common/file_text.h"

namespace ductus::config {
namespace {

constexpr const char* kFormat = "ductus-secrets-1";
constexpr size_t kNonceBytes = 12;
constexpr size_t kTagBytes = 16;
// A secrets file is a handful of tokens and passwords; anything bigger is
// not one, and reading it whole must stay cheap.
constexpr std::uintmax_t kMaxFileBytes = 4u << 20;

struct CipherCtxFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};
using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, CipherCtxFree>;

std::string aadFor(const std::string& name) { return std::string(kFormat) + ":" + name; }

Result<std::string> seal(const std::array<unsigned char, 32>& key, const std::string& name,
                         const std::string& plain) {
  unsigned char nonce[kNonceBytes];
  if (RAND_bytes(nonce, sizeof nonce) != 1) return Error{"RAND_bytes() failed for a secret's nonce"};
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  std::string aad = aadFor(name);
  std::string out(reinterpret_cast<char*>(nonce), kNonceBytes);
  out.resize(kNonceBytes + plain.size() + kTagBytes);
  auto* dst = reinterpret_cast<unsigned char*>(out.data()) + kNonceBytes;
  int len = 0, fin = 0;
  if (!ctx || EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key.data(), nonce) != 1 ||
      EVP_EncryptUpdate(ctx.get(), nullptr, &len, reinterpret_cast<const unsigned char*>(aad.data()),
                        static_cast<int>(aad.size())) != 1 ||
      EVP_EncryptUpdate(ctx.get(), dst, &len, reinterpret_cast<const unsigned char*>(plain.data()),
                        static_cast<int>(plain.size())) != 1 ||
      EVP_EncryptFinal_ex(ctx.get(), dst + len, &fin) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTagBytes, dst + plain.size()) != 1)
    return Error{"AES-256-GCM encryption failed for secret `" + name + "`"};
  return base64Encode(out);
}

Result<std::string> open(const std::array<unsigned char, 32>& key, const std::string& name,
                         std::string_view sealedText, const std::string& file) {
  auto sealed = base64Decode(sealedText);
  if (!sealed || sealed->size() < kNonceBytes + kTagBytes)
    return Error{file + ": the value of `" + name + "` is damaged (not a sealed secret)"};
  const auto* bytes = reinterpret_cast<const unsigned char*>(sealed->data());
  size_t cipherLen = sealed->size() - kNonceBytes - kTagBytes;
  std::string plain(cipherLen, '\0');
  auto* dst = reinterpret_cast<unsigned char*>(plain.data());
  std::string aad = aadFor(name);
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  int len = 0, fin = 0;
  std::array<unsigned char, kTagBytes> tag;
  std::copy(bytes + kNonceBytes + cipherLen, bytes + sealed->size(), tag.begin());
  bool ok = ctx &&
            EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key.data(), bytes) == 1 &&
            EVP_DecryptUpdate(ctx.get(), nullptr, &len,
                              reinterpret_cast<const unsigned char*>(aad.data()),
                              static_cast<int>(aad.size())) == 1 &&
            EVP_DecryptUpdate(ctx.get(), dst, &len, bytes + kNonceBytes,
                              static_cast<int>(cipherLen)) == 1 &&
            EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTagBytes, tag.data()) == 1 &&
            EVP_DecryptFinal_ex(ctx.get(), dst + len, &fin) == 1;
  if (!ok) {
    OPENSSL_cleanse(plain.data(), plain.size());
    return Error{file + ": this key does not open secret `" + name +
                 "` (wrong DUCTUS_SECRETS_KEY or key file, or the file was altered)"};
  }
  return plain;
}

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

SecretsKey::~SecretsKey() { OPENSSL_cleanse(bytes.data(), bytes.size()); }

Result<SecretsKey> parseSecretsKey(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  SecretsKey key;
  if (text.size() == 64) {
    bool hex = true;
    for (size_t i = 0; i < 32 && hex; ++i) {
      int hi = hexValue(text[2 * i]), lo = hexValue(text[2 * i + 1]);
      if (hi < 0 || lo < 0) hex = false;
      else key.bytes[i] = static_cast<unsigned char>(hi * 16 + lo);
    }
    if (hex) return key;
  }
  auto decoded = base64Decode(text);
  if (decoded && decoded->size() == 32) {
    std::copy(decoded->begin(), decoded->end(), key.bytes.begin());
    OPENSSL_cleanse(decoded->data(), decoded->size());
    return key;
  }
  return Error{"the secrets key must be 32 bytes written as 64 hex digits or as base64 "
               "(e.g. `openssl rand -hex 32`)"};
}

Result<SecretsKey> findSecretsKey(const char* envValue, const std::filesystem::path& keyFile) {
  if (envValue && *envValue) {
    auto key = parseSecretsKey(envValue);
    if (!key) return Error{"DUCTUS_SECRETS_KEY: " + key.error().message};
    return key;
  }
  if (keyFile.empty())
    return Error{"no secrets key: set DUCTUS_SECRETS_KEY or name a key file in ductus.yaml "
                 "(secrets: { key_file: ... })"};
  auto text = readFileBounded(keyFile, 4096);
  if (!text) return Error{"secrets key file " + text.error().message};
  auto key = parseSecretsKey(*text);
  OPENSSL_cleanse(text->data(), text->size());
  if (!key) return Error{keyFile.string() + ": " + key.error().message};
  return key;
}

bool isValidSecretName(std::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  if (std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

namespace {

// The file's sealed entries by name; an empty map for a missing file.
Result<std::map<std::string, std::string>> readSealed(const std::filesystem::path& file) {
  std::map<std::string, std::string> out;
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return out;
  auto text = readFileBounded(file, kMaxFileBytes);
  if (!text) return text.error();
  auto doc = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || doc.value("format", "") != kFormat ||
      !doc.contains("secrets") || !doc["secrets"].is_object())
    return Error{file.string() + ": not a ductus secrets file (expected {\"format\": \"" + kFormat +
                 "\", \"secrets\": {...}})"};
  for (auto& [name, sealed] : doc["secrets"].items()) {
    if (!isValidSecretName(name) || !sealed.is_string())
      return Error{file.string() + ": entry `" + name + "` is not a sealed secret"};
    out[name] = sealed.get<std::string>();
  }
  return out;
}

}  // namespace

Result<SecretsFile> SecretsFile::open(const std::filesystem::path& file, const SecretsKey& key) {
  SecretsFile store(file, key);
  auto sealed = readSealed(file);
  if (!sealed) return sealed.error();
  for (auto& [name, text] : *sealed) {
    auto plain = config::open(store.key_, name, text, file.string());
    if (!plain) return plain.error();
    store.values_[name] = std::move(*plain);
  }
  return store;
}

Result<std::vector<std::string>> SecretsFile::namesIn(const std::filesystem::path& file) {
  auto sealed = readSealed(file);
  if (!sealed) return sealed.error();
  std::vector<std::string> out;
  for (auto& [name, text] : *sealed) out.push_back(name);
  return out;
}

SecretsFile::~SecretsFile() {
  OPENSSL_cleanse(key_.data(), key_.size());
  for (auto& [name, value] : values_) OPENSSL_cleanse(value.data(), value.size());
}

std::vector<std::string> SecretsFile::names() const {
  std::vector<std::string> out;
  for (auto& [name, value] : values_) out.push_back(name);
  return out;
}

const std::string* SecretsFile::find(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

void SecretsFile::set(const std::string& name, std::string value) {
  auto& slot = values_[name];
  OPENSSL_cleanse(slot.data(), slot.size());
  slot = std::move(value);
}

bool SecretsFile::remove(const std::string& name) {
  auto it = values_.find(name);
  if (it == values_.end()) return false;
  OPENSSL_cleanse(it->second.data(), it->second.size());
  values_.erase(it);
  return true;
}

Status SecretsFile::save() const {
  nlohmann::json doc = {{"format", kFormat}, {"secrets", nlohmann::json::object()}};
  for (auto& [name, value] : values_) {
    auto sealed = seal(key_, name, value);
    if (!sealed) return sealed.error();
    doc["secrets"][name] = *sealed;
  }
  std::string text = doc.dump(2) + "\n";
  std::error_code ec;
  if (file_.has_parent_path()) std::filesystem::create_directories(file_.parent_path(), ec);
  if (ec) return Error{"cannot create " + file_.parent_path().string() + ": " + ec.message()};
  return replaceFile(file_, text);
}

}  // namespace ductus::config
