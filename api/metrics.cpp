#include "api/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "common/monitor/settings.h"

namespace ductus::api {

const std::vector<MetricFamily>& metricFamilies() {
  static const std::vector<MetricFamily> families = {
      {"ductus_messages_received_total",
       "counter",
       "Messages stored by an interface's intake since the engine started, duplicates included.",
       {"interface"}},
      {"ductus_messages_duplicates_total",
       "counter",
       "Messages an interface's intake took as duplicates since the engine started.",
       {"interface"}},
      {"ductus_deliveries_total",
       "counter",
       "Deliveries finished since the engine started, by outcome (sent, filtered, "
       "quarantined, or routed into another interface's queue).",
       {"interface", "destination", "outcome"}},
      {"ductus_delivery_retries_total",
       "counter",
       "Transient delivery failures since the engine started, each tried again later.",
       {"interface", "destination"}},
      {"ductus_queue_pending",
       "gauge",
       "Deliveries pending now for a destination, as the store counts them.",
       {"interface", "destination"}},
      {"ductus_queue_quarantined",
       "gauge",
       "Deliveries quarantined now for a destination, as the store counts them.",
       {"interface", "destination"}},
      {"ductus_held_messages",
       "gauge",
       "Messages in the held area (unfinished messages of expired retention periods), by "
       "status, as retention's last run counted them.",
       {"status"}},
      {"ductus_held_bytes",
       "gauge",
       "Disk the held area's tables take, indexes and TOAST included, as retention's last "
       "run counted it.",
       {}},
      {"ductus_retention_moved_total",
       "counter",
       "Messages retention moved to the held area since the engine started.",
       {}},
      {"ductus_destination_state",
       "gauge",
       "1 for the state the monitor judged a destination in (paused, stalled, error, behind, "
       "ok), 0 for the others.",
       {"interface", "destination", "state"}},
      {"ductus_interface_state",
       "gauge",
       "1 for the state the monitor judged an interface in (stopped, paused, stalled, error, "
       "behind, intake_stopped, late, quiet, ok), 0 for the others.",
       {"interface", "state"}},
      {"ductus_queue_oldest_seconds",
       "gauge",
       "How long a destination's oldest waiting message has waited; 0 when nothing waits.",
       {"interface", "destination"}},
      {"ductus_interface_stopped",
       "gauge",
       "1 while an interface's code is stopped (runaways), its messages left pending.",
       {"interface"}},
      {"ductus_draining", "gauge", "1 while the engine drains: gates closed, queues emptying.", {}},
      {"ductus_tls_handshakes_total",
       "counter",
       "TLS handshakes a listener finished and allowed, since the engine started.",
       {"listener"}},
      {"ductus_tls_handshake_failures_total",
       "counter",
       "TLS handshakes a listener refused: failed, timed out, or a client certificate not "
       "allowed.",
       {"listener"}},
      {"ductus_connections_refused_total",
       "counter",
       "Connections a listener dropped unread because their address is not in its allow:.",
       {"listener"}},
      {"ductus_certificate_expiry_timestamp_seconds",
       "gauge",
       "When a certificates: entry's certificate expires (Unix time; a CA alone: its "
       "earliest), as loaded now: a renewal on disk moves it within a minute.",
       {"certificate"}},
      {"ductus_worker_restarts_total",
       "counter",
       "Worker processes started again since the engine started, by worker group.",
       {"group"}},
      {"ductus_http_request_seconds",
       "histogram",
       "One answer of the REST API, from its request's arrival to the answer handed to the "
       "connection (a sign-in's password hashing included).",
       {}},
      {"ductus_delivery_latency_seconds",
       "histogram",
       "From a message's receipt to its delivery's outcome at a destination.",
       {"interface", "destination"}},
      {"ductus_send_seconds",
       "histogram",
       "One send to a destination, from handing it to the sender to its answer.",
       {"interface", "destination"}},
      {"ductus_transform_seconds",
       "histogram",
       "One call of a destination's function, the wait for a worker included.",
       {"interface", "destination"}},
  };
  return families;
}

const MetricFamily& metricFamily(std::string_view name) {
  for (const auto& f : metricFamilies())
    if (f.name == name) return f;
  std::fprintf(stderr, "ductus: no metric family %.*s in metricFamilies()\n",
               static_cast<int>(name.size()), name.data());
  std::abort();
}

void MetricsText::family(std::string_view name) {
  const MetricFamily& f = metricFamily(name);
  family(f.name, f.type, f.help);
}

void MetricsText::family(std::string_view name, std::string_view type, std::string_view help) {
  out_ += "# HELP ";
  out_ += name;
  out_ += ' ';
  out_ += escapeHelp(help);
  out_ += "\n# TYPE ";
  out_ += name;
  out_ += ' ';
  out_ += type;
  out_ += '\n';
}

void MetricsText::labels(const Labels& labels, std::string_view le) {
  if (labels.empty() && le.empty()) return;
  out_ += '{';
  bool first = true;
  for (auto& [k, v] : labels) {
    if (!first) out_ += ',';
    first = false;
    out_ += k;
    out_ += "=\"";
    out_ += escapeLabelValue(v);
    out_ += '"';
  }
  if (!le.empty()) {
    if (!first) out_ += ',';
    out_ += "le=\"";
    out_ += le;
    out_ += '"';
  }
  out_ += '}';
}

void MetricsText::sample(std::string_view name, const Labels& l, double value) {
  out_ += name;
  labels(l);
  out_ += ' ';
  out_ += formatValue(value);
  out_ += '\n';
}

void MetricsText::histogram(std::string_view name, const Labels& l, const HistogramInfo& h) {
  std::string bucket = std::string(name) + "_bucket";
  int64_t cumulative = 0;
  for (size_t i = 0; i < h.bounds.size(); ++i) {
    if (i < h.buckets.size()) cumulative += h.buckets[i];
    out_ += bucket;
    labels(l, formatValue(h.bounds[i]));
    out_ += ' ' + std::to_string(cumulative) + '\n';
  }
  // +Inf is every observation: the count, so the two always agree.
  out_ += bucket;
  labels(l, "+Inf");
  out_ += ' ' + std::to_string(h.count) + '\n';
  sample(std::string(name) + "_sum", l, h.sumSeconds);
  out_ += std::string(name) + "_count";
  labels(l);
  out_ += ' ' + std::to_string(h.count) + '\n';
}

std::string escapeLabelValue(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string escapeHelp(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string formatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  // Fixed where it stays short ("0.0005" as Prometheus' own clients write
  // a bound, not "5e-04"), the shortest form elsewhere.
  double a = std::fabs(v);
  auto format = a == 0 || (a >= 1e-6 && a < 1e21) ? std::chars_format::fixed
                                                  : std::chars_format::general;
  char buf[400];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, format);
  if (ec != std::errc()) return "NaN";
  return std::string(buf, end);
}

namespace {

using Labels = MetricsText::Labels;

// A histogram with no buckets (a fake engine's, or a respond-mode
// interface's) would render as a lone +Inf: leave it out instead.
bool hasBuckets(const HistogramInfo& h) { return !h.bounds.empty(); }

void histogramFamily(MetricsText& m, const std::vector<InterfaceInfo>& interfaces,
                     std::string_view name, HistogramInfo DestinationInfo::*which) {
  m.family(name);
  for (auto& f : interfaces)
    for (auto& d : f.destinations)
      if (hasBuckets(d.*which))
        m.histogram(name, {{"interface", f.name}, {"destination", d.name}}, d.*which);
}

}  // namespace

HistogramInfo histogramInfo(const Histogram& h) {
  auto c = h.snapshot();
  HistogramInfo i;
  i.bounds.reserve(kHistogramBoundsUs.size());
  for (int64_t us : kHistogramBoundsUs) i.bounds.push_back(static_cast<double>(us) / 1e6);
  i.buckets = std::move(c.buckets);
  i.sumSeconds = static_cast<double>(c.sumUs) / 1e6;
  i.count = c.count;
  if (c.count > 0) i.maxSeconds = static_cast<double>(c.maxUs) / 1e6;
  return i;
}

std::optional<double> histogramQuantile(const HistogramInfo& h, double q) {
  if (h.count <= 0 || h.bounds.empty()) return std::nullopt;
  double rank = q * static_cast<double>(h.count);
  int64_t below = 0;
  // Never more than was observed: in the wide buckets (5 min to 1 h) a
  // linear guess can land far above every value (a p50 of 1,950 s for
  // waits of about 440 s).
  auto capped = [&h](double v) { return h.maxSeconds ? std::min(v, *h.maxSeconds) : v; };
  for (size_t i = 0; i < h.bounds.size() && i < h.buckets.size(); ++i) {
    int64_t in = h.buckets[i];
    if (in > 0 && static_cast<double>(below + in) >= rank) {
      double lo = i == 0 ? 0 : h.bounds[i - 1];
      return capped(lo + (h.bounds[i] - lo) * (rank - static_cast<double>(below)) /
                             static_cast<double>(in));
    }
    below += in;
  }
  // Past the last bound: the largest seen says more than the bound.
  return h.maxSeconds ? std::max(*h.maxSeconds, h.bounds.back()) : h.bounds.back();
}

std::string renderMetrics(const EngineInfo& engine, const std::vector<InterfaceInfo>& interfaces,
                          const Histogram* requestTimes) {
  MetricsText m;
  m.family("ductus_messages_received_total");
  for (auto& f : interfaces)
    m.sample("ductus_messages_received_total", {{"interface", f.name}},
             static_cast<double>(f.received));

  m.family("ductus_messages_duplicates_total");
  for (auto& f : interfaces)
    m.sample("ductus_messages_duplicates_total", {{"interface", f.name}},
             static_cast<double>(f.duplicates));

  m.family("ductus_deliveries_total");
  for (auto& f : interfaces)
    for (auto& dest : f.destinations)
      for (auto [outcome, n] : {std::pair{"sent", dest.sent}, std::pair{"filtered", dest.filtered},
                                std::pair{"quarantined", dest.quarantined},
                                std::pair{"routed", dest.routed}})
        m.sample("ductus_deliveries_total",
                 {{"interface", f.name}, {"destination", dest.name}, {"outcome", outcome}},
                 static_cast<double>(n));

  m.family("ductus_delivery_retries_total");
  for (auto& f : interfaces)
    for (auto& dest : f.destinations)
      m.sample("ductus_delivery_retries_total", {{"interface", f.name}, {"destination", dest.name}},
               static_cast<double>(dest.retries));

  m.family("ductus_queue_pending");
  for (auto& f : interfaces)
    for (auto& dest : f.destinations)
      if (dest.pending)
        m.sample("ductus_queue_pending", {{"interface", f.name}, {"destination", dest.name}},
                 static_cast<double>(*dest.pending));
  m.family("ductus_queue_quarantined");
  for (auto& f : interfaces)
    for (auto& dest : f.destinations)
      if (dest.quarantinedNow)
        m.sample("ductus_queue_quarantined", {{"interface", f.name}, {"destination", dest.name}},
                 static_cast<double>(*dest.quarantinedNow));

  if (engine.held) {
    const auto& h = *engine.held;
    m.family("ductus_held_messages");
    for (auto [status, n] :
         {std::pair{"pending", h.pending}, std::pair{"quarantined", h.quarantined},
          std::pair{"finished", h.finished}})
      m.sample("ductus_held_messages", {{"status", status}}, static_cast<double>(n));
    m.family("ductus_held_bytes");
    m.sample("ductus_held_bytes", {}, static_cast<double>(h.bytes));
    m.family("ductus_retention_moved_total");
    m.sample("ductus_retention_moved_total", {}, static_cast<double>(h.moved));
  }

  // The monitor's states as Prometheus' enum idiom: one series per state,
  // 1 for the current one, so a query matches a state by label and a
  // change shows as two series moving. Only what the engine has judged.
  using monitor::State;
  constexpr State kDestinationStates[] = {State::Paused, State::Stalled, State::Error,
                                          State::Behind, State::Ok};
  constexpr State kInterfaceStates[] = {State::Stopped, State::Paused, State::Stalled,
                                        State::Error,   State::Behind, State::IntakeStopped,
                                        State::Late,    State::Quiet,  State::Ok};
  m.family("ductus_destination_state");
  for (auto& f : interfaces)
    for (auto& dest : f.destinations)
      if (dest.health)
        for (State s : kDestinationStates)
          m.sample("ductus_destination_state",
                   {{"interface", f.name}, {"destination", dest.name},
                    {"state", monitor::stateName(s)}},
                   dest.health->state == monitor::stateName(s) ? 1 : 0);
  m.family("ductus_interface_state");
  for (auto& f : interfaces)
    if (f.health)
      for (State s : kInterfaceStates)
        m.sample("ductus_interface_state",
                 {{"interface", f.name}, {"state", monitor::stateName(s)}},
                 f.health->state == monitor::stateName(s) ? 1 : 0);
  m.family("ductus_queue_oldest_seconds");
  for (auto& f : interfaces)
    for (auto& dest : f.destinations)
      if (dest.health)
        m.sample("ductus_queue_oldest_seconds", {{"interface", f.name}, {"destination", dest.name}},
                 dest.health->oldestSeconds.value_or(0));

  m.family("ductus_interface_stopped");
  for (auto& f : interfaces)
    m.sample("ductus_interface_stopped", {{"interface", f.name}}, f.state == "stopped" ? 1 : 0);

  m.family("ductus_draining");
  m.sample("ductus_draining", {}, engine.state == EngineState::Draining ? 1 : 0);

  m.family("ductus_tls_handshakes_total");
  m.family("ductus_tls_handshake_failures_total");
  m.family("ductus_connections_refused_total");
  for (auto& l : engine.listeners) {
    if (l.tls) {
      m.sample("ductus_tls_handshakes_total", {{"listener", l.name}},
               static_cast<double>(l.handshakes));
      m.sample("ductus_tls_handshake_failures_total", {{"listener", l.name}},
               static_cast<double>(l.handshakeFailures));
    }
    m.sample("ductus_connections_refused_total", {{"listener", l.name}},
             static_cast<double>(l.refused));
  }
  m.family("ductus_certificate_expiry_timestamp_seconds");
  for (auto& c : engine.certificates)
    m.sample("ductus_certificate_expiry_timestamp_seconds", {{"certificate", c.name}},
             static_cast<double>(
                 std::chrono::duration_cast<std::chrono::seconds>(c.notAfter.time_since_epoch())
                     .count()));

  // A group's slots summed: a group is what a person configured.
  std::map<std::string, int64_t> restarts;
  for (auto& w : engine.workers) restarts[w.group] += w.restarts;
  m.family("ductus_worker_restarts_total");
  for (auto& [group, n] : restarts)
    m.sample("ductus_worker_restarts_total", {{"group", group}}, static_cast<double>(n));

  histogramFamily(m, interfaces, "ductus_delivery_latency_seconds", &DestinationInfo::latency);
  histogramFamily(m, interfaces, "ductus_send_seconds", &DestinationInfo::send);
  histogramFamily(m, interfaces, "ductus_transform_seconds", &DestinationInfo::transform);
  if (requestTimes) {
    m.family("ductus_http_request_seconds");
    m.histogram("ductus_http_request_seconds", {}, histogramInfo(*requestTimes));
  }
  return m.take();
}

std::vector<Route> metricsRoutes(EngineView* engine, const Histogram* requestTimes) {
  Route r;
  r.method = "GET";
  r.path = "/api/v1/metrics";
  r.operationId = "getMetrics";
  r.summary = "Counters, queue gauges and timings in Prometheus' text format (version 0.0.4)";
  r.tag = "engine";
  r.requirement = Requirement::toRead(Role::Viewer);
  r.handler = [engine, requestTimes](const ApiRequest&, ApiRespond respond) {
    if (!engine) return respond(jsonError(503, "unavailable", "no engine is running"));
    engine->interfacesWithPending([engine, requestTimes,
                                   respond](Result<std::vector<InterfaceInfo>> list) {
      if (!list) return respond(jsonError(503, "unavailable", list.error().message));
      respond(net::HttpResponse{
          200,
          {{"Content-Type", kMetricsContentType}, {"Cache-Control", "no-store"}},
          renderMetrics(engine->engine(), *list, requestTimes)});
    });
  };
  return {std::move(r)};
}

}  // namespace ductus::api
