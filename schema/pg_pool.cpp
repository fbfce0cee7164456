#include "schema/pg_pool.h"

#include <algorithm>

namespace ductus::store {

struct PgPool::Shared : std::enable_shared_from_this<PgPool::Shared> {
  enum class State { Connecting, Idle, Leased, Down };
  struct Slot {
    std::unique_ptr<PgConnection> conn;
    State state = State::Down;
  };

  uv_loop_t* loop;
  std::string conninfo;
  std::string setup;  // run once on each new connection before it is leased
  std::vector<Slot> slots;
  std::deque<size_t> idle;  // slots in State::Idle
  std::deque<LeaseCallback> waiters;
  bool closed = false;

  void setState(size_t i, State s) {
    Slot& slot = slots[i];
    if (slot.state == State::Idle) std::erase(idle, i);
    slot.state = s;
    if (s == State::Idle) idle.push_back(i);
  }

  void connect(size_t i, std::function<void(Status)> cb) {
    setState(i, State::Connecting);
    slots[i].conn = std::make_unique<PgConnection>(loop);
    std::weak_ptr<Shared> weak = shared_from_this();
    slots[i].conn->connect(conninfo, [weak, i, cb = std::move(cb)](Status s) mutable {
      auto self = weak.lock();
      if (!self || self->closed) return;
      if (!s.ok()) return self->connected(i, s, cb);
      self->setUp(i, std::move(cb));
    });
  }

  // A connection made elsewhere, already connected: set up, then idle.
  void adopt(size_t i, std::unique_ptr<PgConnection> conn, std::function<void(Status)> cb) {
    setState(i, State::Connecting);
    slots[i].conn = std::move(conn);
    setUp(i, std::move(cb));
  }

  void setUp(size_t i, std::function<void(Status)> cb) {
    if (setup.empty()) return connected(i, {}, cb);
    std::weak_ptr<Shared> weak = shared_from_this();
    slots[i].conn->script(setup, [weak, i, cb = std::move(cb)](Result<PgResult> r) {
      auto self = weak.lock();
      if (!self || self->closed) return;
      Status st = r ? Status{}
                    : Status{Error{"setting up a connection: " + r.error().message, r.error().kind,
                                   r.error().sqlstate}};
      self->connected(i, st, cb);
    });
  }

  void connected(size_t i, Status s, const std::function<void(Status)>& cb) {
    auto keep = shared_from_this();  // a callback below may drop the last owner
    if (s.ok()) {
      setState(i, State::Idle);
    } else {
      setState(i, State::Down);
      // Nobody can be served until a connection comes back: tell the
      // waiters now rather than leaving them hanging (they retry).
      auto failed = std::move(waiters);
      waiters.clear();
      for (auto& w : failed) w(Error{s.error().message, s.error().kind, s.error().sqlstate});
    }
    if (cb) cb(s);
    dispatch();
  }

  void dispatch() {
    auto keep = shared_from_this();  // a waiter's callback may drop the last owner
    while (!closed && !waiters.empty() && !idle.empty()) {
      // The connection used last: its backend is still warm (caches, CPU),
      // where handing them out in turn kept every backend cold.
      size_t i = idle.back();
      if (slots[i].conn->broken()) {
        // Its server went away while it sat idle (PgConnection notices the
        // socket closing): replace it rather than hand out a connection
        // whose first statement is sure to fail (an AE for a message).
        connect(i, nullptr);
        continue;
      }
      setState(i, State::Leased);
      auto cb = std::move(waiters.front());
      waiters.pop_front();
      cb(std::make_shared<Lease>(shared_from_this(), i));
    }
    if (closed || waiters.empty()) return;
    // Waiters but nothing idle: bring back slots that are down, one for
    // each waiter a connect under way won't serve (a pool that starts
    // empty, as scripts' db() pools do, opens what its callers need at
    // once rather than one connection per round trip), never more than the
    // pool's size.
    size_t connecting = static_cast<size_t>(std::count_if(
        slots.begin(), slots.end(), [](const Slot& s) { return s.state == State::Connecting; }));
    for (size_t i = 0; i < slots.size() && !closed && waiters.size() > connecting; ++i) {
      if (slots[i].state == State::Down) {
        connect(i, nullptr);
        ++connecting;
      }
    }
  }

  void release(size_t i) {
    if (closed) {
      slots[i].conn.reset();
      return;
    }
    if (slots[i].conn->broken()) {
      // Replaced, not reused: its prepared statements and session are gone.
      connect(i, nullptr);
      return;
    }
    setState(i, State::Idle);
    dispatch();
  }
};

PgPool::Lease::Lease(std::shared_ptr<Shared> pool, size_t slot)
    : pool_(std::move(pool)), slot_(slot) {}

PgPool::Lease::~Lease() { pool_->release(slot_); }

PgConnection& PgPool::Lease::conn() { return *pool_->slots[slot_].conn; }

PgPool::PgPool(uv_loop_t* loop, std::string conninfo, size_t size, std::string setup)
    : shared_(std::make_shared<Shared>()) {
  shared_->loop = loop;
  shared_->conninfo = std::move(conninfo);
  shared_->setup = std::move(setup);
  shared_->slots.resize(size == 0 ? 1 : size);
}

PgPool::~PgPool() {
  shared_->closed = true;
  shared_->waiters.clear();
  // Leased connections stay with their lease until it ends. A lease held
  // only by a statement's callback queued on its own connection would never
  // end (lease -> pool -> connection -> callback -> lease: a cycle, leaked at
  // shutdown with a statement in flight): drop those callbacks here, after
  // the loop over the slots, since dropping the last one releases (and
  // destroys) its connection.
  std::vector<PgConnection::QueryCallback> orphaned;
  for (auto& s : shared_->slots) {
    if (s.state != Shared::State::Leased) {
      s.conn.reset();
    } else if (s.conn) {
      for (auto& cb : s.conn->abandon()) orphaned.push_back(std::move(cb));
    }
  }
  orphaned.clear();
}

void PgPool::start(std::function<void(Status)> cb) { shared_->connect(0, std::move(cb)); }

void PgPool::start(std::unique_ptr<PgConnection> first, std::function<void(Status)> cb) {
  if (!first || first->broken()) return start(std::move(cb));
  shared_->adopt(0, std::move(first), std::move(cb));
}

void PgPool::acquire(LeaseCallback cb) {
  shared_->waiters.push_back(std::move(cb));
  shared_->dispatch();
}

size_t PgPool::size() const { return shared_->slots.size(); }
size_t PgPool::waiting() const { return shared_->waiters.size(); }

}  // namespace ductus::store
