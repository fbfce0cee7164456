// What a queue-mode HTTP source refuses before storing anything: a body its
// interface's format can't read. 415 for a Content-Type that names another
// kind of content (an image, a form, a PDF); 400 for a JSON body that is not
// JSON, an HL7 body without an MSH segment (MLLP's AR, over HTTP) or with an
// MLLP framing byte (0x0B, 0x1C) anywhere in it (intake/payload_check.h,
// the check the API's edit makes too). A
// missing Content-Type or application/octet-stream leaves it to the bytes.
#pragma once

#include <cstddef>
#include <optional>

#include "common/config/model.h"
#include "common/net/http_server.h"
#include "intake/payload_check.h"

namespace ductus::intake {

// The refusal to send, or nullopt when the body may be stored.
std::optional<net::HttpResponse> refuseBody(config::Format format, const net::HttpRequest& req);

}  // namespace ductus::intake
