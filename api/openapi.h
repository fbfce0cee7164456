// The OpenAPI 3.1 document of a route table: every route's path, method,
// operationId, parameters, security and schemas, written from the same
// vector<Route> the router serves, so the document can't list an operation
// the server doesn't answer or miss one it does.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "api/route.h"

namespace ductus::api {

// The document as JSON text, indented.
std::string openApiDocument(const std::vector<Route>& routes);

// GET /api/v1/openapi.json (no credentials): serves `*document`, which the
// caller fills once the table it belongs to is complete (routes.h).
Route openApiRoute(std::shared_ptr<const std::string> document);

}  // namespace ductus::api
