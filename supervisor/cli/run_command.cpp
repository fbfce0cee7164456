#include "supervisor/cli/run_command.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "api/ui/ui_assets.h"
#include "common/command_line.h"
#include "common/config/address.h"
#include "common/config/duration.h"
#include "common/config/loader.h"
#include "common/log.h"
#include "common/partition.h"
#include "ctl/client.h"
#include "ctl/protocol.h"
#include "supervisor/cli/dev_admin.h"
#include "supervisor/cli/dev_postgres.h"
#include "supervisor/cli/start_checks.h"
#include "supervisor/engine.h"
#include "supervisor/engine_process.h"

namespace ductus::supervisor {
namespace fs = std::filesystem;
namespace {

struct RunArgs {
  std::string project;
  std::string database;
  std::chrono::milliseconds stopTimeout{30'000};
  LogFormat logFormat = LogFormat::Text;
  spdlog::level::level_enum logLevel = spdlog::level::info;
  std::string environment;
  bool fresh = false;
  std::string dataDir;
  std::string apiListen;  // --api-listen: "" = ductus.yaml's, "off", or HOST:PORT
  std::string control;    // --control: "" = ctl::defaultControlPath(), best effort
  bool standby = false;   // run --standby
};

// The options run and dev both take. Each command has its own RunArgs:
// CLI11 fills options from the environment in every command, given or not.
void addEngineOptions(CLI::App& command, RunArgs& args) {
  command
      .add_option_function<std::string>(
          "--stop-timeout",
          [&args](const std::string& text) { args.stopTimeout = *config::parseDuration(text); },
          "how long a clean stop may take before it exits anyway")
      ->type_name("DURATION")
      ->default_str("30s")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            return config::parseDuration(text)
                       ? ""
                       : "expected a duration such as 30s, got `" + text + "`";
          },
          ""));
  command
      .add_option_function<std::string>(
          "--log-format",
          [&args](const std::string& text) { parseLogFormat(text, args.logFormat); },
          "log lines as text, or as json (one object a line)")
      ->type_name("FORMAT")
      ->default_str("text")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            LogFormat unused;
            return parseLogFormat(text, unused) ? "" : "expected text or json, got `" + text + "`";
          },
          ""));
  command
      .add_option_function<std::string>(
          "--log-level",
          [&args](const std::string& text) { parseLogLevel(text, args.logLevel); },
          "what to log: debug (and a line per message), info, warn or error")
      ->type_name("LEVEL")
      ->envname("DUCTUS_LOG_LEVEL")
      ->default_str("info")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            spdlog::level::level_enum unused;
            if (parseLogLevel(text, unused)) return "";
            // CLI11 names the option even when the value came from the variable.
            const char* env = std::getenv("DUCTUS_LOG_LEVEL");
            return "expected debug, info, warn or error, got `" + text + "`" +
                   (env && text == env ? " (from DUCTUS_LOG_LEVEL)" : "");
          },
          ""));
  addEnvironmentOption(command, args.environment);
  command
      .add_option("--control", args.control,
                  "the socket ductusctl talks to (default: see ductusctl --help)")
      ->type_name("PATH");
  command
      .add_option("--api-listen", args.apiListen,
                  "where the REST API listens, or off; overrides ductus.yaml's api.listen")
      ->type_name("HOST:PORT|off")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            return text == "off" || config::parseHostPort(text)
                       ? ""
                       : "expected HOST:PORT (127.0.0.1:7700) or off, got `" + text + "`";
          },
          ""));
}

// --api-listen over ductus.yaml's api.listen.
void applyApiListen(const RunArgs& args, config::Project& project) {
  if (args.apiListen.empty()) return;
  project.engine.apiEnabled = args.apiListen != "off";
  if (auto hp = config::parseHostPort(args.apiListen)) project.engine.apiListen = *hp;
}

// ductus dev's banner, once started: where it listens, the console, the
// database, and its admin's sign-in when there is one.
void printDevBanner(const Engine& engine, const std::string& database,
                    const std::optional<DevAdmin>& devAdmin) {
  std::printf("\nductus dev is running.\n");
  for (auto& l : engine.listeners())
    if (l.rfind("api ", 0) != 0) std::printf("  %s\n", l.c_str());
  std::string api = engine.apiAddress();
  if (!api.empty())
    std::printf("  console: http://%s/%s\n", api.c_str(),
                api::embeddedUi().built
                    ? ""
                    : " (not in this build: scripts/build-ui.sh, then build again)");
  std::printf("  api: %s\n  database: %s\nCtrl-C stops it.\n\n",
              api.empty() ? "off (ductus.yaml api.listen)"
                          : ("http://" + api + "/api/v1/ (GET /api/v1/openapi.json describes it)")
                                .c_str(),
              database.c_str());
  if (devAdmin && !api.empty())
    std::printf("Sign in to the console as %s with the password %s, or call the API with "
                "its token:\n"
                "  curl -H 'Authorization: Bearer %s' http://%s/api/v1/interfaces\n\n",
                devAdmin->user.c_str(), devAdmin->password.c_str(), devAdmin->token.c_str(),
                api.c_str());
  std::fflush(stdout);
}

// The flags made options; the process (supervisor/engine_process.h) does
// the rest. `dev`: no handover, and the banner once started.
int runEngine(const RunArgs& args, config::Project project, const std::string& database,
              bool dev, const std::optional<DevAdmin>& devAdmin = std::nullopt) {
  applyApiListen(args, project);
  EngineProcessOptions o;
  o.databaseUrl = database;
  o.stopTimeout = args.stopTimeout;
  o.controlPath = args.control.empty() ? ctl::defaultControlPath() : args.control;
  o.controlRequired = !args.control.empty();
  o.dev = dev;
  o.standby = args.standby;
  if (dev)
    o.onStarted = [database, devAdmin](const Engine& e) {
      printDevBanner(e, database, devAdmin);
    };
  return runEngineProcess(std::move(project), std::move(o));
}

std::optional<config::Project> load(const RunArgs& args) {
  config::LoadOptions lo;
  lo.environment = args.environment.empty() ? config::defaultEnvironment() : args.environment;
  auto t0 = std::chrono::steady_clock::now();
  auto p = config::loadProjectWithDiagnostics(args.project, lo);
  if (!p.project) {
    // As validate prints them; under --log-format json, a JSON line each.
    for (auto& d : p.diagnostics)
      logPlain(spdlog::level::err, d.toString(),
               {.more = {{"file", d.file},
                         {"line", d.line},
                         {"column", d.column},
                         {"key", d.keyPath},
                         {"error", d.message}}});
    spdlog::error("the project {} has errors; nothing was started", args.project);
    return std::nullopt;
  }
  // Each certificates: entry as validate loads it, before any database
  // (the engine's start loads them again for itself).
  if (auto broken = checkCertificateFiles(*p.project); !broken.empty()) {
    for (auto& d : broken)
      logPlain(spdlog::level::err, d.toString(),
               {.more = {{"file", d.file}, {"line", d.line}, {"key", d.keyPath}, {"error", d.message}}});
    spdlog::error("the project {} has certificates that do not load; nothing was started",
                  args.project);
    return std::nullopt;
  }
  spdlog::debug(
      "start-up: the project read and checked in {:.1f} ms ({} interfaces)",
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(),
      p.project->interfaces.size());
  return std::move(*p.project);
}

int run(const RunArgs& args) {
  setupLogging(args.logFormat, args.logLevel);
  auto project = load(args);
  if (!project) return refuseStart(StartFailure::InvalidProject);
  std::string db = args.database;
  if (db.empty()) db = project->engine.database;
  if (db.empty())
    if (const char* e = std::getenv("DUCTUS_DATABASE_URL")) db = e;
  if (db.empty()) {
    spdlog::error("no database: give --database URL, set database: in ductus.yaml, or set "
                  "DUCTUS_DATABASE_URL");
    return refuseStart(StartFailure::NoDatabase);
  }
  return runEngine(args, std::move(*project), db, false);
}

int dev(const RunArgs& args) {
  setupLogging(args.logFormat, args.logLevel);
  auto project = load(args);
  if (!project) return exitCodeOf(StartFailure::InvalidProject);
  fs::path dir = args.dataDir;
  if (dir.empty()) {
    std::error_code ec;
    auto abs = fs::weakly_canonical(args.project, ec).string();
    char tag[17];
    std::snprintf(tag, sizeof tag, "%016llx", static_cast<unsigned long long>(fnv1a64(abs)));
    dir = fs::path("/var/tmp/ductus-dev") / (fs::path(abs).filename().string() + "-" + tag);
  }
  auto pg = DevPostgres::start(dir, args.fresh);
  if (!pg) {
    spdlog::error("dev: {}", pg.error().message);
    return 1;
  }
  spdlog::info("dev: PostgreSQL running in {}", dir.string());
  // Without it the engine still runs; the API then needs `ductus user create`.
  auto admin = ensureDevAdmin(dir, pg->url());
  if (!admin) spdlog::warn("dev: no dev admin: {}", admin.error().message);
  return runEngine(args, std::move(*project), pg->url(), true,
                   admin ? std::optional(*admin) : std::nullopt);
}

}  // namespace

void addRunCommands(CLI::App& ductus, int& exitCode) {
  auto runArgs = std::make_shared<RunArgs>();
  auto* runCmd = ductus.add_subcommand("run", "run the engine on a project");
  addProjectArgument(*runCmd, runArgs->project);
  // Not envname(DUCTUS_DATABASE_URL): ductus.yaml's database: comes before
  // the variable, and an option CLI11 filled from it would look given.
  runCmd
      ->add_option("--database", runArgs->database,
                   "PostgreSQL URL; else database: in ductus.yaml, else $DUCTUS_DATABASE_URL")
      ->type_name("URL");
  addEngineOptions(*runCmd, *runArgs);
  runCmd->add_flag("--standby", runArgs->standby,
                   "load and check everything, then wait: take the interfaces over (claim them, "
                   "listen, deliver) once the engine that owns them is gone");
  runCmd->footer(
      "Checks the project, connects to PostgreSQL, applies migrations, starts the\n"
      "workers, opens the listeners and delivers. SIGTERM or SIGINT stops it cleanly:\n"
      "the listeners close, every message being stored is answered, the delivery\n"
      "loops flush and what they finished is settled, the workers stop; after\n"
      "--stop-timeout it exits anyway. A second signal exits at once. Secrets are\n"
      "opened with DUCTUS_SECRETS_KEY or ductus.yaml's secrets.key_file. Exits 3\n"
      "when another live engine on the database owns one of the project's\n"
      "interfaces (at start, or after this engine lost its ownership lock and\n"
      "another claimed an interface).\n"
      "\n"
      "With --standby it starts the same way but claims nothing and opens no\n"
      "listener: it answers ductusctl and the API and looks every second at who\n"
      "owns its interfaces; once the engine that owned them has been gone for 4 s\n"
      "(its process ended, or its host and the lock connection's keepalives ran\n"
      "out) it claims them, reconciles, listens and delivers. Several may wait; one\n"
      "wins. A standby takes no handover (restart it instead).");
  runCmd->callback([runArgs, &exitCode] { exitCode = run(*runArgs); });

  auto devArgs = std::make_shared<RunArgs>();
  auto* devCmd =
      ductus.add_subcommand("dev", "run the engine on a project with a throwaway PostgreSQL");
  addProjectArgument(*devCmd, devArgs->project);
  devCmd->add_flag("--fresh", devArgs->fresh, "start the throwaway PostgreSQL over, empty");
  devCmd
      ->add_option("--data-dir", devArgs->dataDir,
                   "the throwaway PostgreSQL's folder (default under /var/tmp/ductus-dev)")
      ->type_name("DIR");
  addEngineOptions(*devCmd, *devArgs);
  devCmd->footer(
      "Starts a PostgreSQL of its own (initdb on first use; the binaries from\n"
      "$DUCTUS_PGBIN, else /usr/lib/postgresql/15/bin), kept between runs, then runs\n"
      "the engine as `ductus run` does and prints the listeners' addresses. Secrets\n"
      "are opened with DUCTUS_SECRETS_KEY or ductus.yaml's secrets.key_file. Stop\n"
      "with Ctrl-C.");
  devCmd->callback([devArgs, &exitCode] { exitCode = dev(*devArgs); });

  auto control = std::make_shared<std::string>(ctl::defaultControlPath());
  auto* handoverCmd = ductus.add_subcommand(
      "handover", "replace the running engine by a new one, refusing no connection");
  handoverCmd->add_option("--control", *control, "the engine's control socket (run --control)")
      ->type_name("PATH")
      ->capture_default_str();
  handoverCmd->footer(
      "Asks the engine running on the control socket to start the binary it was\n"
      "started from, with its arguments, on its listening sockets: the new engine\n"
      "loads the project (code, configuration) and takes over; the old one stops\n"
      "once it has. Prints the new engine's pid and exits 0 when it runs; exits 1\n"
      "with the reason otherwise, the old engine still running when the new one\n"
      "failed to start (code that doesn't load, say). systemctl reload runs it.");
  handoverCmd->callback([control, &exitCode] { exitCode = ctl::requestHandover(*control, false); });
}

}  // namespace ductus::supervisor
