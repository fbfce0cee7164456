#include "intake/source_handlers.h"

#include <chrono>
#include <memory>
#include <optional>

#include "common/log.h"
#include "intake/http_body_check.h"
#include "intake/intake.h"

namespace ductus::intake {
namespace {

// Store failures of one source, logged at most once a minute: when
// PostgreSQL can't write (a full disk, a read-only server) every message
// fails, and a line each would fill the engine's disk too.
class FailureLog {
 public:
  void failed(const std::string& name, const Error& e) {
    auto now = std::chrono::steady_clock::now();
    ++failures_;
    if (logged_ && now - *logged_ < std::chrono::minutes(1)) return;
    if (failures_ == 1) spdlog::error("{}: storing a message failed: {}", name, e.message);
    else
      spdlog::error("{}: storing a message failed: {} ({} failures since the last such line; "
                    "logged at most once a minute)", name, e.message, failures_);
    logged_ = now;
    failures_ = 0;
  }

 private:
  std::optional<std::chrono::steady_clock::time_point> logged_;
  int64_t failures_ = 0;
};

}  // namespace

MllpListener::Handler mllpIntoIntake(Intake& intake) {
  Intake* in = &intake;
  auto log = std::make_shared<FailureLog>();
  return [in, log](const MllpPeer&, std::string bytes, MllpAnswer answer) {
    in->accept(std::move(bytes), [in, log, answer](Result<store::StoredMessage> r) {
      if (r) return answer(hl7::AckCode::Accept);
      log->failed(in->spec().name, r.error());
      answer(hl7::AckCode::Error, "message not stored, send it again");
    });
  };
}

net::HttpServer::Handler httpQueueIntoIntake(Intake& intake, config::Format format) {
  Intake* in = &intake;
  auto log = std::make_shared<FailureLog>();
  return [in, format, log](const net::HttpRequest& req, net::HttpRespond respond) {
    if (req.method != "POST" && req.method != "PUT")
      return respond({405, {{"Allow", "POST, PUT"}}, "use POST\n"});
    if (auto refused = refuseBody(format, req)) return respond(*refused);
    in->accept(req.body, [in, log, respond](Result<store::StoredMessage> r) {
      if (!r) log->failed(in->spec().name, r.error());
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
