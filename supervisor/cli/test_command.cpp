#include "supervisor/cli/test_command.h"

#include <uv.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/command_line.h"
#include "common/result.h"
#include "common/text.h"
#include "common/uv_handle.h"
#include "common/config/model.h"
#include "proto/worker_exit.h"
#include "supervisor/workers/interface_spec.h"
#include "supervisor/workers/worker_process.h"

namespace ductus::supervisor {
namespace {

namespace fs = std::filesystem;

// All tests of one file together; a test that loops is stopped by the
// worker's watchdog at this deadline.
constexpr std::chrono::milliseconds kFileTimeout{30000};

struct TestCase {
  std::string name;
  bool ok = false;
  std::string error;  // as the worker said it, CRs and all
};

// One test file's run, for the console's counts and the JUnit report.
struct FileResult {
  int passed = 0;
  int failed = 0;
  std::vector<TestCase> tests;
  std::string loadError;  // the file did not load or did not finish
  std::string logs;       // what its tests logged, one line each
  double seconds = 0;
};

// One suite per test file: the report groups the tests the way the console
// does, and CI servers show the file's name above its tests.
struct Suite {
  std::string name;       // interfaces/adt/transform.test.js
  std::string interface;  // adt: each test's classname
  FileResult result;
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

// Text for an XML 1.0 document: valid UTF-8 (other bytes read as
// ISO-8859-1, as everywhere else), markup escaped, and the control
// characters XML cannot hold at all, not even as references, replaced by
// U+FFFD. In an attribute, line breaks and tabs are written as references:
// a parser would turn them into spaces.
std::string xmlEscape(std::string_view raw, bool attribute) {
  std::string text = asText(raw);
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += attribute ? "&quot;" : "\""; break;
      case '\n': out += attribute ? "&#10;" : "\n"; break;
      case '\r': out += attribute ? "&#13;" : "\r"; break;
      case '\t': out += attribute ? "&#9;" : "\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) out += "\xEF\xBF\xBD";
        else out += c;
    }
  }
  return out;
}

// A failure's text in an element: each HL7 segment on a line of its own.
std::string lines(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\r') {
      out += '\n';
      if (i + 1 < text.size() && text[i + 1] == '\n') ++i;
    } else {
      out += text[i];
    }
  }
  return out;
}

// A failure's first line, for the message attribute CI servers show in
// their summaries.
std::string_view firstLine(std::string_view text) {
  return text.substr(0, text.find_first_of("\r\n"));
}

// The JUnit XML report (the format Jenkins, GitLab, GitHub and Azure read):
// <testsuites> with one <testsuite> per test file, a <testcase> per test
// (classname: the interface) with its <failure>; a file that did not load
// is one <testcase> with an <error>.
std::string junitReport(const std::vector<Suite>& suites) {
  int tests = 0, failures = 0, errors = 0;
  double seconds = 0;
  for (auto& s : suites) {
    tests += s.result.loadError.empty() ? static_cast<int>(s.result.tests.size()) : 1;
    errors += s.result.loadError.empty() ? 0 : 1;
    for (auto& t : s.result.tests) failures += t.ok ? 0 : 1;
    seconds += s.result.seconds;
  }
  auto attr = [](std::string_view v) { return xmlEscape(v, true); };
  auto fmt = [](double secs) {
    char b[32];
    std::snprintf(b, sizeof b, "%.3f", secs);
    return std::string(b);
  };
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x += "<testsuites name=\"ductus test\" tests=\"" + std::to_string(tests) + "\" failures=\"" +
       std::to_string(failures) + "\" errors=\"" + std::to_string(errors) + "\" time=\"" +
       fmt(seconds) + "\">\n";
  for (auto& s : suites) {
    const FileResult& r = s.result;
    bool loaded = r.loadError.empty();
    int suiteFailures = 0;
    for (auto& t : r.tests) suiteFailures += t.ok ? 0 : 1;
    x += "  <testsuite name=\"" + attr(s.name) + "\" tests=\"" +
         std::to_string(loaded ? r.tests.size() : 1) + "\" failures=\"" +
         std::to_string(suiteFailures) + "\" errors=\"" + (loaded ? "0" : "1") +
         "\" skipped=\"0\" time=\"" + fmt(r.seconds) + "\">\n";
    std::string classname = attr(s.interface);
    if (!loaded) {
      x += "    <testcase name=\"" + attr(s.name) + "\" classname=\"" + classname + "\">\n";
      x += "      <error message=\"" + attr(firstLine(r.loadError)) + "\">" +
           xmlEscape(lines(r.loadError), false) + "</error>\n";
      x += "    </testcase>\n";
    }
    for (auto& t : r.tests) {
      x += "    <testcase name=\"" + attr(t.name) + "\" classname=\"" + classname + "\"";
      if (t.ok) {
        x += "/>\n";
        continue;
      }
      x += ">\n      <failure message=\"" + attr(firstLine(t.error)) + "\">" +
           xmlEscape(lines(t.error), false) + "</failure>\n    </testcase>\n";
    }
    if (!r.logs.empty())
      x += "    <system-out>" + xmlEscape(r.logs, false) + "</system-out>\n";
    x += "  </testsuite>\n";
  }
  x += "</testsuites>\n";
  return x;
}

Status writeReport(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return Error::fromErrno("cannot write " + path);
  f << text;
  f.close();
  if (!f) return Error::fromErrno("cannot write " + path);
  return {};
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

  void onLoaded(WorkerProcess& w, const proto::Loaded& m) override {
    if (m.error) {
      loadError_ = *m.error;
      finished_ = true;
      w.kill("the test file does not load");
    }
  }

  void onLog(WorkerProcess&, const proto::Log& m) override {
    std::string text(m.text);
    std::printf("    | %s\n", text.c_str());
    logs_ += text;
    logs_ += '\n';
  }

  void onService(WorkerProcess& w, const proto::ServiceRequest& m) override {
    // Only reached outside a test (mocks are in place while one runs).
    w.send(proto::ServiceReply{m.requestId, false,
                               "ductus test answers no services outside a test; mock them inside "
                               "it (mock.db, mock.fetch, mock.env, mock.secret)"});
  }

  void onOutcome(WorkerProcess& w, const proto::Outcome& m) override {
    if (!loadError_.empty()) return;
    std::string data(m.data);
    if (m.kind == proto::OutcomeKind::Output) {
      results_ = std::move(data);
    } else if (m.kind == proto::OutcomeKind::RunawayHeap) {
      loadError_ = "the tests used more memory than the heap limit allows";
    } else if (m.kind == proto::OutcomeKind::RunawayTimeout) {
      loadError_ =
          "the tests ran past " + std::to_string(kFileTimeout.count()) + " ms and were stopped";
    } else if (m.kind == proto::OutcomeKind::Quarantine) {
      loadError_ = std::move(data);
    } else {
      loadError_ = "the tests did not finish";
    }
    finished_ = true;
    w.send(proto::Shutdown{});
  }

  void onExit(WorkerProcess&, int64_t status, int signal, const std::string& why) override {
    exited_ = true;
    if (!finished_) {
      loadError_ = "the worker exited " + proto::howExited(status, signal) +
                   (why.empty() ? "" : " (" + why + ")");
      finished_ = true;
    }
  }

 private:
  FileResult runOn(uv_loop_t* loop) {
    auto t0 = std::chrono::steady_clock::now();
    FileResult r = runTestsOn(loop);
    r.logs = std::move(logs_);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
  }

  FileResult runTestsOn(uv_loop_t* loop) {
    FileResult r;
    auto w = WorkerProcess::spawn(loop, {"/proc/self/exe", config::kDefaultHeapMb}, *this);
    if (!w) {
      std::printf("  FAIL %s: %s\n", entry_.c_str(), w.error().message.c_str());
      r.failed = 1;
      r.loadError = w.error().message;
      return r;
    }
    proto::Load load;
    load.interfaceId = 1;
    load.name = iface_;
    load.entry = entry_;
    load.modules = std::move(modules_.modules);
    load.timeout = kFileTimeout;
    (*w)->send(load);
    (*w)->send(proto::RunTests{1, 1});
    while (!exited_) uv_run(loop, UV_RUN_ONCE);
    w->reset();

    if (!loadError_.empty() || !results_) {
      std::printf("  FAIL %s\n       %s\n", entry_.c_str(), readable(loadError_).c_str());
      r.failed = 1;
      r.loadError = loadError_.empty() ? "the tests did not finish" : loadError_;
      return r;
    }
    auto json = nlohmann::json::parse(*results_, nullptr, false);
    if (!json.is_array()) {
      std::printf("  FAIL %s: unreadable results\n", entry_.c_str());
      r.failed = 1;
      r.loadError = "the worker's results were unreadable";
      return r;
    }
    for (auto& t : json) {
      std::string name = t.value("name", "?");
      if (t.value("ok", false)) {
        std::printf("  ok   %s\n", name.c_str());
        r.passed++;
        r.tests.push_back({name, true, {}});
      } else {
        std::string err = t.value("error", "");
        std::printf("  FAIL %s\n       %s\n", name.c_str(), readable(err).c_str());
        r.failed++;
        r.tests.push_back({name, false, err});
      }
    }
    return r;
  }

  std::string iface_, entry_;
  ModuleSet modules_;
  std::optional<std::string> results_;
  std::string loadError_;
  std::string logs_;
  bool finished_ = false;
  bool exited_ = false;
};

// only: one interface's name, or empty for all of them. junit: where the
// JUnit XML report goes ("" for none).
int runTests(const fs::path& project, const std::string& only, const std::string& junit) {
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
  std::vector<Suite> suites;
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
        FileResult r;
        r.failed = 1;
        r.loadError = modules.error().message;
        suites.push_back({entry, spec.name, std::move(r)});
        continue;
      }
      TestFileRun run(spec.name, entry, std::move(*modules));
      FileResult r = run.run();
      passed += r.passed;
      failed += r.failed;
      suites.push_back({entry, spec.name, std::move(r)});
      std::fflush(stdout);
    }
  }
  int code = failed > 0 ? 1 : 0;
  if (filesRun == 0) {
    // Not a failure (a new project has none yet), but nothing was checked.
    std::printf("warning: no tests: no interfaces/%s/*.test.js in %s\n",
                only.empty() ? "*" : only.c_str(), project.c_str());
  } else {
    std::printf("%d passed, %d failed\n", passed, failed);
  }
  if (!junit.empty()) {
    std::fflush(stdout);
    // An empty report too: CI that expects the file finds it.
    if (auto s = writeReport(junit, junitReport(suites)); !s) {
      std::fprintf(stderr, "ductus test: %s\n", s.error().message.c_str());
      code = 1;
    }
  }
  return code;
}

}  // namespace

void addTestCommand(CLI::App& ductus, int& exitCode) {
  auto project = std::make_shared<std::string>();
  auto only = std::make_shared<std::string>();
  auto junit = std::make_shared<std::string>();
  auto* cmd = ductus.add_subcommand("test", "run the interfaces' *.test.js with mocked services");
  cmd->add_option("--interface", *only, "run only this interface's tests")->type_name("NAME");
  cmd->add_option("--junit", *junit, "also write a JUnit XML report to FILE, for CI")
      ->type_name("FILE");
  addProjectArgument(*cmd, *project);
  cmd->footer(
      "Runs every interfaces/<name>/*.test.js in a confined worker, with mock.db,\n"
      "mock.fetch, mock.env and mock.secret instead of real services, and prints\n"
      "`N passed, N failed`. Exits 1 when a test failed, 0 with a warning when\n"
      "there are no tests. Needs no database. --junit writes the results as JUnit\n"
      "XML too (a testsuite per test file, a testcase per test), which CI servers\n"
      "(Jenkins, GitLab, GitHub Actions) show as a test report.");
  cmd->callback(
      [project, only, junit, &exitCode] { exitCode = runTests(*project, *only, *junit); });
}

}  // namespace ductus::supervisor
