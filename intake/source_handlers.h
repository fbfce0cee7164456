// What the network sources do with a message: hand it to the Intake and
// answer the sender from the commit. MLLP answers AA once the message is
// committed and AE when it could not be stored; HTTP queue mode answers 202
// with the message's id, or 503 with Retry-After.
#pragma once

#include "common/config/model.h"
#include "common/net/http_server.h"
#include "intake/mllp_listener.h"

namespace ductus::intake {

class Intake;

MllpListener::Handler mllpIntoIntake(Intake& intake);
net::HttpServer::Handler httpQueueIntoIntake(Intake& intake, config::Format format);

}  // namespace ductus::intake
