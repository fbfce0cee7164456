#include "supervisor/delivery/senders/file_sync_group.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <mutex>

#include "common/net/loop_post.h"

namespace ductus::senders {

// One group in flight: its requests, and the result for each file system.
struct FileSyncGroup::Group {
  uv_work_t work{};
  std::shared_ptr<FileSyncGroup> owner;  // alive until the group answers
  std::vector<Request> requests;
  std::vector<int> results;  // per request: 0 or a negative errno

  // On libuv's pool: one syncfs per device, through the first of its fds;
  // each request gets its device's result.
  static void run(uv_work_t* w) {
    auto* g = static_cast<Group*>(w->data);
    std::vector<dev_t> devices(g->requests.size());
    g->results.assign(g->requests.size(), 0);
    std::map<dev_t, int> byDevice;  // device -> syncfs result
    for (size_t i = 0; i < g->requests.size(); ++i) {
      struct stat st {};
      if (::fstat(g->requests[i].fd, &st) != 0) {
        g->results[i] = -errno;
        continue;
      }
      devices[i] = st.st_dev;
      auto [it, fresh] = byDevice.emplace(st.st_dev, 0);
      if (fresh && ::syncfs(g->requests[i].fd) != 0) it->second = -errno;
    }
    for (size_t i = 0; i < g->requests.size(); ++i) {
      if (g->results[i] == 0) g->results[i] = byDevice[devices[i]];
      if (g->requests[i].closeAfter) ::close(g->requests[i].fd);
    }
  }

  static void answered(uv_work_t* w, int status) {
    std::unique_ptr<Group> g(static_cast<Group*>(w->data));
    std::shared_ptr<FileSyncGroup> owner = std::move(g->owner);
    owner->running_ = false;
    if (status < 0)  // never run: the fds it was to close are still open
      for (auto& r : g->requests)
        if (r.closeAfter) ::close(r.fd);
    // The next group starts before these callbacks, which may flush again.
    if (!owner->waiting_.empty()) owner->start();
    for (size_t i = 0; i < g->requests.size(); ++i)
      g->requests[i].done(status < 0 ? status : g->results[i]);
  }
};

std::shared_ptr<FileSyncGroup> FileSyncGroup::of(uv_loop_t* loop) {
  static std::mutex mutex;
  static std::map<uv_loop_t*, std::weak_ptr<FileSyncGroup>> groups;
  std::lock_guard lock(mutex);
  auto& weak = groups[loop];
  auto group = weak.lock();
  if (!group) {
    // A loop's address may be reused by a later loop: the entry is
    // replaced then, never read stale (its group is gone with its senders).
    group = std::make_shared<FileSyncGroup>(loop);
    weak = group;
  }
  return group;
}

void FileSyncGroup::flush(int fd, std::function<void(int)> done, bool closeAfter) {
  waiting_.push_back({fd, std::move(done), closeAfter});
  if (!running_) start();
}

void FileSyncGroup::start() {
  auto g = std::make_unique<Group>();
  g->work.data = g.get();
  g->owner = shared_from_this();
  size_t n = std::min(waiting_.size(), kMaxGroup);
  g->requests.assign(std::make_move_iterator(waiting_.begin()),
                     std::make_move_iterator(waiting_.begin() + static_cast<std::ptrdiff_t>(n)));
  waiting_.erase(waiting_.begin(), waiting_.begin() + static_cast<std::ptrdiff_t>(n));
  running_ = true;
  ++groups_;
  requests_ += n;
  int rc = uv_queue_work(loop_, &g->work, &Group::run, &Group::answered);
  if (rc < 0) {
    // Cannot happen with a valid loop and callbacks; answer the error
    // from the loop rather than inside flush().
    Group* raw = g.release();
    net::postToLoop(loop_, [raw, rc] { Group::answered(&raw->work, rc); });
    return;
  }
  g.release();  // owned by the work request until answered()
}

}  // namespace ductus::senders
