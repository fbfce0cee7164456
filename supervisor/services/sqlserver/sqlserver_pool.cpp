#include "supervisor/services/sqlserver/sqlserver_pool.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "common/detached_threads.h"
#include "common/loop_mailbox.h"
#include "supervisor/services/sqlserver/freetds_conf.h"

namespace ductus::supervisor::services::sqlserver {

struct SqlServerPool::Shared {
  struct Job {
    uint64_t id;
    Statement statement;
  };

  Shared(uv_loop_t* loop, ConnectSettings s, size_t l, std::chrono::milliseconds idle)
      : settings(std::move(s)), limit(l), idleClose(idle), mailbox(loop) {}

  const ConnectSettings settings;
  const size_t limit;
  const std::chrono::milliseconds idleClose;

  std::mutex mutex;
  std::condition_variable wake;
  std::deque<Job> jobs;
  size_t threads = 0;  // connection threads alive
  size_t idle = 0;     // of them, waiting for a job
  bool stopping = false;
  LoopMailbox mailbox;  // answers, for the loop; closed by ~SqlServerPool
  std::atomic<uint64_t> opened{0};
  // The callers' callbacks, by job id: touched on the loop only, so what
  // they hold (a call's timer, say) is never freed on a connection thread,
  // even when the pool is gone before the statement ends.
  std::map<uint64_t, std::function<void(Result<std::string>)>> callbacks;
  uint64_t nextId = 0;

  // On the loop, through the mailbox (so never after ~SqlServerPool).
  void answer(uint64_t id, Result<std::string> r) {
    auto it = callbacks.find(id);
    if (it == callbacks.end()) return;
    auto done = std::move(it->second);
    callbacks.erase(it);
    done(std::move(r));
  }

  // One connection's thread: takes jobs while there are any, and ends
  // after idleClose without one (closing its connection).
  void runThread() {
    std::unique_ptr<OdbcConnection> conn;
    std::unique_lock lock(mutex);
    for (;;) {
      ++idle;
      bool got = wake.wait_for(lock, idleClose, [&] { return stopping || !jobs.empty(); });
      --idle;
      if (stopping || !got) break;
      Job job = std::move(jobs.front());
      jobs.pop_front();
      lock.unlock();
      Result<std::string> r = Error{"not run"};
      if (!conn) {
        auto opened = OdbcConnection::open(settings);
        if (opened) {
          conn = std::move(*opened);
          ++this->opened;
        } else {
          r = opened.error();
        }
      }
      if (conn) {
        const Statement& s = job.statement;
        r = s.query ? conn->query(s.bound, s.params, s.caps, s.timeout)
                    : conn->execute(s.bound, s.params, s.timeout);
        // Kept only after a call that succeeded.
        if (!r) conn.reset();
      }
      mailbox.post([this, id = job.id, r = std::move(r)]() mutable { answer(id, std::move(r)); });
      lock.lock();
    }
    --threads;
    lock.unlock();
    conn.reset();  // closed off the lock: a disconnect may wait on the network
  }
};

SqlServerPool::SqlServerPool(uv_loop_t* loop, ConnectSettings settings, size_t limit,
                             std::chrono::milliseconds idleClose)
    : shared_(std::make_shared<Shared>(loop, std::move(settings), std::max<size_t>(1, limit),
                                       idleClose)) {
  // Here, on the loop, before any connection thread reads the environment;
  // a failure is reported by each connect (FreetdsConf::sectionFor).
  (void)FreetdsConf::prepare();
}

SqlServerPool::~SqlServerPool() {
  {
    std::lock_guard lock(shared_->mutex);
    shared_->stopping = true;
    shared_->jobs.clear();
  }
  shared_->wake.notify_all();
  shared_->mailbox.close();
  shared_->callbacks.clear();  // here, on the loop
}

void SqlServerPool::run(Statement statement, std::function<void(Result<std::string>)> done) {
  uint64_t id = shared_->nextId++;
  shared_->callbacks.emplace(id, std::move(done));
  std::unique_lock lock(shared_->mutex);
  shared_->jobs.push_back({id, std::move(statement)});
  // A waiting thread takes it; else a new connection's thread, up to the
  // limit (beyond it the job waits for a thread to finish its own).
  if (shared_->idle < shared_->jobs.size() && shared_->threads < shared_->limit) {
    ++shared_->threads;
    std::thread([s = shared_] {
      DetachedThreads::Running running;
      s->runThread();
    }).detach();
  }
  lock.unlock();
  shared_->wake.notify_one();
}

uint64_t SqlServerPool::connectionsOpened() const { return shared_->opened.load(); }

}  // namespace ductus::supervisor::services::sqlserver
