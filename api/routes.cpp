#include "api/routes.h"

#include <memory>

#include "api/alert_routes.h"
#include "api/audit/audit_routes.h"
#include "api/engine_actions.h"
#include "api/engine_routes.h"
#include "api/event_routes.h"
#include "api/events.h"
#include "api/hotspot_routes.h"
#include "api/interface_configuration.h"
#include "api/message_browser.h"
#include "api/message_export.h"
#include "api/message_routes.h"
#include "api/metrics.h"
#include "api/openapi.h"
#include "api/retention_routes.h"
#include "api/traffic_routes.h"

namespace ductus::api {

std::vector<Route> allRoutes(const RouteDeps& deps) {
  std::vector<Route> routes = engineRoutes(deps.engine);
  for (auto& r : metricsRoutes(deps.engine, deps.requestTimes)) routes.push_back(std::move(r));
  for (auto& r : authRoutes(deps.auth)) routes.push_back(std::move(r));
  for (auto& r : auditRoutes(deps.auth)) routes.push_back(std::move(r));
  for (auto& r : messageRoutes(deps.auth, deps.engine)) routes.push_back(std::move(r));
  for (auto& r : engineActionRoutes(deps.auth, deps.engine)) routes.push_back(std::move(r));
  for (auto& r : interfaceConfigurationRoutes(deps.engine)) routes.push_back(std::move(r));
  for (auto& r : messageBrowserRoutes(deps.auth, deps.engine)) routes.push_back(std::move(r));
  for (auto& r : messageExportRoutes(deps.auth, deps.engine)) routes.push_back(std::move(r));
  for (auto& r : eventsRoutes(deps.engine)) routes.push_back(std::move(r));
  for (auto& r : hotspotRoutes(deps.engine)) routes.push_back(std::move(r));
  for (auto& r : alertRoutes(deps.auth)) routes.push_back(std::move(r));
  for (auto& r : retentionRoutes(deps.auth, deps.engine)) routes.push_back(std::move(r));
  for (auto& r : trafficRoutes(deps.auth, deps.engine)) routes.push_back(std::move(r));
  for (auto& r : eventRoutes(deps.auth)) routes.push_back(std::move(r));
  auto document = std::make_shared<std::string>();
  routes.push_back(openApiRoute(document));
  // Written after the list is complete, so it includes its own route.
  *document = openApiDocument(routes);
  return routes;
}

}  // namespace ductus::api
