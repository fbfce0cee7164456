#include "supervisor/cli/try_command.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "common/command_line.h"
#include "common/config/loader.h"
#include "supervisor/cli/start_checks.h"
#include "supervisor/cli/worker_session.h"

namespace ductus::supervisor {
namespace {

namespace fs = std::filesystem;

// What a file may hold: a message the engine would take (its default
// max_message_size).
constexpr uintmax_t kMaxFileBytes = config::kDefaultMaxMessageBytes;

struct TryArgs {
  std::string project;
  std::string interface;
  std::string file;
  std::string environment;
};

// Text for a terminal, each line indented: HL7 ends its segments with CR,
// which a terminal prints over the same line, so each segment gets a line.
void printIndented(const std::string& text, const char* indent) {
  std::string line;
  auto flush = [&] {
    std::printf("%s%s\n", indent, line.c_str());
    line.clear();
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') continue;  // CRLF: one break
    if (c == '\r' || c == '\n') flush();
    else line += c;
  }
  if (!line.empty()) flush();
}

std::string shortened(std::string s, size_t max = 200) {
  for (char& c : s)
    if (c == '\r' || c == '\n') c = ' ';
  if (s.size() > max) s = s.substr(0, max) + "...";
  return s;
}

// The mocks: each request is printed and answered with an empty, harmless
// result (mockedAnswer, as the engine's dry run answers), so a script runs
// to its end without reaching anything.
Result<std::string> mockService(const ServiceCall& c) {
  switch (c.kind) {
    case ServiceCall::Kind::DbQuery:
      std::printf("    db(\"%s\").query %s %s -> [] (mocked)\n", c.resource.c_str(),
                  shortened(c.sql).c_str(), shortened(c.paramsJson).c_str());
      return *mockedAnswer(c);
    case ServiceCall::Kind::DbExecute:
      std::printf("    db(\"%s\").execute %s %s -> { rowCount: 0 } (mocked)\n", c.resource.c_str(),
                  shortened(c.sql).c_str(), shortened(c.paramsJson).c_str());
      return *mockedAnswer(c);
    case ServiceCall::Kind::Fetch: {
      auto init = nlohmann::json::parse(c.initJson, nullptr, false);
      std::string method = init.is_object() ? init.value("method", "GET") : "GET";
      std::string body = init.is_object() ? init.value("body", "") : "";
      std::printf("    %s %s%s%s -> 200, empty body (mocked)\n", method.c_str(),
                  c.api.empty() ? "" : ("api(\"" + c.api + "\") ").c_str(), c.url.c_str(),
                  body.empty() ? "" : (" " + shortened(body)).c_str());
      return *mockedAnswer(c);
    }
    case ServiceCall::Kind::Env: {
      // As the engine: only DUCTUS_PUBLIC_* names, here from this shell.
      const char* v = c.name.starts_with("DUCTUS_PUBLIC_") ? std::getenv(c.name.c_str()) : nullptr;
      std::printf("    env(\"%s\") -> %s\n", c.name.c_str(), v ? "from this shell" : "refused");
      if (!v)
        return Error{"env(\"" + c.name + "\") is not a DUCTUS_PUBLIC_* variable set in this shell"};
      return nlohmann::json(std::string(v)).dump();
    }
    case ServiceCall::Kind::Secret:
      std::printf("    secret(\"%s\") -> \"(secret %s)\" (mocked)\n", c.name.c_str(), c.name.c_str());
      return *mockedAnswer(c);
  }
  return Error{"unknown service"};
}

int tryMessage(const TryArgs& args) {
  config::LoadOptions lo;
  lo.environment = args.environment.empty() ? config::defaultEnvironment() : args.environment;
  // Services are mocked and nothing connects or is sent: a secret need
  // only exist, and a variable (the database's, a destination's) need not
  // be set in this shell.
  lo.secretsByNameWithoutKey = true;
  lo.unsetEnvIsWarning = true;
  auto loaded = config::loadProjectWithDiagnostics(args.project, lo);
  if (!loaded.project) {
    for (auto& d : loaded.diagnostics) std::printf("%s\n", d.toString().c_str());
    std::printf("%s: the project has errors (`ductus validate` lists them)\n", args.project.c_str());
    return 1;
  }
  const config::Project& project = *loaded.project;
  const config::InterfaceConfig* iface = project.find(args.interface);
  if (!iface) {
    std::string names;
    for (auto& i : project.interfaces) names += (names.empty() ? "" : ", ") + i.name;
    std::fprintf(stderr, "ductus try: %s has no interface named %s (it has: %s)\n",
                 args.project.c_str(), args.interface.c_str(), names.c_str());
    return kUsageError;
  }
  std::error_code ec;
  auto size = fs::file_size(args.file, ec);
  if (ec) {
    std::fprintf(stderr, "ductus try: cannot read %s: %s\n", args.file.c_str(), ec.message().c_str());
    return kUsageError;
  }
  if (size > kMaxFileBytes) {
    std::fprintf(stderr, "ductus try: %s is %ju bytes, over the %ju a message may have\n",
                 args.file.c_str(), static_cast<uintmax_t>(size), kMaxFileBytes);
    return kUsageError;
  }
  std::ifstream in(args.file, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (!in) {
    std::fprintf(stderr, "ductus try: cannot read %s\n", args.file.c_str());
    return kUsageError;
  }
  std::string payload = bytes.str();

  InterfaceSpec spec = interfaceSpecOf(project, *iface);
  auto modules = readInterfaceModules(spec);
  if (!modules) {
    std::printf("%s: %s\n", iface->file.c_str(), modules.error().message.c_str());
    return 1;
  }
  WorkerSession::Options wo;
  wo.heapMb = project.engine.heapMb;
  auto worker = WorkerSession::start(wo);
  if (!worker) {
    std::printf("ductus try: cannot start a worker: %s\n", worker.error().message.c_str());
    return 1;
  }
  (*worker)->onService(mockService);
  (*worker)->onLog([](const std::string& level, const std::string& text) {
    std::printf("    log %s: %s\n", level.c_str(), shortened(text, 2000).c_str());
  });
  std::vector<uint32_t> ids;
  for (size_t k = 0; k < spec.functions.size(); ++k) ids.push_back(static_cast<uint32_t>(k + 1));
  if (auto s = (*worker)->load(1, spec, *modules, ids); !s) {
    std::printf("%s\n", loadErrorDiagnostic(project.root, s.error().message).toString().c_str());
    return 1;
  }

  auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
  bool failed = false;
  for (size_t k = 0; k < spec.functions.size(); ++k) {
    const proto::FunctionDef& f = spec.functions[k];
    if (iface->respondMode())
      std::printf("respond: %s()\n", f.exportName.c_str());
    else
      std::printf("%s: %s() \u2192 %s\n", f.destination.c_str(), f.exportName.c_str(),
                  iface->destinations[k].describe.c_str());
    std::fflush(stdout);
    CallMeta meta{1, now, f.destination, 0};
    Outcome o = (*worker)->invoke(ids[k], payload, meta, spec.timeout);
    switch (o.kind) {
      case Outcome::Kind::Output:
        std::printf("  output (%s):\n", f.outputFormat.c_str());
        printIndented(o.data, "    ");
        break;
      case Outcome::Kind::Filtered:
        std::printf("  filtered%s%s\n", o.data.empty() ? "" : ": ", o.data.c_str());
        break;
      case Outcome::Kind::Transient:
        failed = true;
        std::printf("  transient error (the engine would wait and retry):\n");
        printIndented(o.data, "    ");
        break;
      default:
        failed = true;
        std::printf("  error (the engine would quarantine the message):\n");
        printIndented(o.data, "    ");
        break;
    }
    std::fflush(stdout);
  }
  return failed ? 1 : 0;
}

}  // namespace

void addTryCommand(CLI::App& ductus, int& exitCode) {
  auto args = std::make_shared<TryArgs>();
  auto* cmd = ductus.add_subcommand(
      "try", "run one message through an interface's functions with mocked services");
  args->project = ".";
  cmd->add_option("PROJECT", args->project, "the project folder")->required()->type_name("");
  cmd->add_option("INTERFACE", args->interface, "the interface's name")->required()->type_name("");
  cmd->add_option("FILE", args->file, "one message, as the source would store it")
      ->required()
      ->type_name("");
  addEnvironmentOption(*cmd, args->environment);
  cmd->footer(
      "Loads the interface's code in a confined worker, as the engine does, and\n"
      "calls each destination's function (or the respond function) on FILE's bytes:\n"
      "one HL7 message, JSON document, text, or for a CSV source with split: records\n"
      "the header line and one record. db(), fetch(), api() and secret() are mocked\n"
      "(empty answers, each printed); env() reads DUCTUS_PUBLIC_* from this shell.\n"
      "Prints each destination's output (HL7 one segment a line), `filtered`, or the\n"
      "error. Exits 0 when every function returned, 1 when one threw, ran away or\n"
      "the code does not load. Needs no database; sends nothing.");
  cmd->callback([args, &exitCode] { exitCode = tryMessage(*args); });
}

}  // namespace ductus::supervisor
