// The HTTP source's respond mode: the request is handed to the interface's
// respond function as JSON ({method, path, headers, query, body}), and the
// function's answer ({status, headers, body}, or any other text as a 200
// body) becomes the HTTP response. What the function's outcome means when
// it produced no answer (filtered: 204, quarantined: 500, otherwise 503) is
// decided here too, so the whole translation lives next to the server.
#pragma once

#include <string>
#include <string_view>

#include "common/net/http_server.h"

namespace ductus::intake {

// The request as the script receives it. Header values, query and body are
// read as text the way the SDK reads bytes everywhere: UTF-8 when valid,
// ISO-8859-1 otherwise.
std::string respondRequestJson(const net::HttpRequest& req);

// The response for what the script returned. An answer that is not valid
// HTTP (a status that is not an integer 100-599, a header name or value
// that could inject a line, a Content-Length or Transfer-Encoding of the
// script's own) becomes a 500, and the log says why.
net::HttpResponse respondResponseOf(std::string_view scriptOutput);

// The response when the script returned nothing to send: `outcome` is the
// outcome's name ("filtered", "quarantine", "transient", ...).
net::HttpResponse respondWithoutOutput(std::string_view outcome);

}  // namespace ductus::intake
