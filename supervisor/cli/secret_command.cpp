#include "supervisor/cli/secret_command.h"

#include <openssl/crypto.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/config/loader.h"
#include "common/config/secrets.h"

namespace ductus::supervisor {
namespace {

namespace fs = std::filesystem;
using namespace ductus::config;

// A secret is a token, password or PEM text; 1 MB is far past any of them.
constexpr size_t kMaxValueBytes = 1u << 20;

void usage(FILE* out) {
  std::fputs(
      "usage: ductus secret set NAME   [--env ENV] [--project DIR]   (value from stdin)\n"
      "       ductus secret list       [--env ENV] [--project DIR]   (names only)\n"
      "       ductus secret rm NAME    [--env ENV] [--project DIR]\n\n"
      "Edits DIR/secrets/ENV.json (DIR defaults to the current folder, ENV to\n"
      "$DUCTUS_ENV, else prod), encrypted with AES-256-GCM. The key is 32 bytes as\n"
      "64 hex digits or base64, from DUCTUS_SECRETS_KEY or the file named by\n"
      "ductus.yaml's secrets.key_file (make one with `openssl rand -hex 32`).\n"
      "Interface files read a secret as ${secret:NAME}, code as secret(\"NAME\").\n",
      out);
}

Result<std::string> readValue() {
  std::string value;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(STDIN_FILENO, buf, sizeof buf)) != 0) {
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error::fromErrno("cannot read the secret from stdin");
    }
    value.append(buf, static_cast<size_t>(n));
    if (value.size() > kMaxValueBytes) {
      OPENSSL_cleanse(value.data(), value.size());
      return Error{"the value is larger than 1 MB"};
    }
  }
  OPENSSL_cleanse(buf, sizeof buf);
  // `echo value | ductus secret set` adds one newline that is not the value's.
  if (!value.empty() && value.back() == '\n') value.pop_back();
  if (!value.empty() && value.back() == '\r') value.pop_back();
  return value;
}

}  // namespace

int secretCommand(int argc, char** argv) {
  std::string action, name, env = defaultEnvironment();
  fs::path project = ".";
  for (int i = 2; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--env" && i + 1 < argc) env = argv[++i];
    else if (a == "--project" && i + 1 < argc) project = argv[++i];
    else if (a == "--help" || a == "-h") {
      usage(stdout);
      return 0;
    } else if (!a.empty() && a[0] != '-' && action.empty()) action = a;
    else if (!a.empty() && a[0] != '-' && name.empty()) name = a;
    else {
      std::fprintf(stderr, "ductus secret: unexpected argument '%s'\n", argv[i]);
      return 2;
    }
  }
  bool needsName = action == "set" || action == "rm";
  if (!(needsName || action == "list") || needsName == name.empty()) {
    usage(stderr);
    return 2;
  }
  if (needsName && !isValidSecretName(name)) {
    std::fprintf(stderr, "ductus secret: `%s` is not a valid name (a letter or _, then letters, digits or _)\n",
                 name.c_str());
    return 2;
  }
  if (env.empty() || env.find_first_of("/\\.") != std::string::npos) {
    std::fprintf(stderr, "ductus secret: environment `%s` is not a plain name\n", env.c_str());
    return 2;
  }

  auto keyFile = secretsKeyFileOf(project);
  if (!keyFile) {
    std::fprintf(stderr, "ductus secret: %s\n", keyFile.error().message.c_str());
    return 1;
  }
  auto key = findSecretsKey(std::getenv("DUCTUS_SECRETS_KEY"), *keyFile);
  if (!key) {
    std::fprintf(stderr, "ductus secret: %s\n", key.error().message.c_str());
    return 1;
  }
  fs::path file = project / "secrets" / (env + ".json");
  auto store = SecretsFile::open(file, *key);
  if (!store) {
    std::fprintf(stderr, "ductus secret: %s\n", store.error().message.c_str());
    return 1;
  }

  if (action == "list") {
    for (auto& n : store->names()) std::puts(n.c_str());
    return 0;
  }
  if (action == "rm") {
    if (!store->remove(name)) {
      std::fprintf(stderr, "ductus secret: `%s` is not in %s\n", name.c_str(), file.c_str());
      return 1;
    }
  } else {
    auto value = readValue();
    if (!value) {
      std::fprintf(stderr, "ductus secret: %s\n", value.error().message.c_str());
      return 1;
    }
    store->set(name, std::move(*value));
  }
  if (auto s = store->save(); !s) {
    std::fprintf(stderr, "ductus secret: %s\n", s.error().message.c_str());
    return 1;
  }
  std::fprintf(stderr, "%s %s in %s\n", action == "set" ? "saved" : "removed", name.c_str(),
               file.c_str());
  return 0;
}

}  // namespace ductus::supervisor
