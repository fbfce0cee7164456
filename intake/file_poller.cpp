#include "intake/file_poller.h"

#include <spdlog/spdlog.h>

#include <fnmatch.h>

#include <algorithm>
#include <unordered_set>

namespace ductus::intake {

// One poll's state, shared by its chain of libuv requests. Owns itself
// while a request is out: each callback takes it back from req.data.
struct FilePoller::Run {
  FilePoller* poller;
  std::weak_ptr<bool> alive;
  Callback cb;
  uv_fs_t req{};
  std::vector<std::string> names;  // candidates to stat
  std::unordered_set<std::string> all;  // every name listed (for markers)
  size_t next = 0;
  std::vector<PolledFile> stated;
};

namespace {

int64_t toNs(const uv_timespec_t& t) {
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + static_cast<int64_t>(t.tv_nsec);
}

}  // namespace

FilePoller::FilePoller(uv_loop_t* loop, FilePollerSettings settings)
    : loop_(loop), settings_(std::move(settings)) {}

FilePoller::~FilePoller() { *alive_ = false; }

void FilePoller::poll(Callback cb) {
  if (polling_) {
    cb(Error{"poll of " + settings_.folder + " is already running"});
    return;
  }
  auto run = std::make_unique<Run>();
  run->poller = this;
  run->alive = alive_;
  run->cb = std::move(cb);
  run->req.data = run.get();
  int rc = uv_fs_scandir(loop_, &run->req, settings_.folder.c_str(), 0, [](uv_fs_t* req) {
    std::unique_ptr<Run> run(static_cast<Run*>(req->data));
    ssize_t result = req->result;
    if (result >= 0) {
      uv_dirent_t ent;
      while (uv_fs_scandir_next(req, &ent) != UV_EOF) {
        run->all.insert(ent.name);
        if (ent.name[0] == '.') continue;  // dot-files: still being written, or hidden
        if (ent.type == UV_DIRENT_DIR) continue;
        run->names.emplace_back(ent.name);
      }
    }
    uv_fs_req_cleanup(req);
    auto alive = run->alive.lock();
    if (!alive || !*alive) return;
    FilePoller* self = run->poller;
    if (result < 0) {
      self->polling_ = false;
      run->cb(Error{"listing " + self->settings_.folder + " failed: " +
                    uv_strerror(static_cast<int>(result))});
      return;
    }
    const auto& s = self->settings_;
    auto& names = run->names;
    names.erase(std::remove_if(names.begin(), names.end(),
                               [&](const std::string& n) {
                                 if (fnmatch(s.pattern.c_str(), n.c_str(), FNM_PERIOD) != 0)
                                   return true;
                                 if (s.markerSuffix.empty()) return false;
                                 // The marker itself is no candidate; a file
                                 // waits for its marker.
                                 if (n.size() >= s.markerSuffix.size() &&
                                     n.compare(n.size() - s.markerSuffix.size(),
                                               s.markerSuffix.size(), s.markerSuffix) == 0)
                                   return true;
                                 return !run->all.count(n + s.markerSuffix);
                               }),
                names.end());
    self->finish(*run.release());
  });
  if (rc < 0) {
    run->cb(Error{"listing " + settings_.folder + " failed: " + uv_strerror(rc)});
    return;
  }
  polling_ = true;
  run.release();  // owned by the request until its callback
}

// Stats the candidates one after another, then decides readiness.
void FilePoller::finish(Run& r) {
  std::unique_ptr<Run> run(&r);
  if (run->next < run->names.size()) {
    std::string path = settings_.folder + "/" + run->names[run->next];
    run->req = uv_fs_t{};
    run->req.data = run.get();
    // lstat: a link in the drop folder is never followed. Anyone who can
    // write there could otherwise have the engine read any file it may
    // (`ln -s /proc/self/environ in/x.hl7` delivered its environment).
    int rc = uv_fs_lstat(loop_, &run->req, path.c_str(), [](uv_fs_t* req) {
      std::unique_ptr<Run> run(static_cast<Run*>(req->data));
      if (req->result == 0 && S_ISLNK(req->statbuf.st_mode)) {
        auto alive = run->alive.lock();
        if (alive && *alive && run->poller->warnedLinks_.insert(run->names[run->next]).second)
          spdlog::warn("{}: {} is a symbolic link; links are not read, only regular files",
                       run->poller->settings_.folder, run->names[run->next]);
      }
      if (req->result == 0 && S_ISREG(req->statbuf.st_mode)) {
        PolledFile f;
        f.name = run->names[run->next];
        f.size = req->statbuf.st_size;
        f.mtimeNs = toNs(req->statbuf.st_mtim);
        run->stated.push_back(std::move(f));
      }
      // A file gone between listing and stat is simply not there.
      uv_fs_req_cleanup(req);
      ++run->next;
      auto alive = run->alive.lock();
      if (!alive || !*alive) return;
      run->poller->finish(*run.release());
    });
    if (rc >= 0) {
      run.release();
      return;
    }
    ++run->next;  // could not even queue the stat: skip this file
    finish(*run.release());
    return;
  }

  std::vector<PolledFile> ready;
  std::unordered_map<std::string, Seen> now;
  for (auto& f : run->stated) {
    now[f.name] = Seen{f.size, f.mtimeNs};
    bool isReady;
    if (!settings_.markerSuffix.empty()) {
      isReady = true;
    } else {
      auto it = seen_.find(f.name);
      isReady = it != seen_.end() && it->second.size == f.size && it->second.mtimeNs == f.mtimeNs;
    }
    if (isReady) {
      f.path = settings_.folder + "/" + f.name;
      ready.push_back(std::move(f));
    }
  }
  seen_ = std::move(now);
  std::sort(ready.begin(), ready.end(), [](const PolledFile& a, const PolledFile& b) {
    return a.mtimeNs != b.mtimeNs ? a.mtimeNs < b.mtimeNs : a.name < b.name;
  });
  polling_ = false;
  auto cb = std::move(run->cb);
  run.reset();
  cb(std::move(ready));
}

}  // namespace ductus::intake
