// GET /api/v1/hotspots (viewer): where each destination's backlog waits,
// from EngineView::hotspots(): its busiest lanes, each lane's first
// waiting message (the one its worker is on: what holds the lane) and
// what they show ("blocked-lane", "receiver-down", "hot-key",
// "unowned-lanes"), each said in a sentence.
#pragma once

#include <vector>

#include "api/engine_view.h"
#include "api/route.h"

namespace ductus::api {

// `engine` null: the route for the document only; its handler answers 503.
std::vector<Route> hotspotRoutes(EngineView* engine);

}  // namespace ductus::api
