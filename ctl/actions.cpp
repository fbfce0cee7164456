#include "ctl/actions.h"

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/text.h"
#include "ctl/client.h"

namespace ductus::ctl {
using nlohmann::json;

std::string encoded(const std::string& v) { return percentEncode(v); }

std::optional<json> call(const CtlArgs& args, const std::string& command,
                         const std::string& method, const std::string& path, const json& body) {
  json request = {{"request", "api"}, {"method", method}, {"path", path}};
  if (!body.is_null()) request["body"] = body;
  auto answer = controlRequest(args.control, request);
  if (!answer) {
    std::fprintf(stderr, "ductusctl %s: %s\n", command.c_str(), answer.error().message.c_str());
    return std::nullopt;
  }
  if (!answer->value("ok", false)) {
    if (args.json) std::printf("%s\n", answer->dump(2).c_str());
    std::fprintf(stderr, "ductusctl %s: %s\n", command.c_str(),
                 ctlText(answer->value("error", json("the engine answered an error"))).c_str());
    return std::nullopt;
  }
  return answer->value("body", json());
}

int show(const CtlArgs& args, const std::optional<json>& body,
         const std::function<void(const json&)>& print) {
  if (!body) return 1;
  if (args.json)
    std::printf("%s\n", body->dump(2).c_str());
  else
    print(*body);
  return 0;
}

namespace {

std::string deliveriesText(const json& list) {
  std::string out;
  for (auto& d : list) {
    if (!out.empty()) out += ", ";
    out += ctlText(d.value("destination", json())) + " " + ctlText(d.value("status", json()));
    if (auto a = d.value("attempts", 0); a > 1) out += " (" + std::to_string(a) + " attempts)";
  }
  return out.empty() ? "-" : out;
}

// A cell of at most `n` characters: an error is read in `show`.
std::string clipped(const std::string& s, size_t n = 60) {
  return s.size() <= n ? s : s.substr(0, n - 3) + "...";
}

struct MessagesArgs : CtlArgs {
  std::string interface, status, type, controlId, key;
  int64_t before = 0;
  int limit = 20;
};

int messages(const MessagesArgs& a) {
  std::string path = "/api/v1/interfaces/" + encoded(a.interface) +
                     "/messages?limit=" + std::to_string(a.limit);
  if (!a.status.empty()) path += "&status=" + encoded(a.status);
  if (!a.type.empty()) path += "&type=" + encoded(a.type);
  if (!a.controlId.empty()) path += "&control_id=" + encoded(a.controlId);
  if (!a.key.empty()) path += "&key=" + encoded(a.key);
  if (a.before > 0) path += "&before=" + std::to_string(a.before);
  return show(a, call(a, "messages", "GET", path), [&](const json& page) {
    std::vector<std::vector<std::string>> rows{
        {"ID", "RECEIVED", "STATUS", "TYPE", "CONTROL ID", "KEY", "DELIVERIES", "LAST ERROR"}};
    for (auto& m : page.value("items", json::array()))
      rows.push_back({ctlText(m.value("id", json())), ctlText(m.value("receivedAt", json())),
                      ctlText(m.value("status", json())), ctlText(m.value("type", json())),
                      ctlText(m.value("controlId", json())), ctlText(m.value("key", json())),
                      deliveriesText(m.value("deliveries", json::array())),
                      clipped(ctlText(m.value("lastError", json())))});
    if (rows.size() == 1)
      std::printf("no messages\n");
    else
      printTable(rows);
    if (auto next = page.value("next", json()); !next.is_null())
      std::printf("\nolder: ductusctl messages %s --before %s\n", a.interface.c_str(),
                  ctlText(next).c_str());
  });
}

struct ShowArgs : CtlArgs {
  int64_t id = 0;
  bool payload = false;
};

int showMessage(const ShowArgs& a) {
  auto message = call(a, "show", "GET", "/api/v1/messages/" + std::to_string(a.id));
  if (!message) return 1;
  std::optional<json> payload;
  if (a.payload) {
    payload = call(a, "show", "GET", "/api/v1/messages/" + std::to_string(a.id) + "/payload");
    if (!payload) return 1;
  }
  if (a.json) {
    json out = *message;
    if (payload) out["payload"] = *payload;
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  const json& m = *message;
  for (auto [label, key] : std::vector<std::pair<const char*, const char*>>{
           {"message", "id"},
           {"interface", "interface"},
           {"received", "receivedAt"},
           {"status", "status"},
           {"type", "type"},
           {"control id", "controlId"},
           {"key", "key"},
           {"lane", "lane"},
           {"bytes", "bytes"},
           {"copy of", "originId"},
           {"last error", "lastError"}})
    std::printf("%-11s %s\n", label, ctlText(m.value(key, json())).c_str());
  std::vector<std::vector<std::string>> rows{
      {"DESTINATION", "STATUS", "ATTEMPTS", "UPDATED", "OUTPUT SAVED", "LAST ERROR"}};
  for (auto& d : m.value("deliveries", json::array()))
    rows.push_back({ctlText(d.value("destination", json())), ctlText(d.value("status", json())),
                    ctlText(d.value("attempts", json())), ctlText(d.value("updatedAt", json())),
                    ctlText(d.value("outputSaved", json())),
                    ctlText(d.value("lastError", json()))});
  std::printf("\n");
  if (rows.size() == 1)
    std::printf("no deliveries\n");
  else
    printTable(rows);
  if (payload) {
    std::string enc = payload->value("encoding", "text");
    std::printf("\npayload (%s%s):\n", enc.c_str(),
                payload->value("charset", json()).is_string()
                    ? (", read as " + payload->value("charset", std::string())).c_str()
                    : "");
    // HL7's segments end in CR: a line each on a terminal.
    std::string text = payload->value("payload", std::string());
    for (auto& c : text)
      if (c == '\r') c = '\n';
    std::printf("%s\n", text.c_str());
  }
  return 0;
}

struct ResendArgs : CtlArgs {
  std::vector<int64_t> ids;
  std::vector<std::string> destinations;
};

int resend(const ResendArgs& a) {
  json body = {{"ids", a.ids}};
  if (!a.destinations.empty()) body["destinations"] = a.destinations;
  return show(a, call(a, "resend", "POST", "/api/v1/messages/resend", body), [](const json& r) {
    std::printf("%s deliveries of %s messages back to pending\n",
                ctlText(r.value("deliveries", json())).c_str(),
                ctlText(r.value("messages", json())).c_str());
    for (auto& d : r.value("resent", json::array()))
      std::printf("  %s %s/%s\n", ctlText(d.value("messageId", json())).c_str(),
                  ctlText(d.value("interface", json())).c_str(),
                  ctlText(d.value("destination", json())).c_str());
  });
}

struct DismissArgs : CtlArgs {
  std::vector<int64_t> ids;
  std::string reason;
};

// One call per message: each is its own transaction and audit row, and one
// that has nothing quarantined does not stop the others.
int dismiss(const DismissArgs& a) {
  int rc = 0;
  json all = json::array();
  for (int64_t id : a.ids) {
    auto r = call(a, "dismiss", "POST", "/api/v1/messages/" + std::to_string(id) + "/dismiss",
                  {{"reason", a.reason}});
    if (!r) {
      rc = 1;
      continue;
    }
    if (a.json)
      all.push_back(*r);
    else
      std::printf("%lld: %s quarantined deliveries filtered (%s)\n", static_cast<long long>(id),
                  ctlText(r->value("deliveries", json())).c_str(),
                  ctlText(r->value("interface", json())).c_str());
  }
  if (a.json) std::printf("%s\n", all.dump(2).c_str());
  return rc;
}

struct PauseArgs : CtlArgs {
  std::string interface, destination, reason;
};

// The destinations a pause or resume acts on: the one named, else every
// destination of the interface, as GET /interfaces lists them.
std::optional<std::vector<std::string>> destinationsOf(const PauseArgs& a,
                                                        const std::string& command) {
  if (!a.destination.empty()) return std::vector<std::string>{a.destination};
  auto list = call(a, command, "GET", "/api/v1/interfaces");
  if (!list) return std::nullopt;
  for (auto& f : list->value("interfaces", json::array())) {
    if (f.value("name", std::string()) != a.interface) continue;
    std::vector<std::string> names;
    for (auto& d : f.value("destinations", json::array()))
      names.push_back(d.value("name", std::string()));
    if (names.empty())
      std::fprintf(stderr, "ductusctl %s: %s has no queued destination\n", command.c_str(),
                   a.interface.c_str());
    if (names.empty()) return std::nullopt;
    return names;
  }
  std::fprintf(stderr, "ductusctl %s: this engine runs no interface %s\n", command.c_str(),
               a.interface.c_str());
  return std::nullopt;
}

int pauseOrResume(const PauseArgs& a, bool pausing) {
  const std::string command = pausing ? "pause" : "resume";
  auto names = destinationsOf(a, command);
  if (!names) return 1;
  int rc = 0;
  json all = json::array();
  for (auto& d : *names) {
    auto r = call(a, command, "POST",
                  "/api/v1/interfaces/" + encoded(a.interface) + "/destinations/" + encoded(d) +
                      "/" + command,
                  pausing ? json{{"reason", a.reason}} : json::object());
    if (!r) {
      rc = 1;
      continue;
    }
    if (a.json) {
      all.push_back(*r);
      continue;
    }
    auto p = r->value("paused", json());
    if (p.is_null())
      std::printf("%s/%s delivers again\n", a.interface.c_str(), d.c_str());
    else
      std::printf("%s/%s paused since %s by %s (%zu reason(s))\n", a.interface.c_str(), d.c_str(),
                  ctlText(p.value("since", json())).c_str(), ctlText(p.value("by", json())).c_str(),
                  p.value("reasons", json::array()).size());
  }
  if (a.json) std::printf("%s\n", all.dump(2).c_str());
  return rc;
}

void printDrain(const json& d) {
  std::printf("draining %s%s; stores in flight %s, pending %s: %s\n",
              ctlText(d.value("draining", json())).c_str(),
              d.value("stopWhenDrained", false) ? " (the engine stops once drained)" : "",
              ctlText(d.value("storesInFlight", json())).c_str(),
              ctlText(d.value("pending", json())).c_str(),
              d.value("drained", false) ? "drained" : "not drained yet");
}

}  // namespace

void addCtlActionCommands(CLI::App& program, int& exitCode) {
  auto ma = std::make_shared<MessagesArgs>();
  auto* messagesCmd =
      program.add_subcommand("messages", "an interface's messages, newest first, with filters");
  messagesCmd->add_option("INTERFACE", ma->interface, "the interface")->required();
  messagesCmd
      ->add_option("--status", ma->status, "pending, sent, filtered, quarantined or duplicate")
      ->type_name("STATUS");
  messagesCmd->add_option("--type", ma->type, "message type, e.g. ADT^A01 (leading components)")
      ->type_name("TYPE");
  messagesCmd->add_option("--control-id", ma->controlId, "MSH-10, exactly")->type_name("ID");
  messagesCmd->add_option("--key", ma->key, "the ordering key's value, exactly")->type_name("KEY");
  messagesCmd->add_option("--before", ma->before, "messages older than this id (the next page)")
      ->type_name("ID");
  messagesCmd->add_option("--limit", ma->limit, "at most this many (1 to 500)")
      ->check(CLI::Range(1, 500))
      ->capture_default_str();
  addCommonOptions(*messagesCmd, *ma);
  messagesCmd->callback([ma, &exitCode] { exitCode = messages(*ma); });

  auto sa = std::make_shared<ShowArgs>();
  auto* showCmd = program.add_subcommand("show", "one message: what it is and its deliveries");
  showCmd->add_option("ID", sa->id, "the message's id")->required();
  showCmd->add_flag("--payload", sa->payload,
                    "also the payload and saved outputs (written to the audit log first)");
  addCommonOptions(*showCmd, *sa);
  showCmd->callback([sa, &exitCode] { exitCode = showMessage(*sa); });

  auto ra = std::make_shared<ResendArgs>();
  auto* resendCmd = program.add_subcommand(
      "resend", "messages' quarantined (or named) deliveries back to pending, up to 500 ids");
  resendCmd->add_option("ID", ra->ids, "message ids")->required();
  resendCmd
      ->add_option("--destination", ra->destinations,
                   "these destinations whatever they ended as (repeat for several)")
      ->type_name("NAME");
  addCommonOptions(*resendCmd, *ra);
  resendCmd->callback([ra, &exitCode] {
    if (ra->ids.size() > 500) {
      std::fprintf(stderr, "ductusctl resend: at most 500 ids at once\n");
      exitCode = 2;
      return;
    }
    exitCode = resend(*ra);
  });

  auto da = std::make_shared<DismissArgs>();
  auto* dismissCmd = program.add_subcommand(
      "dismiss", "filter messages' quarantined deliveries, saying who and why");
  dismissCmd->add_option("ID", da->ids, "message ids")->required();
  dismissCmd->add_option("--reason", da->reason, "why (kept in the message and the audit log)")
      ->required()
      ->type_name("TEXT");
  addCommonOptions(*dismissCmd, *da);
  dismissCmd->callback([da, &exitCode] { exitCode = dismiss(*da); });

  for (bool pausing : {true, false}) {
    auto pa = std::make_shared<PauseArgs>();
    auto* cmd = program.add_subcommand(
        pausing ? "pause" : "resume",
        pausing ? "hold a destination's delivery (every destination of the interface without one); "
                  "kept across restarts"
                : "let a paused destination (or every one of the interface) deliver again");
    cmd->add_option("INTERFACE", pa->interface, "the interface")->required();
    cmd->add_option("DESTINATION", pa->destination, "the destination; default: all of them");
    if (pausing)
      cmd->add_option("--reason", pa->reason, "why (shown with the pause, kept in the audit log)")
          ->required()
          ->type_name("TEXT");
    addCommonOptions(*cmd, *pa);
    cmd->callback([pa, pausing, &exitCode] { exitCode = pauseOrResume(*pa, pausing); });
  }

  auto restartArgs = std::make_shared<PauseArgs>();
  auto* restartCmd = program.add_subcommand(
      "restart", "load again, from disk, the code of an interface runaways stopped");
  restartCmd->add_option("INTERFACE", restartArgs->interface, "the interface")->required();
  addCommonOptions(*restartCmd, *restartArgs);
  restartCmd->callback([restartArgs, &exitCode] {
    const auto& a = *restartArgs;
    exitCode = show(a,
                    call(a, "restart", "POST",
                         "/api/v1/interfaces/" + encoded(a.interface) + "/restart", json::object()),
                    [&](const json&) { std::printf("%s runs again\n", a.interface.c_str()); });
  });

  struct DrainArgs : CtlArgs {
    bool stop = false, status = false;
  };
  auto dr = std::make_shared<DrainArgs>();
  auto* drainCmd = program.add_subcommand(
      "drain", "close every intake and let the queues empty (--stop: then the engine exits)");
  drainCmd->add_flag("--stop", dr->stop, "exit once drained");
  drainCmd->add_flag("--status", dr->status, "only say how the drain stands");
  addCommonOptions(*drainCmd, *dr);
  drainCmd->callback([dr, &exitCode] {
    const auto& a = *dr;
    exitCode = a.status ? show(a, call(a, "drain", "GET", "/api/v1/engine/drain"), printDrain)
                        : show(a,
                               call(a, "drain", "POST", "/api/v1/engine/drain",
                                    {{"stop", a.stop}}),
                               printDrain);
  });

  auto ua = std::make_shared<CtlArgs>();
  auto* undrainCmd = program.add_subcommand("undrain", "open the intakes again after a drain");
  addCommonOptions(*undrainCmd, *ua);
  undrainCmd->callback([ua, &exitCode] {
    exitCode = show(*ua, call(*ua, "undrain", "DELETE", "/api/v1/engine/drain"), printDrain);
  });
}

}  // namespace ductus::ctl
