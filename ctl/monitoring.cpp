#include "ctl/monitoring.h"

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "ctl/actions.h"
#include "ctl/client.h"

namespace ductus::ctl {
using nlohmann::json;

namespace {

std::string cell(const json& j, const char* key) { return ctlText(j.value(key, json())); }

// A cell of at most `n` characters: a receiver's error can be long.
std::string clip(const std::string& s, size_t n = 50) {
  return s.size() <= n ? s : s.substr(0, n - 3) + "...";
}

void printHotspots(const json& body) {
  auto list = body.value("destinations", json::array());
  if (list.empty()) return (void)std::printf("no backlog anywhere\n");
  bool first = true;
  for (auto& d : list) {
    if (!first) std::printf("\n");
    first = false;
    std::printf("%s/%s: %s waiting\n", cell(d, "interface").c_str(),
                cell(d, "destination").c_str(), cell(d, "waiting").c_str());
    for (auto& f : d.value("findings", json::array()))
      std::printf("  %s: %s\n", cell(f, "kind").c_str(), cell(f, "text").c_str());
    std::vector<std::vector<std::string>> rows{
        {"  LANE", "WAITING", "FIRST", "KEY", "ATTEMPTS", "NEXT TRY", "RECEIVED", "LAST ERROR"}};
    for (auto& l : d.value("lanes", json::array())) {
      std::string key = l.value("firstKey", std::string());
      std::string error = l.value("firstLastError", std::string());
      // NEXT TRY: when the delivery loop holding the lane tries again after
      // a failure (it waits as a whole, for each of its lanes); null, so
      // "-", while it isn't waiting to retry.
      rows.push_back({"  " + cell(l, "lane"), cell(l, "waiting"), cell(l, "firstMessageId"),
                      key.empty() ? "-" : key, cell(l, "firstAttempts"), cell(l, "nextRetryAt"),
                      cell(l, "firstReceivedAt"), error.empty() ? "-" : clip(error)});
    }
    if (rows.size() > 1) printTable(rows);
  }
}

// What an alert is about, as a person reads it: adt/lab, adt, certificate x.
std::string subjectOf(const json& a) {
  if (auto c = a.value("certificate", json()); c.is_string())
    return "certificate " + c.get<std::string>();
  std::string s = cell(a, "interface");
  if (auto d = a.value("destination", json()); d.is_string()) s += "/" + d.get<std::string>();
  return s;
}

void printAlerts(const json& body) {
  std::vector<std::vector<std::string>> rows{
      {"ID", "PHASE", "STATE", "SEVERITY", "SUBJECT", "SINCE", "ACKNOWLEDGED", "SILENCED UNTIL"}};
  for (auto& a : body.value("alerts", json::array())) {
    std::string acked = "-";
    if (a.value("acknowledgedAt", json()).is_string())
      acked = cell(a, "acknowledgedAt") + " by " + cell(a, "acknowledgedBy");
    rows.push_back({cell(a, "id"), cell(a, "phase"), cell(a, "state"), cell(a, "severity"),
                    subjectOf(a), cell(a, "changedAt"), acked, cell(a, "silencedUntil")});
  }
  if (rows.size() == 1) return (void)std::printf("no alerts\n");
  printTable(rows);
}

void printOneAlert(const json& a) {
  std::printf("alert %s (%s): %s %s %s", cell(a, "id").c_str(), subjectOf(a).c_str(),
              cell(a, "phase").c_str(), cell(a, "state").c_str(), cell(a, "severity").c_str());
  if (a.value("acknowledgedAt", json()).is_string())
    std::printf(", acknowledged by %s", cell(a, "acknowledgedBy").c_str());
  if (a.value("silencedUntil", json()).is_string())
    std::printf(", silenced until %s by %s", cell(a, "silencedUntil").c_str(),
                cell(a, "silencedBy").c_str());
  std::printf("\n");
}

struct AlertArgs : CtlArgs {
  int64_t id = 0;
  std::string forHow;
};

}  // namespace

void addCtlMonitorCommands(CLI::App& program, int& exitCode) {
  auto ha = std::make_shared<CtlArgs>();
  auto* hotspots = program.add_subcommand(
      "hotspots", "where each destination's backlog waits: its busiest lanes and what they show");
  addCommonOptions(*hotspots, *ha);
  hotspots->footer(
      "A lane's FIRST is the message its worker is on: the one holding the lane;\n"
      "NEXT TRY, when a failed attempt waits to be retried, is when it is tried again.\n"
      "Findings: blocked-lane (one message blocks a lane; if the receiver took others\n"
      "since, that message is the trouble: `ductusctl show ID`), receiver-down (every\n"
      "lane blocked), hot-key (one key holds most of the backlog), unowned-lanes.");
  hotspots->callback([ha, &exitCode] {
    exitCode = show(*ha, call(*ha, "hotspots", "GET", "/api/v1/hotspots"), printHotspots);
  });

  auto la = std::make_shared<CtlArgs>();
  auto* alerts = program.add_subcommand(
      "alerts", "the alerts, firing and recovering first; ack or silence one");
  addCommonOptions(*alerts, *la);
  alerts->footer(
      "PHASE: firing (notified), recovering (better, waiting to settle) or ok. STATE is\n"
      "what it fired for (see `ductusctl status --help`). SINCE: its last change.\n"
      "`ductusctl alerts ack ID` stops the reminders of this firing; `ductusctl alerts\n"
      "silence ID --for 2h` sends nothing until then. Both are audited as you.");
  alerts->callback([la, alerts, &exitCode] {
    if (!alerts->get_subcommands().empty()) return;  // ack or silence ran
    exitCode = show(*la, call(*la, "alerts", "GET", "/api/v1/alerts"), printAlerts);
  });

  auto aa = std::make_shared<AlertArgs>();
  auto* ack = alerts->add_subcommand(
      "ack", "acknowledge a firing alert: no more reminders until it fires again");
  ack->add_option("ID", aa->id, "the alert's id (ductusctl alerts)")->required();
  addCommonOptions(*ack, *aa);
  ack->callback([aa, &exitCode] {
    exitCode = show(*aa,
                    call(*aa, "alerts ack", "POST",
                         "/api/v1/alerts/" + std::to_string(aa->id) + "/acknowledge",
                         json::object()),
                    printOneAlert);
  });

  auto sa = std::make_shared<AlertArgs>();
  auto* silence = alerts->add_subcommand(
      "silence", "send nothing about a firing alert for a while (what waits is given up)");
  silence->add_option("ID", sa->id, "the alert's id (ductusctl alerts)")->required();
  silence->add_option("--for", sa->forHow, "how long: 30m, 2h, 1d (1m to 30d)")
      ->required()
      ->type_name("DURATION");
  addCommonOptions(*silence, *sa);
  silence->callback([sa, &exitCode] {
    exitCode = show(*sa,
                    call(*sa, "alerts silence", "POST",
                         "/api/v1/alerts/" + std::to_string(sa->id) + "/silence",
                         {{"for", sa->forHow}}),
                    printOneAlert);
  });
}

}  // namespace ductus::ctl
