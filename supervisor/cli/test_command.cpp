#include "supervisor/cli/test_command.h"

#include <uv.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/uv_handle.h"
#include "supervisor/cli/command_line.h"
#include "supervisor/workers/worker_pool.h"
#include "supervisor/workers/worker_process.h"

namespace ductus::supervisor {
namespace {

namespace fs = std::filesystem;

// All tests of one file together; a test that loops is stopped by the
// worker's watchdog at this deadline.
constexpr std::chrono::milliseconds kFileTimeout{30000};

struct FileResult {
  int passed = 0;
  int failed = 0;
};

// A failure's text for a terminal: HL7 ends its segments with CR, which a
// terminal prints over the same line, so each segment gets a line of its
// own; the lines after the first are indented under the test's name.
std::string readable(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') continue;  // CRLF: one line
    if (c == '\r' || c == '\n') {
      if (i + 1 < text.size()) out += "\n       ";
      continue;
    }
    out += c;
  }
  return out;
}

// Runs one test file in its own worker process on its own loop.
class TestFileRun : public WorkerProcess::Events {
 public:
  TestFileRun(std::string iface, std::string entry, ModuleSet modules)
      : iface_(std::move(iface)), entry_(std::move(entry)), modules_(std::move(modules)) {}

  FileResult run() {
    uv_loop_t loop;
    uv_loop_init(&loop);
    FileResult r = runOn(&loop);
    // Let the closing handles finish before the loop goes.
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return r;
  }

  void onFrame(WorkerProcess& w, proto::FromWorker::Reader msg) override {
    switch (msg.which()) {
      case proto::FromWorker::LOADED:
        if (msg.getLoaded().isError()) {
          loadError_ = msg.getLoaded().getError();
          finished_ = true;
          w.kill("the test file does not load");
        }
        return;
      case proto::FromWorker::LOG:
        std::printf("    | %s\n", msg.getLog().getText().cStr());
        return;
      case proto::FromWorker::SERVICE: {
        // Only reached outside a test (mocks are in place while one runs).
        capnp::MallocMessageBuilder b;
        auto reply = b.initRoot<proto::ToWorker>().initServiceReply();
        reply.setRequestId(msg.getService().getRequestId());
        reply.setError(
            "ductus test answers no services outside a test; mock them inside it "
            "(mock.db, mock.fetch, mock.env, mock.secret)");
        w.send(b);
        return;
      }
      case proto::FromWorker::OUTCOME: {
        auto o = msg.getOutcome();
        if (!loadError_.empty()) return;
        auto d = o.getData();
        std::string data(reinterpret_cast<const char*>(d.begin()), d.size());
        if (o.getKind() == proto::OutcomeKind::OUTPUT) {
          results_ = std::move(data);
        } else if (o.getKind() == proto::OutcomeKind::RUNAWAY_HEAP) {
          loadError_ = "the tests used more memory than the heap limit allows";
        } else if (o.getKind() == proto::OutcomeKind::RUNAWAY_TIMEOUT) {
          loadError_ =
              "the tests ran past " + std::to_string(kFileTimeout.count()) + " ms and were stopped";
        } else if (o.getKind() == proto::OutcomeKind::QUARANTINE) {
          loadError_ = std::move(data);
        } else {
          loadError_ = "the tests did not finish";
        }
        finished_ = true;
        capnp::MallocMessageBuilder b;
        b.initRoot<proto::ToWorker>().setShutdown();
        w.send(b);
        return;
      }
      default: return;
    }
  }

  void onExit(WorkerProcess&, int64_t status, int signal, const std::string& why) override {
    exited_ = true;
    if (!finished_) {
      loadError_ = "the worker exited " +
                   (signal ? "on signal " + std::to_string(signal) : "with code " + std::to_string(status)) +
                   (why.empty() ? "" : " (" + why + ")");
      finished_ = true;
    }
  }

 private:
  FileResult runOn(uv_loop_t* loop) {
    FileResult r;
    auto w = WorkerProcess::spawn(loop, {"/proc/self/exe", 256}, *this);
    if (!w) {
      std::printf("  FAIL %s: %s\n", entry_.c_str(), w.error().message.c_str());
      r.failed = 1;
      return r;
    }
    {
      capnp::MallocMessageBuilder b;
      auto l = b.initRoot<proto::ToWorker>().initLoad();
      l.setInterfaceId(1);
      l.setName(iface_);
      l.setEntry(entry_);
      auto mods = l.initModules(static_cast<unsigned>(modules_.modules.size()));
      unsigned i = 0;
      for (auto& [spec, source] : modules_.modules) {
        mods[i].setSpecifier(spec);
        mods[i].setSource(source);
        ++i;
      }
      l.setTimeoutMs(static_cast<uint32_t>(kFileTimeout.count()));
      (*w)->send(b);
    }
    {
      capnp::MallocMessageBuilder b;
      auto t = b.initRoot<proto::ToWorker>().initRunTests();
      t.setCallId(1);
      t.setInterfaceId(1);
      (*w)->send(b);
    }
    while (!exited_) uv_run(loop, UV_RUN_ONCE);
    w->reset();

    if (!loadError_.empty() || !results_) {
      std::printf("  FAIL %s\n       %s\n", entry_.c_str(), readable(loadError_).c_str());
      r.failed = 1;
      return r;
    }
    auto json = nlohmann::json::parse(*results_, nullptr, false);
    if (!json.is_array()) {
      std::printf("  FAIL %s: unreadable results\n", entry_.c_str());
      r.failed = 1;
      return r;
    }
    for (auto& t : json) {
      std::string name = t.value("name", "?");
      if (t.value("ok", false)) {
        std::printf("  ok   %s\n", name.c_str());
        r.passed++;
      } else {
        std::string err = t.value("error", "");
        std::printf("  FAIL %s\n       %s\n", name.c_str(), readable(err).c_str());
        r.failed++;
      }
    }
    return r;
  }

  std::string iface_, entry_;
  ModuleSet modules_;
  std::optional<std::string> results_;
  std::string loadError_;
  bool finished_ = false;
  bool exited_ = false;
};

// only: one interface's name, or empty for all of them.
int runTests(const fs::path& project, const std::string& only) {
  fs::path interfaces = project / "interfaces";
  std::error_code ec;
  if (!fs::is_directory(interfaces, ec)) {
    std::fprintf(stderr, "ductus test: %s is not a folder (is %s a project?)\n",
                 interfaces.c_str(), project.c_str());
    return kUsageError;
  }
  std::vector<fs::path> dirs;
  for (auto& e : fs::directory_iterator(interfaces, ec))
    if (e.is_directory()) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  if (!only.empty()) {
    std::erase_if(dirs, [&](const fs::path& d) { return d.filename() != only; });
    if (dirs.empty()) {
      std::fprintf(stderr, "ductus test: %s has no interface named %s\n", project.c_str(),
                   only.c_str());
      return kUsageError;
    }
  }

  int passed = 0, failed = 0, filesRun = 0;
  for (auto& dir : dirs) {
    std::vector<fs::path> files;
    for (auto& e : fs::directory_iterator(dir, ec)) {
      auto n = e.path().filename().string();
      if (e.is_regular_file() && (n.ends_with(".test.js") || n.ends_with(".test.mjs")))
        files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    for (auto& file : files) {
      ++filesRun;
      InterfaceSpec spec;
      spec.name = dir.filename().string();
      spec.dir = dir;
      spec.projectLib = project / "lib";
      spec.entryFile = file.filename().string();
      std::string entry = "interfaces/" + spec.name + "/" + spec.entryFile;
      std::printf("%s\n", entry.c_str());
      std::fflush(stdout);
      auto modules = readInterfaceModules(spec, /*includeTests=*/true);
      if (!modules) {
        std::printf("  FAIL %s\n", modules.error().message.c_str());
        failed++;
        continue;
      }
      TestFileRun run(spec.name, entry, std::move(*modules));
      FileResult r = run.run();
      passed += r.passed;
      failed += r.failed;
      std::fflush(stdout);
    }
  }
  if (filesRun == 0) {
    // Not a failure (a new project has none yet), but nothing was checked.
    std::printf("warning: no tests: no interfaces/%s/*.test.js in %s\n",
                only.empty() ? "*" : only.c_str(), project.c_str());
    return 0;
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed > 0 ? 1 : 0;
}

}  // namespace

void addTestCommand(CLI::App& ductus, int& exitCode) {
  auto project = std::make_shared<std::string>();
  auto only = std::make_shared<std::string>();
  auto* cmd = ductus.add_subcommand("test", "run the interfaces' *.test.js with mocked services");
  cmd->add_option("--interface", *only, "run only this interface's tests")->type_name("NAME");
  addProjectArgument(*cmd, *project);
  cmd->footer(
      "Runs every interfaces/<name>/*.test.js in a confined worker, with mock.db,\n"
      "mock.fetch, mock.env and mock.secret instead of real services, and prints\n"
      "`N passed, N failed`. Exits 1 when a test failed, 0 with a warning when\n"
      "there are no tests. Needs no database.");
  cmd->callback([project, only, &exitCode] { exitCode = runTests(*project, *only); });
}

}  // namespace ductus::supervisor
