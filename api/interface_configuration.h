// GET /api/v1/interfaces/{name}/configuration (viewer): an interface as
// the engine runs it, read-only: its source and that source's settings,
// format, ordering, dedupe, retention, monitor: and each destination, from
// the configuration the engine loaded at its start (EngineView::
// interfaceConfig), not from the files now on disk.
//
// Secrets never leave: the model holds substituted values, so every field
// that can carry a credential is answered "***" when set (passwords,
// inline private keys, HTTP header values, a URL's user information and
// query), and what names a secret's place (a certificate's name, a key
// file's path) is shown instead of its contents.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/engine_view.h"
#include "api/route.h"
#include "common/config/model.h"

namespace ductus::api {

// What is shown in place of a value that may be a credential.
inline constexpr const char* kRedacted = "***";

// The answer's body for one interface.
nlohmann::ordered_json interfaceConfigurationJson(const config::InterfaceConfig& c);

// "https://***@host:8443/path?***": a URL without its user information
// and query (either may hold a credential); kept as written otherwise.
std::string redactedUrl(const std::string& url);

// engine must outlive the routes; null: for the OpenAPI document only.
std::vector<Route> interfaceConfigurationRoutes(EngineView* engine);

}  // namespace ductus::api
