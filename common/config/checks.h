// Checks across files, run once every file has been read: routes (target,
// source, format, no loops), listening addresses, and named resources.
#pragma once

#include "common/config/diagnostic.h"
#include "common/config/model.h"

namespace ductus::config {

// A route's target exists, has `source: internal`, reads the format the
// destination outputs; no route loops.
void checkRoutes(const Project& project, Diagnostics& out);

// No two listeners (MLLP, HTTP sources, the API) on one address, except
// HTTP interfaces sharing a port with distinct paths.
void checkEndpoints(const Project& project, Diagnostics& out);

// http destinations' api: and dedicated_pools name resources that exist.
void checkResources(const Project& project, Diagnostics& out);

}  // namespace ductus::config
