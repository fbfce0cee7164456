#include "supervisor/certificate_watch.h"

#include "common/log.h"

namespace ductus::supervisor {
namespace {

struct Check {
  uv_work_t req{};
  std::shared_ptr<tls::Certificates> certificates;
  std::shared_ptr<bool> alive;
  bool* checking = nullptr;
};

}  // namespace

CertificateWatch::CertificateWatch(uv_loop_t* loop, std::shared_ptr<tls::Certificates> certificates,
                                   std::chrono::milliseconds every)
    : loop_(loop), certificates_(std::move(certificates)) {
  bool anyFile = false;
  for (const auto& e : certificates_ ? certificates_->entries()
                                     : std::vector<std::shared_ptr<const tls::Loaded>>{})
    anyFile = anyFile || certificates_->fromFiles(e->name);
  if (!anyFile) return;
  timer_ = makeTimer(loop_, this);
  auto ms = static_cast<uint64_t>(every.count());
  uv_timer_start(
      timer_.get(),
      [](uv_timer_t* t) {
        if (auto* self = static_cast<CertificateWatch*>(t->data)) self->check();
      },
      ms, ms);
}

CertificateWatch::~CertificateWatch() { *alive_ = false; }

void CertificateWatch::check() {
  if (checking_) return;  // a slow disk: the next minute's check waits for this one
  auto job = std::make_unique<Check>();
  job->certificates = certificates_;
  job->alive = alive_;
  job->checking = &checking_;
  job->req.data = job.get();
  int rc = uv_queue_work(
      loop_, &job->req,
      [](uv_work_t* w) {
        auto* j = static_cast<Check*>(w->data);
        j->certificates->reload();  // logs what it replaced or could not use
      },
      [](uv_work_t* w, int) {
        std::unique_ptr<Check> j(static_cast<Check*>(w->data));
        if (*j->alive) *j->checking = false;
      });
  if (rc != 0) {
    spdlog::warn("certificates: checking for renewals failed: {}", uv_strerror(rc));
    return;
  }
  checking_ = true;
  (void)job.release();  // after_work frees it
}

}  // namespace ductus::supervisor
