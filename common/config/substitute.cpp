#include "common/config/substitute.h"

#include <algorithm>

namespace ductus::config {

Substituter::Substituter(EnvLookup env, std::filesystem::path secretsFile,
                         std::optional<std::string> keyText, std::filesystem::path keyFile)
    : env_(std::move(env)),
      secretsFile_(std::move(secretsFile)),
      keyText_(std::move(keyText)),
      keyFile_(std::move(keyFile)) {}

std::optional<std::string> Substituter::secret(const std::string& name, std::string& error) {
  if (!secretsTried_) {
    secretsTried_ = true;
    std::error_code ec;
    if (!std::filesystem::exists(secretsFile_, ec)) {
      secretsError_ = secretsFile_.string() + " does not exist (create it with `ductus secret set`)";
    } else {
      auto key = findSecretsKey(keyText_ ? keyText_->c_str() : nullptr, keyFile_);
      if (!key && byNameWithoutKey_) {
        auto names = SecretsFile::namesIn(secretsFile_);
        if (names) byName_ = std::move(*names);
        else secretsError_ = names.error().message;
      } else if (!key) {
        secretsError_ = key.error().message;
      } else {
        auto file = SecretsFile::open(secretsFile_, *key);
        if (file) secrets_.emplace(std::move(*file));
        else secretsError_ = file.error().message;
      }
    }
  }
  if (byName_) {
    if (std::find(byName_->begin(), byName_->end(), name) != byName_->end()) return std::string();
    error = "secret `" + name + "` is not in " + secretsFile_.string() +
            " (add it with `ductus secret set " + name + "`)";
    return std::nullopt;
  }
  if (!secrets_) {
    error = "secret `" + name + "` cannot be read: " + secretsError_;
    return std::nullopt;
  }
  if (const std::string* v = secrets_->find(name)) return *v;
  error = "secret `" + name + "` is not in " + secretsFile_.string() + " (add it with `ductus secret set " +
          name + "`)";
  return std::nullopt;
}

Substituter::Outcome Substituter::apply(std::string_view text) {
  Outcome out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t open = text.find("${", pos);
    if (open == text.npos) {
      out.value.append(text.substr(pos));
      break;
    }
    out.value.append(text.substr(pos, open - pos));
    size_t close = text.find('}', open);
    if (close == text.npos) {
      out.errors.push_back("unterminated `${` (expected ${env:NAME} or ${secret:NAME})");
      return out;
    }
    std::string_view ref = text.substr(open + 2, close - open - 2);
    size_t colon = ref.find(':');
    std::string kind(ref.substr(0, colon));
    std::string name(colon == ref.npos ? "" : ref.substr(colon + 1));
    out.substituted = true;
    if (colon == ref.npos || (kind != "env" && kind != "secret") || !isValidSecretName(name)) {
      out.errors.push_back("`${" + std::string(ref) +
                           "}` is not a reference (expected ${env:NAME} or ${secret:NAME})");
    } else if (kind == "env") {
      auto v = env_ ? env_(name) : std::nullopt;
      if (v) {
        out.value.append(*v);
      } else if (unsetEnvWarns_) {
        out.unknown = true;
        out.warnings.push_back("environment variable `" + name +
                               "` is not set here (`ductus run` refuses to start without it)");
      } else {
        out.errors.push_back("environment variable `" + name + "` is not set");
      }
    } else {
      std::string error;
      auto v = secret(name, error);
      if (v) out.value.append(*v);
      else out.errors.push_back(std::move(error));
      if (v && byName_) out.unknown = true;
    }
    pos = close + 1;
  }
  return out;
}

Substituter Substituter::sibling() const {
  Substituter s(env_, secretsFile_, keyText_, keyFile_);
  s.byNameWithoutKey_ = byNameWithoutKey_;
  s.unsetEnvWarns_ = unsetEnvWarns_;
  return s;
}

void Substituter::absorb(Substituter&& other) {
  for (auto& w : other.warnings_) warnings_.push_back(std::move(w));
  if (!byName_ && other.byName_) byName_ = std::move(other.byName_);
}

}  // namespace ductus::config
