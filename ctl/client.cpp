#include "ctl/client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "common/fd.h"
#include "ctl/protocol.h"

namespace ductus::ctl {
using nlohmann::json;

namespace {

std::string notRunning(const std::string& path) {
  return "the engine isn't running (no control socket at " + path + ")";
}

}  // namespace

Result<json> controlRequest(const std::string& path, const json& request, int timeoutMs) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof a.sun_path)
    return Error{"control socket path too long (at most " + std::to_string(sizeof a.sun_path - 1) +
                 " bytes): " + path};
  std::memcpy(a.sun_path, path.data(), path.size());
  Fd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Error{std::string("socket: ") + std::strerror(errno)};
  if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    int e = errno;
    if (e == ENOENT || e == ENOTDIR) return Error{notRunning(path), ErrorKind::NotRunning};
    if (e == ECONNREFUSED)
      return Error{"the engine isn't running (nothing answers on " + path + ")",
                   ErrorKind::NotRunning};
    if (e == EACCES || e == EPERM) {
      struct stat st {};
      if (stat(path.c_str(), &st) == 0)
        return Error{"permission denied: the engine runs as uid " + std::to_string(st.st_uid) +
                         " (you are uid " + std::to_string(geteuid()) + ")",
                     ErrorKind::Denied};
      return Error{
          "permission denied: " + path + " (you are uid " + std::to_string(geteuid()) + ")",
          ErrorKind::Denied};
    }
    return Error{"connecting to " + path + ": " + std::strerror(e)};
  }
  std::string line = request.dump() + "\n";
  for (size_t off = 0; off < line.size();) {
    ssize_t n = send(fd.get(), line.data() + off, line.size() - off, MSG_NOSIGNAL);
    // A refused caller may be closed before its request is read; the
    // engine's line saying why is still there to read.
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    off += static_cast<size_t>(n);
  }
  std::string answer;
  char buf[16384];
  for (;;) {
    if (auto nl = answer.find('\n'); nl != std::string::npos) {
      answer.resize(nl);
      break;
    }
    pollfd p{fd.get(), POLLIN, 0};
    int r = poll(&p, 1, timeoutMs);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0)
      return Error{"the engine did not answer within " + std::to_string(timeoutMs / 1000) + " s"};
    ssize_t n = recv(fd.get(), buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error{std::string("reading the answer: ") + std::strerror(errno)};
    if (n == 0) return Error{"the engine closed the connection without answering"};
    answer.append(buf, static_cast<size_t>(n));
  }
  json parsed = json::parse(answer, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object())
    return Error{"the engine answered something that isn't a JSON object: " +
                 answer.substr(0, 200)};
  return parsed;
}

std::string ctlText(const json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  return v.dump();
}

void printTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], r[i].size());
    }
  for (auto& r : rows) {
    std::string out;
    for (size_t i = 0; i < r.size(); ++i) {
      out += r[i];
      if (i + 1 < r.size()) out += std::string(width[i] - r[i].size() + 2, ' ');
    }
    std::printf("%s\n", out.c_str());
  }
}

namespace {

std::string text(const json& v) { return ctlText(v); }

std::string duration(int64_t s) {
  if (s < 60) return std::to_string(s) + "s";
  if (s < 3600) return std::to_string(s / 60) + "m" + std::to_string(s % 60) + "s";
  if (s < 86400) return std::to_string(s / 3600) + "h" + std::to_string(s % 3600 / 60) + "m";
  return std::to_string(s / 86400) + "d" + std::to_string(s % 86400 / 3600) + "h";
}

// The monitor's judgement: each interface, then its destinations indented,
// with the state and the reason to act on. Nothing before the engine
// judges (an older engine, or one without the monitor).
void printHealth(const json& list) {
  std::vector<std::vector<std::string>> rows{{"HEALTH", "OF", "WHY"}};
  auto reason = [](const json& h) {
    std::string r = h.value("reason", std::string());
    return r.empty() ? std::string("-") : r;
  };
  for (auto& f : list) {
    auto h = f.value("health", json());
    if (h.is_object())
      rows.push_back({text(h.value("state", json())), text(f.value("name", json())), reason(h)});
    for (auto& d : f.value("destinations", json::array())) {
      auto dh = d.value("health", json());
      if (!dh.is_object()) continue;
      rows.push_back({text(dh.value("state", json())),
                      "  " + text(f.value("name", json())) + "/" + text(d.value("name", json())),
                      reason(dh)});
    }
  }
  if (rows.size() == 1) return;
  std::printf("\n");
  printTable(rows);
}

// One row per destination; the interface's own columns on its first.
void printInterfaces(const json& list) {
  std::vector<std::vector<std::string>> rows{{"INTERFACE", "SOURCE", "STATE", "INTAKE", "RECEIVED",
                                              "DESTINATION", "PENDING", "SENT", "FILTERED",
                                              "QUARANTINED", "RETRIES"}};
  for (auto& f : list) {
    std::vector<std::string> head{text(f.value("name", json())), text(f.value("source", json())),
                                  text(f.value("state", json())), text(f.value("intake", json())),
                                  text(f.value("received", json()))};
    auto dests = f.value("destinations", json::array());
    if (dests.empty()) {
      head.insert(head.end(), {"-", "-", "-", "-", "-", "-"});
      rows.push_back(head);
    }
    bool first = true;
    for (auto& d : dests) {
      std::vector<std::string> row = first ? head : std::vector<std::string>{"", "", "", "", ""};
      first = false;
      std::string name = text(d.value("name", json()));
      if (d.value("route", false)) name += " (route)";
      row.insert(row.end(),
                 {name, text(d.value("pending", json())), text(d.value("sent", json())),
                  text(d.value("filtered", json())), text(d.value("quarantined", json())),
                  text(d.value("retries", json()))});
      rows.push_back(std::move(row));
    }
  }
  if (rows.size() == 1) return (void)std::printf("no interfaces\n");
  printTable(rows);
  printHealth(list);
}

void printStatus(const json& a) {
  auto e = a.value("engine", json::object());
  std::printf("engine  ductus %s, pid %s, uid %s, %s since %s (up %s)\n",
              text(e.value("versionLine", json())).c_str(), text(e.value("pid", json())).c_str(),
              text(e.value("uid", json())).c_str(), text(e.value("state", json())).c_str(),
              text(e.value("startedAt", json())).c_str(),
              duration(e.value("uptimeSeconds", int64_t{0})).c_str());
  if (auto id = e.value("engineId", std::string()); !id.empty())
    std::printf("        id %s, ownership %s\n", id.c_str(),
                text(e.value("ownership", json())).c_str());
  std::printf("\n");
  printInterfaces(a.value("interfaces", json::array()));
  std::printf("\n");
  std::vector<std::vector<std::string>> rows{{"WORKER", "PID", "STATE", "RESTARTS", "CALLS"}};
  for (auto& w : a.value("workers", json::array())) {
    auto pid = w.value("pid", int64_t{0});
    rows.push_back({text(w.value("group", json())) + "/" + text(w.value("slot", json())),
                    pid ? std::to_string(pid) : "-", text(w.value("state", json())),
                    text(w.value("restarts", json())), text(w.value("callsInFlight", json()))});
  }
  if (rows.size() == 1)
    std::printf("no workers\n");
  else
    printTable(rows);
  // Other engines on the same database, one row per interface they own.
  std::printf("\n");
  std::vector<std::vector<std::string>> others{
      {"OTHER ENGINE", "HOST", "PID", "VERSION", "STARTED", "OWNS"}};
  for (auto& o : a.value("otherEngines", json::array())) {
    std::vector<std::string> row{text(o.value("id", json())), text(o.value("host", json())),
                                 text(o.value("pid", json())), text(o.value("version", json())),
                                 text(o.value("startedAt", json()))};
    auto owns = o.value("interfaces", json::array());
    if (owns.empty()) {
      row.push_back("nothing");
      others.push_back(std::move(row));
    }
    for (size_t i = 0; i < owns.size(); ++i) {
      auto r = i == 0 ? row : std::vector<std::string>(row.size(), "");
      r.push_back(text(owns[i]));
      others.push_back(std::move(r));
    }
  }
  if (others.size() == 1)
    std::printf("no other engine on this database\n");
  else
    printTable(others);
}

}  // namespace

void addCommonOptions(CLI::App& cmd, CtlArgs& args) {
  args.control = defaultControlPath();
  cmd.add_option("--control", args.control, "the engine's control socket (ductus run --control)")
      ->type_name("PATH")
      ->capture_default_str();
  cmd.add_flag("--json", args.json, "print the engine's answer as JSON, for scripts");
}

namespace {

int ask(const CtlArgs& args, const std::string& request, void (*print)(const json&)) {
  auto answer = controlRequest(args.control, {{"request", request}});
  if (!answer) {
    std::fprintf(stderr, "ductusctl %s: %s\n", request.c_str(), answer.error().message.c_str());
    return 1;
  }
  if (!answer->value("ok", false)) {
    if (args.json) std::printf("%s\n", answer->dump(2).c_str());
    std::fprintf(stderr, "ductusctl %s: %s\n", request.c_str(),
                 text(answer->value("error", json("the engine answered an error"))).c_str());
    return 1;
  }
  if (args.json) {
    std::printf("%s\n", answer->dump(2).c_str());
  } else {
    print(*answer);
    for (auto& w : answer->value("warnings", json::array()))
      std::fprintf(stderr, "warning: %s\n", text(w).c_str());
  }
  return 0;
}

}  // namespace

int requestHandover(const std::string& path, bool asJson) {
  // The new engine has 60 s to get ready and 60 s to take charge.
  auto answer = controlRequest(path, {{"request", "handover"}}, 150'000);
  if (!answer) {
    std::fprintf(stderr, "handover: %s\n", answer.error().message.c_str());
    return 1;
  }
  if (asJson) std::printf("%s\n", answer->dump(2).c_str());
  if (!answer->value("ok", false)) {
    std::fprintf(stderr, "handover failed: %s\n",
                 ctlText(answer->value("error", json("the engine answered an error"))).c_str());
    return 1;
  }
  if (!asJson)
    std::printf("handed over: the new engine runs as pid %s\n",
                ctlText(answer->value("pid", json())).c_str());
  return 0;
}

void addCtlCommands(CLI::App& program, int& exitCode) {
  auto statusArgs = std::make_shared<CtlArgs>();
  auto* status = program.add_subcommand(
      "status",
      "the engine, its interfaces (pending per destination), workers and the other engines");
  addCommonOptions(*status, *statusArgs);
  status->footer(
      "Counts are since the engine started, but PENDING: the deliveries waiting now,\n"
      "from the database (- when it could not be asked). HEALTH is the monitor's\n"
      "judgement, worst first: stopped, paused, stalled (waiting and nothing finished\n"
      "for a minute), error (quarantined), behind (monitor: behind:), late (active_by:\n"
      "passed), quiet (active_within: passed), ok; WHY says what to look at.");
  status->callback([statusArgs, &exitCode] { exitCode = ask(*statusArgs, "status", printStatus); });

  auto ifaceArgs = std::make_shared<CtlArgs>();
  auto* interfaces = program.add_subcommand(
      "interfaces", "each interface's state, intake and destinations with their pending counts");
  addCommonOptions(*interfaces, *ifaceArgs);
  auto handoverArgs = std::make_shared<CtlArgs>();
  auto* handover = program.add_subcommand(
      "handover", "replace the engine by a new one started from the same command line");
  addCommonOptions(*handover, *handoverArgs);
  handover->footer(
      "Answers when the new engine runs (its pid), or with why not: when the new\n"
      "engine fails before it takes over (its code doesn't load, say), the old one\n"
      "goes on as before. `ductus handover` and systemctl reload do the same.");
  handover->callback([handoverArgs, &exitCode] {
    exitCode = requestHandover(handoverArgs->control, handoverArgs->json);
  });

  interfaces->callback([ifaceArgs, &exitCode] {
    exitCode = ask(*ifaceArgs, "interfaces",
                   [](const json& a) { printInterfaces(a.value("interfaces", json::array())); });
  });
}

}  // namespace ductus::ctl
