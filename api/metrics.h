// GET /api/v1/metrics: the engine's counters, gauges and histograms in
// Prometheus' text format (version 0.0.4), for a viewer. Counters and
// histograms count since the engine started; the queue gauges are asked
// of the store at each scrape.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/engine_view.h"
#include "common/histogram.h"
#include "api/route.h"

namespace ductus::api {

inline constexpr const char* kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";

// A metric family the engine exports: the one list GET /metrics renders
// from (renderMetrics names a family, its type and help come from here) and
// `ductus reference docs` writes metrics.md from.
struct MetricFamily {
  std::string_view name;  // "ductus_deliveries_total"
  std::string_view type;  // "counter", "gauge" or "histogram"
  std::string_view help;
  std::vector<std::string_view> labels;  // a histogram's `le` not included
};
const std::vector<MetricFamily>& metricFamilies();
// The family named; aborts when metricFamilies() has none.
const MetricFamily& metricFamily(std::string_view name);

// The text format, one family at a time: family() writes its HELP and TYPE
// lines, then its samples follow (a family's samples must stay together).
class MetricsText {
 public:
  using Labels = std::vector<std::pair<std::string_view, std::string_view>>;

  // A family of metricFamilies(): its HELP and TYPE from there.
  void family(std::string_view name);
  // type: "counter", "gauge" or "histogram".
  void family(std::string_view name, std::string_view type, std::string_view help);
  // `name` is the family's, or one of a histogram's _bucket, _sum, _count.
  void sample(std::string_view name, const Labels& labels, double value);
  // name_bucket per bound (cumulative) and +Inf, name_sum, name_count.
  void histogram(std::string_view name, const Labels& labels, const HistogramInfo& h);

  const std::string& text() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  void labels(const Labels& labels, std::string_view le = {});
  std::string out_;
};

// A label value as the format wants it: \ " and newline escaped.
std::string escapeLabelValue(std::string_view v);
// A HELP text: \ and newline escaped.
std::string escapeHelp(std::string_view v);
// The shortest text that reads back as the same double; +Inf, -Inf, NaN.
std::string formatValue(double v);

// A histogram's counts as the view shows them: bounds in seconds.
HistogramInfo histogramInfo(const Histogram& h);
// The q-quantile (0 < q < 1) in seconds, as Prometheus' histogram_quantile
// estimates it: linear within the bucket that holds it (from 0 for the
// first); past the last bound, the last bound. nullopt with no observation.
std::optional<double> histogramQuantile(const HistogramInfo& h, double q);

// Every metric, from what the engine shows of itself; `requestTimes` (the
// API's own answers, ductus_http_request_seconds) left out when null.
std::string renderMetrics(const EngineInfo& engine, const std::vector<InterfaceInfo>& interfaces,
                          const Histogram* requestTimes = nullptr);

// `engine` null: for the document only; the handler answers 503.
// `requestTimes`: the API server's (api_server.h), or null.
std::vector<Route> metricsRoutes(EngineView* engine, const Histogram* requestTimes = nullptr);

}  // namespace ductus::api
