#include "supervisor/monitor/outbox.h"

#include <algorithm>

#include "common/countdown.h"
#include "common/log.h"
#include "schema/alert_store.h"
#include "supervisor/alerts/notifier.h"

namespace ductus::supervisor {

Outbox::Outbox(uv_loop_t* loop, store::PgPool& pool, alerts::Notifier& notifier,
               Options options)
    : loop_(loop), pool_(pool), notifier_(notifier), options_(options) {}

Outbox::~Outbox() { *alive_ = false; }

std::chrono::seconds Outbox::backoff(int attempts, const Options& o) {
  auto wait = o.firstRetry;
  for (int i = 1; i < attempts && wait < o.lastRetry; ++i) wait *= 2;
  return std::min(wait, o.lastRetry);
}

void Outbox::start() {
  timer_ = makeTimer(loop_, this);
  auto ms = static_cast<uint64_t>(options_.every.count());
  uv_timer_start(
      timer_.get(),
      [](uv_timer_t* t) {
        if (auto* self = static_cast<Outbox*>(t->data)) self->claim();
      },
      0, ms);
}

void Outbox::wake() { claim(); }

void Outbox::claim() {
  if (busy_) {
    again_ = true;  // claimed again when this batch is done
    return;
  }
  busy_ = true;
  again_ = false;
  auto alive = alive_;
  store::claimDue(
      pool_, options_.batch, options_.lease,
      [this, alive](Result<std::vector<store::OutboxRow>> rows) {
        if (!*alive) return;
        if (!rows) {
          busy_ = false;
          spdlog::warn("alerts: claiming notifications to send failed: {}",
                       rows.error().message);
          return;
        }
        bool full = static_cast<int>(rows->size()) >= options_.batch;
        auto all = Countdown::make([this, alive, full] {
          if (!*alive) return;
          busy_ = false;
          if (full || again_) claim();
        });
        for (auto& r : *rows) {
          alerts::Outgoing out{r.kind, r.target, r.subject, r.body, r.contentType};
          auto step = all->add();
          notifier_.send(out, [this, alive, r, step](Status s) {
            if (!*alive) return step();
            auto marked = [alive, step](Status m) {
              if (*alive && !m)
                spdlog::warn("alerts: recording a notification's outcome failed: {}",
                             m.error().message);
              step();
            };
            if (s) {
              ++sent_;
              spdlog::info("alerts: {} {} sent to {} ({})", r.kind, r.id, r.channel,
                           r.subject);
              return store::markSent(pool_, r.id, marked);
            }
            ++failed_;
            bool giveUp = r.attempts >= options_.maxAttempts;
            auto wait = backoff(r.attempts, options_);
            if (giveUp)
              spdlog::error("alerts: {} {} to {} given up after {} tries: {}", r.kind, r.id,
                            r.channel, r.attempts, s.error().message);
            else
              spdlog::warn("alerts: {} {} to {} failed (try {}): {}; again in {} s", r.kind,
                           r.id, r.channel, r.attempts, s.error().message, wait.count());
            store::markFailed(pool_, r.id, s.error().message,
                              std::chrono::system_clock::now() + wait, giveUp, marked);
          });
        }
        all->start();
      });
}

}  // namespace ductus::supervisor
