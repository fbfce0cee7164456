#include "supervisor/cli/run_command.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>
#include <uv.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "api/ui/ui_assets.h"
#include "common/command_line.h"
#include "common/config/address.h"
#include "common/config/duration.h"
#include "common/config/loader.h"
#include "common/fd.h"
#include "common/log.h"
#include "common/partition.h"
#include "ctl/client.h"
#include "ctl/protocol.h"
#include "supervisor/cli/dev_admin.h"
#include "supervisor/cli/dev_postgres.h"
#include "supervisor/cli/start_checks.h"
#include "supervisor/engine.h"
#include "supervisor/handover.h"
#include "supervisor/ownership.h"
#include "supervisor/systemd.h"

namespace ductus::supervisor {
namespace fs = std::filesystem;
namespace {

// Every connection, file and worker socket is a descriptor, and systemd
// starts services with a soft limit of 1,024 (the hard one is far higher):
// past it libuv closes new connections unanswered and file destinations
// fail with EMFILE. Raised to the hard limit, as servers do; said when the
// hard limit itself is low.
void raiseOpenFileLimit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  rlim_t before = lim.rlim_cur;
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &lim) != 0) lim.rlim_cur = before;
  }
  if (lim.rlim_cur < 4096)
    spdlog::warn(
        "open files limit is {}: each connection, file and worker takes one; raise it "
        "(LimitNOFILE= in the systemd unit, ulimit -n) for more than a few hundred "
        "connections",
        static_cast<unsigned long long>(lim.rlim_cur));
  else if (lim.rlim_cur != before)
    spdlog::debug("open files limit raised from {} to {}", static_cast<unsigned long long>(before),
                  static_cast<unsigned long long>(lim.rlim_cur));
}

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

// Signals only record; the loop acts (nginx's ngx_signal_handler).
struct Runner {
  uv_loop_t loop;
  std::unique_ptr<Engine> engine;
  uv_signal_t sigterm, sigint;
  uv_timer_t stopTimer;
  int signals = 0;
  int exitCode = 0;
  bool started = false;
  std::chrono::milliseconds stopTimeout{30'000};
  Systemd* systemd = nullptr;
  // The command line as started, for a handover's new engine.
  std::vector<std::string> command;
  std::unique_ptr<Predecessor> handover;  // this engine handing over
  std::unique_ptr<Successor> takeover;    // this engine taking over
  Fd selfBinary;  // O_PATH: the file the workers are started from
};

void onSignal(uv_signal_t* h, int signum) {
  auto* r = static_cast<Runner*>(h->data);
  if (++r->signals > 1) {
    spdlog::warn("second signal ({}): exiting now", signum);
    spdlog::default_logger()->flush();
    _exit(1);
  }
  spdlog::info("signal {}: stopping (listeners close, in-flight messages are answered)", signum);
  uv_timer_start(
      &r->stopTimer,
      [](uv_timer_t* t) {
        auto* r = static_cast<Runner*>(t->data);
        spdlog::error("stop did not finish within {} ms: exiting anyway", r->stopTimeout.count());
        spdlog::default_logger()->flush();
        _exit(1);
      },
      static_cast<uint64_t>(r->stopTimeout.count()), 0);
  if (!r->started) {
    uv_stop(&r->loop);
    return;
  }
  r->engine->stop([r] {
    spdlog::info("stopped");
    uv_stop(&r->loop);
  });
}

// An error of several lines, an error line each.
void logErrorLines(std::string_view lines) {
  while (!lines.empty()) {
    size_t nl = lines.find('\n');
    spdlog::error("{}", lines.substr(0, nl));
    lines = nl == lines.npos ? std::string_view() : lines.substr(nl + 1);
  }
}

// Another engine claimed an interface while this one's ownership lock was
// lost: stop as for a signal, then exit kExitOwnedElsewhere, which the unit's
// RestartPreventExitStatus keeps from restarting into the same collision.
void stopOwnedElsewhere(Runner* r) {
  r->exitCode = kExitOwnedElsewhere;
  spdlog::error("stopping: another engine owns this engine's interfaces now (exit {})",
                kExitOwnedElsewhere);
  if (++r->signals > 1) return;  // a stop is under way already
  uv_timer_start(
      &r->stopTimer,
      [](uv_timer_t* t) {
        auto* r = static_cast<Runner*>(t->data);
        spdlog::error("stop did not finish within {} ms: exiting anyway", r->stopTimeout.count());
        spdlog::default_logger()->flush();
        _exit(kExitOwnedElsewhere);
      },
      static_cast<uint64_t>(r->stopTimeout.count()), 0);
  r->engine->stop([r] {
    spdlog::info("stopped");
    uv_stop(&r->loop);
  });
}

// A `handover` request on the control socket: a new engine started from
// the same command line takes over (supervisor/handover.h); this process
// exits 0 once it runs. Anything failing before leaves this engine as it was.
void startHandover(Runner* r, std::function<void(Result<int64_t>)> answer) {
  if (!r->started || r->signals > 0 || r->engine->stopping())
    return answer(Error{"the engine is not running (starting or stopping)"});
  if (r->handover && r->handover->active())
    return answer(Error{"a handover is already under way"});
  spdlog::info("handover asked: starting a new engine ({})", r->command.empty() ? "?" : r->command[0]);
  r->handover = std::make_unique<Predecessor>(
      Predecessor::Deps{&r->loop, r->engine.get(), r->systemd, r->command});
  r->handover->start(std::move(answer), [r](int code) {
    r->exitCode = code;
    if (code == 0)
      spdlog::info("handed over: this engine stopped");
    else
      spdlog::error("the handover ended badly: exiting {}", code);
    uv_stop(&r->loop);
  });
}

// Prepared (EngineOptions::takeover): say Ready and wait for the old engine
// to release; then take charge. The old engine going away before it
// released ends this one: it never owned anything.
void awaitRelease(Runner* r, size_t interfaces) {
  auto stopNow = [r](int code) {
    r->exitCode = code;
    if (++r->signals > 1) return;
    r->engine->stop([r] {
      spdlog::info("stopped");
      uv_stop(&r->loop);
    });
  };
  r->takeover->ready();
  spdlog::info("handover: prepared; waiting for the old engine (pid {}) to hand over",
               r->takeover->predecessorPid());
  r->takeover->watch(
      &r->loop,
      [r, interfaces, stopNow] {
        auto t0 = std::chrono::steady_clock::now();
        r->systemd->speak();  // systemd's main process from here
        r->engine->takeCharge([r, interfaces, stopNow, t0](Status s) {
          if (!s) {
            if (s.error().kind == ErrorKind::OwnedElsewhere ||
                s.error().kind == ErrorKind::Stranded)
              logErrorLines(s.error().message);
            else
              spdlog::error("taking charge failed: {}", s.error().message);
            r->takeover->failed(s.error().message);
            return stopNow(s.error().kind == ErrorKind::OwnedElsewhere ? kExitOwnedElsewhere : 1);
          }
          auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - t0)
                        .count();
          std::string list;
          for (auto& l : r->engine->listeners()) list += (list.empty() ? "" : ", ") + l;
          spdlog::info("started: took over {} interface(s) in {} ms; listening: {}", interfaces, ms,
                       list.empty() ? "nothing" : list);
          r->systemd->tell("READY=1\nSTATUS=started: " + std::to_string(interfaces) +
                           " interface(s); listening: " + (list.empty() ? "nothing" : list));
          r->takeover->running();
        });
      },
      [r, stopNow] {
        spdlog::error("handover: the old engine went away before it handed over; stopping");
        stopNow(1);
      });
}

// `dev`: ductus dev's banner is printed once started, with its admin's
// sign-in when there is one.
int runEngine(const RunArgs& args, config::Project project, const std::string& database,
              bool dev, const std::optional<DevAdmin>& devAdmin = std::nullopt) {
  // libuv's pool does the file destinations' writes and fsyncs (and file
  // sources' reads). Its default 4 threads let 4 fsyncs overlap across every
  // destination; 16 measured 25 file destinations draining ~2x faster, while
  // 64 starved the database's own WAL flushes (ACKs fell 4x). Before the
  // first uv_queue_work: libuv reads it once. An operator's value wins.
  setenv("UV_THREADPOOL_SIZE", "16", 0);
  raiseOpenFileLimit();
  // Workers drop every capability whoever starts them (worker/confine.h),
  // but the supervisor itself keeps root's, and needs none of them.
  if (geteuid() == 0)
    spdlog::warn(
        "running as root: workers drop every capability, but the engine itself needs none; "
        "run it as its own user (the package's unit runs it as `ductus`)");
  // Before the first worker starts: they must not inherit systemd's sockets.
  // Outlives the engine, which holds it.
  std::unique_ptr<Systemd> systemd = Systemd::fromEnvironment();
  Runner r;
  r.systemd = systemd.get();
  r.command = startCommandLine();
  if (!dev) {
    auto takeover = Successor::fromEnvironment(*systemd);
    if (!takeover) {
      spdlog::error("handover: {}", takeover.error().message);
      return 1;
    }
    r.takeover = std::move(*takeover);
  }
  if (r.takeover) systemd->quiet();  // not systemd's main process yet
  systemd->tell("STATUS=starting: loading the project's code");
  r.stopTimeout = args.stopTimeout;
  uv_loop_init(&r.loop);
  signal(SIGPIPE, SIG_IGN);
  uv_signal_init(&r.loop, &r.sigterm);
  uv_signal_init(&r.loop, &r.sigint);
  uv_timer_init(&r.loop, &r.stopTimer);
  r.sigterm.data = r.sigint.data = r.stopTimer.data = &r;
  uv_signal_start(&r.sigterm, onSignal, SIGTERM);
  uv_signal_start(&r.sigint, onSignal, SIGINT);

  EngineOptions eo;
  eo.databaseUrl = database;
  eo.systemd = systemd.get();
  eo.controlPath = args.control.empty() ? ctl::defaultControlPath() : args.control;
  eo.controlRequired = !args.control.empty();
  eo.onOwnershipTaken = [&r](const Error&) { stopOwnedElsewhere(&r); };
  if (!dev) eo.handover = [&r](auto answer) { startHandover(&r, std::move(answer)); };
  if (r.takeover) {
    auto from = r.takeover->readFrom(HandoverTiming{}.from);
    if (!from) {
      spdlog::error("handover: {}", from.error().message);
      r.takeover->failed(from.error().message);
      return 1;
    }
    eo.takeover = true;
    eo.predecessor = *from;
    eo.inheritedSocket = [t = r.takeover.get()](const std::string& name) {
      return t->takeSocket(name);
    };
  }
  // Workers run the binary this engine runs, held open: a package upgrade
  // renames a new /usr/bin/ductus over it, and a worker the old engine
  // restarts before its reload must speak the old engine's protocol. The
  // path /proc/self/fd/N is the held file even once its name is gone; N
  // above the workers' own descriptors (0-3), which their spawn dup2s over.
  r.selfBinary = Fd(open("/proc/self/exe", O_PATH | O_CLOEXEC));
  if (r.selfBinary.valid()) {
    r.selfBinary = Fd(fcntl(r.selfBinary.get(), F_DUPFD_CLOEXEC, 10));
    if (r.selfBinary.valid()) eo.binary = "/proc/self/fd/" + std::to_string(r.selfBinary.get());
  }
  auto t0 = std::chrono::steady_clock::now();
  size_t interfaces = project.interfaces.size();
  applyApiListen(args, project);
  r.engine = std::make_unique<Engine>(&r.loop, std::move(project), eo);
  r.engine->start([&](Status s) {
    if (!s && r.takeover) r.takeover->failed(s.error().message);
    if (!s && s.error().kind == ErrorKind::Code) {
      // As validate prints them: file:line:column: message, one a line.
      std::string_view lines = s.error().message;
      while (!lines.empty()) {
        size_t nl = lines.find('\n');
        logPlain(spdlog::level::err, lines.substr(0, nl));
        lines = nl == lines.npos ? std::string_view() : lines.substr(nl + 1);
      }
      spdlog::error("interface code does not load; nothing was started (no listener opened)");
      systemd->removeStored();
      r.exitCode = 1;
      uv_stop(&r.loop);
      return;
    }
    if (!s && s.error().kind == ErrorKind::OwnedElsewhere) {
      // Who owns what, one a line; then the exit a supervisor won't retry.
      logErrorLines(s.error().message);
      spdlog::error("another live engine on this database owns the interfaces above; nothing "
                    "was started (exit {}). Stop that engine, or run these interfaces there",
                    kExitOwnedElsewhere);
      systemd->removeStored();
      r.exitCode = kExitOwnedElsewhere;
      uv_stop(&r.loop);
      return;
    }
    if (!s && s.error().kind == ErrorKind::Stranded) {
      logErrorLines(s.error().message);
      spdlog::error("lowered ordering.partitions would strand pending messages; nothing was "
                    "started (`ductus validate --database URL` shows the same)");
      systemd->removeStored();
      r.exitCode = 1;
      uv_stop(&r.loop);
      return;
    }
    if (!s) {
      spdlog::error("start failed: {}", s.error().message);
      systemd->removeStored();
      r.exitCode = 1;
      uv_stop(&r.loop);
      return;
    }
    r.started = true;
    if (r.takeover) return awaitRelease(&r, interfaces);
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::steady_clock::now() - t0)
                  .count();
    std::string list;
    for (auto& l : r.engine->listeners()) list += (list.empty() ? "" : ", ") + l;
    spdlog::info("started: {} interface(s) in {} ms; listening: {}", interfaces, ms,
                 list.empty() ? "nothing" : list);
    systemd->tell("READY=1\nSTATUS=started: " + std::to_string(interfaces) +
                  " interface(s); listening: " + (list.empty() ? "nothing" : list));
    if (dev) {
      std::printf("\nductus dev is running.\n");
      for (auto& l : r.engine->listeners())
        if (l.rfind("api ", 0) != 0) std::printf("  %s\n", l.c_str());
      std::string api = r.engine->apiAddress();
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
  });
  uv_run(&r.loop, UV_RUN_DEFAULT);
  r.handover.reset();
  r.engine.reset();
  r.takeover.reset();
  uv_close(reinterpret_cast<uv_handle_t*>(&r.sigterm), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&r.sigint), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&r.stopTimer), nullptr);
  // Close whatever is still open (a stop cut short by an error leaves
  // handles behind), let the close callbacks run, then free the loop.
  uv_walk(
      &r.loop,
      [](uv_handle_t* h, void*) {
        if (!uv_is_closing(h)) uv_close(h, nullptr);
      },
      nullptr);
  uv_run(&r.loop, UV_RUN_DEFAULT);
  if (int rc = uv_loop_close(&r.loop); rc != 0)
    spdlog::warn("event loop still busy at exit: {}", uv_strerror(rc));
  return r.exitCode;
}

std::optional<config::Project> load(const RunArgs& args) {
  config::LoadOptions lo;
  lo.environment = args.environment.empty() ? config::defaultEnvironment() : args.environment;
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
  // Refused here, before a database or a listener, as validate refuses them.
  if (auto unsupported = unsupportedKinds(*p.project); !unsupported.empty()) {
    for (auto& d : unsupported)
      logPlain(spdlog::level::err, d.toString(),
               {.more = {{"file", d.file},
                         {"line", d.line},
                         {"column", d.column},
                         {"key", d.keyPath},
                         {"error", d.message}}});
    spdlog::error("the project {} uses what this engine can't run yet; nothing was started",
                  args.project);
    return std::nullopt;
  }
  return std::move(*p.project);
}

// A start refused before the engine exists: the sockets systemd kept would
// queue connections for an engine that isn't coming; refused is clearer.
int refuseStart(int exitCode) {
  Systemd::fromEnvironment()->removeStored();
  return exitCode;
}

int run(const RunArgs& args) {
  setupLogging(args.logFormat, args.logLevel);
  auto project = load(args);
  if (!project) return refuseStart(1);
  std::string db = args.database;
  if (db.empty()) db = project->engine.database;
  if (db.empty())
    if (const char* e = std::getenv("DUCTUS_DATABASE_URL")) db = e;
  if (db.empty()) {
    spdlog::error("no database: give --database URL, set database: in ductus.yaml, or set "
                  "DUCTUS_DATABASE_URL");
    return refuseStart(kUsageError);
  }
  return runEngine(args, std::move(*project), db, false);
}

int dev(const RunArgs& args) {
  setupLogging(args.logFormat, args.logLevel);
  auto project = load(args);
  if (!project) return 1;
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
  runCmd->footer(
      "Checks the project, connects to PostgreSQL, applies migrations, starts the\n"
      "workers, opens the listeners and delivers. SIGTERM or SIGINT stops it cleanly:\n"
      "the listeners close, every message being stored is answered, the delivery\n"
      "loops flush, the workers stop; after --stop-timeout it exits anyway. A second\n"
      "signal exits at once. Secrets are opened with DUCTUS_SECRETS_KEY or\n"
      "ductus.yaml's secrets.key_file. Exits 3 when another live engine on the\n"
      "database owns one of the project's interfaces (at start, or after this\n"
      "engine lost its ownership lock and another claimed an interface).");
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
