#include "intake/source_handlers.h"

#include <spdlog/spdlog.h>

#include "intake/http_body_check.h"
#include "intake/intake.h"

namespace ductus::intake {

MllpListener::Handler mllpIntoIntake(Intake& intake) {
  Intake* in = &intake;
  return [in](const MllpPeer&, std::string bytes, MllpAnswer answer) {
    in->accept(std::move(bytes), [in, answer](Result<store::StoredMessage> r) {
      if (r) return answer(hl7::AckCode::Accept);
      spdlog::error("{}: storing a message failed: {}", in->spec().name, r.error().message);
      answer(hl7::AckCode::Error, "message not stored, send it again");
    });
  };
}

net::HttpServer::Handler httpQueueIntoIntake(Intake& intake, config::Format format) {
  Intake* in = &intake;
  return [in, format](const net::HttpRequest& req, net::HttpRespond respond) {
    if (req.method != "POST" && req.method != "PUT")
      return respond({405, {{"Allow", "POST, PUT"}}, "use POST\n"});
    if (auto refused = refuseBody(format, req)) return respond(*refused);
    in->accept(req.body, [respond](Result<store::StoredMessage> r) {
      if (!r)
        return respond({503,
                        {{"Retry-After", "5"}, {"Content-Type", "text/plain"}},
                        "message not stored, send it again\n"});
      bool dup = r->status == store::MessageStatus::Duplicate;
      respond({202,
               {{"Content-Type", "application/json"}},
               "{\"id\":" + std::to_string(r->ref.id) + (dup ? ",\"duplicate\":true}" : "}") +
                   "\n"});
    });
  };
}

}  // namespace ductus::intake
