#include "supervisor/cli/secret_command.h"

#include <openssl/crypto.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "common/command_line.h"
#include "common/config/loader.h"
#include "common/config/secrets.h"

namespace ductus::supervisor {
namespace {

namespace fs = std::filesystem;
using namespace ductus::config;

// A secret is a token, password or PEM text; 1 MB is far past any of them.
constexpr size_t kMaxValueBytes = 1u << 20;

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

struct SecretArgs {
  std::string action;  // set, list or rm
  std::string name;
  std::string project;
  std::string env;
};

int secret(const SecretArgs& args) {
  const std::string& action = args.action;
  const std::string& name = args.name;
  const std::string& env = args.env;
  const fs::path project = args.project;
  bool needsName = action != "list";
  if (needsName && !isValidSecretName(name)) {
    std::fprintf(stderr, "ductus secret: `%s` is not a valid name (a letter or _, then letters, digits or _)\n",
                 name.c_str());
    return kUsageError;
  }
  if (env.empty() || env.find_first_of("/\\.") != std::string::npos) {
    std::fprintf(stderr, "ductus secret: environment `%s` is not a plain name\n", env.c_str());
    return kUsageError;
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

}  // namespace

void addSecretCommand(CLI::App& ductus, int& exitCode) {
  auto* cmd =
      ductus.add_subcommand("secret", "set, list or remove the project's encrypted secrets");
  cmd->require_subcommand(1);
  // Before the actions are added: they copy it.
  cmd->footer(
      "Edits PROJECT/secrets/ENV.json, encrypted with AES-256-GCM. The key is 32 bytes\n"
      "as 64 hex digits or base64, from DUCTUS_SECRETS_KEY, else the file named by\n"
      "ductus.yaml's secrets.key_file (make one with `openssl rand -hex 32`); it is\n"
      "never taken on the command line. Interface files read a secret as\n"
      "${secret:NAME}, code as secret(\"NAME\").");

  struct Action {
    const char* name;
    const char* description;
    bool takesName;
  };
  for (const Action& a :
       {Action{"set", "store NAME's value, read from stdin (never printed)", true},
        Action{"list", "print the secrets' names, one a line (never values)", false},
        Action{"rm", "remove NAME", true}}) {
    auto args = std::make_shared<SecretArgs>();
    args->action = a.name;
    auto* sub = cmd->add_subcommand(a.name, a.description);
    if (a.takesName)
      sub->add_option("NAME", args->name,
                      "the secret's name: a letter or _, then letters, digits or _")
          ->required()
          ->type_name("");
    addProjectArgument(*sub, args->project);
    addEnvironmentOption(*sub, args->env);
    sub->callback([args, &exitCode] { exitCode = secret(*args); });
  }
}

}  // namespace ductus::supervisor
