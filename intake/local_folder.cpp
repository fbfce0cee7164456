#include "intake/local_folder.h"

#include <fcntl.h>
#include <unistd.h>

namespace ductus::intake {
namespace fs = std::filesystem;

struct LocalFolder::OpenFile {
  std::string name;
  int fd = -1;
  ~OpenFile() {
    if (fd >= 0) ::close(fd);  // a regular file's close does not wait on the disk
  }
};

// One listing's state, shared by its chain of libuv requests. Owns itself
// while a request is out: each callback takes it back from req.data.
struct LocalFolder::ListRun {
  LocalFolder* folder;
  std::weak_ptr<bool> alive;
  Wanted wanted;
  ListCallback cb;
  uv_fs_t req{};
  std::vector<std::string> names;  // wanted files to lstat
  size_t next = 0;
  FolderListing listing;
};

// One read (with the open before it when the file is not open yet). Owned
// by its request until the callback, so the buffer outlives the folder.
struct LocalFolder::ReadReq {
  LocalFolder* folder;
  std::weak_ptr<bool> alive;
  std::string name;
  uint64_t offset = 0;
  std::string buf;
  std::shared_ptr<OpenFile> file;
  ReadCallback cb;
  uv_fs_t req{};
};

namespace {

int64_t toNs(const uv_timespec_t& t) {
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + static_cast<int64_t>(t.tv_nsec);
}

Error uvError(const std::string& what, int rc) {
  return Error{what + ": " + uv_strerror(rc), rc == UV_ENOENT ? ErrorKind::NotFound
                                                              : ErrorKind::Unavailable};
}

}  // namespace

LocalFolder::LocalFolder(uv_loop_t* loop, fs::path folder, fs::path moveTo)
    : loop_(loop), folder_(std::move(folder)), moveTo_(std::move(moveTo)) {}

LocalFolder::~LocalFolder() { *alive_ = false; }

void LocalFolder::list(Wanted wanted, ListCallback cb) {
  auto run = std::make_unique<ListRun>();
  run->folder = this;
  run->alive = alive_;
  run->wanted = std::move(wanted);
  run->cb = std::move(cb);
  run->req.data = run.get();
  int rc = uv_fs_scandir(loop_, &run->req, folder_.c_str(), 0, [](uv_fs_t* req) {
    std::unique_ptr<ListRun> run(static_cast<ListRun*>(req->data));
    ssize_t result = req->result;
    if (result >= 0) {
      uv_dirent_t ent;
      while (uv_fs_scandir_next(req, &ent) != UV_EOF) {
        run->listing.names.insert(ent.name);
        if (!run->wanted(ent.name)) continue;
        if (ent.type == UV_DIRENT_DIR) {
          run->listing.entries.push_back(FolderEntry{ent.name, FolderEntry::Type::Folder});
          continue;
        }
        run->names.emplace_back(ent.name);
      }
    }
    uv_fs_req_cleanup(req);
    auto alive = run->alive.lock();
    if (!alive || !*alive) return;
    if (result < 0)
      return run->cb(uvError("listing " + run->folder->folder_.string() + " failed",
                             static_cast<int>(result)));
    run->folder->statNext(std::move(run));
  });
  if (rc < 0)
    return run->cb(uvError("listing " + folder_.string() + " failed", rc));
  run.release();  // owned by the request until its callback
}

// Stats the wanted names one after another, then answers.
void LocalFolder::statNext(std::unique_ptr<ListRun> run) {
  while (run->next < run->names.size()) {
    std::string path = pathOf(run->names[run->next]);
    run->req = uv_fs_t{};
    run->req.data = run.get();
    // lstat: a link in the drop folder is never followed.
    int rc = uv_fs_lstat(loop_, &run->req, path.c_str(), [](uv_fs_t* req) {
      std::unique_ptr<ListRun> run(static_cast<ListRun*>(req->data));
      if (req->result == 0) {
        FolderEntry e;
        e.name = run->names[run->next];
        auto mode = req->statbuf.st_mode;
        e.type = S_ISREG(mode)   ? FolderEntry::Type::File
                 : S_ISLNK(mode) ? FolderEntry::Type::Link
                 : S_ISDIR(mode) ? FolderEntry::Type::Folder
                                 : FolderEntry::Type::Other;
        e.size = req->statbuf.st_size;
        e.mtimeNs = toNs(req->statbuf.st_mtim);
        run->listing.entries.push_back(std::move(e));
      }
      // A file gone between listing and stat is simply not there.
      uv_fs_req_cleanup(req);
      ++run->next;
      auto alive = run->alive.lock();
      if (!alive || !*alive) return;
      run->folder->statNext(std::move(run));
    });
    if (rc >= 0) {
      run.release();
      return;
    }
    ++run->next;  // could not even queue the stat: skip this file
  }
  auto cb = std::move(run->cb);
  auto listing = std::move(run->listing);
  run.reset();
  cb(std::move(listing));
}

void LocalFolder::read(const std::string& name, uint64_t offset, size_t max, ReadCallback cb) {
  auto req = std::make_unique<ReadReq>();
  req->folder = this;
  req->alive = alive_;
  req->name = name;
  req->offset = offset;
  req->buf.resize(max);
  req->cb = std::move(cb);
  if (open_ && open_->name == name) {
    req->file = open_;
    return readOpen(std::move(req));
  }
  open_.reset();
  req->req.data = req.get();
  std::string path = pathOf(name);
  int rc = uv_fs_open(loop_, &req->req, path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW, 0,
                      [](uv_fs_t* r) {
                        std::unique_ptr<ReadReq> req(static_cast<ReadReq*>(r->data));
                        ssize_t n = r->result;
                        uv_fs_req_cleanup(r);
                        if (n >= 0) {
                          req->file = std::make_shared<OpenFile>();
                          req->file->name = req->name;
                          req->file->fd = static_cast<int>(n);  // closed by its last holder
                        }
                        auto alive = req->alive.lock();
                        if (!alive || !*alive) return;
                        LocalFolder* self = req->folder;
                        if (n < 0)
                          return req->cb(uvError("open " + self->pathOf(req->name),
                                                 static_cast<int>(n)));
                        self->open_ = req->file;
                        self->readOpen(std::move(req));
                      });
  if (rc < 0) return req->cb(uvError("open " + path, rc));
  req.release();  // owned by the request until its callback
}

void LocalFolder::readOpen(std::unique_ptr<ReadReq> req) {
  req->req = uv_fs_t{};
  req->req.data = req.get();
  uv_buf_t b = uv_buf_init(req->buf.data(), static_cast<unsigned>(req->buf.size()));
  int rc = uv_fs_read(loop_, &req->req, req->file->fd, &b, 1, static_cast<int64_t>(req->offset),
                      [](uv_fs_t* r) {
                        std::unique_ptr<ReadReq> req(static_cast<ReadReq*>(r->data));
                        ssize_t n = r->result;
                        uv_fs_req_cleanup(r);
                        auto alive = req->alive.lock();
                        if (!alive || !*alive) return;
                        if (n < 0)
                          return req->cb(uvError("read " + req->folder->pathOf(req->name),
                                                 static_cast<int>(n)));
                        req->buf.resize(static_cast<size_t>(n));
                        req->cb(std::move(req->buf));
                      });
  if (rc < 0) {
    // Only when libuv cannot queue a request at all (not on a bad fd, which
    // the thread pool answers); said at once.
    return req->cb(uvError("read " + pathOf(req->name), rc));
  }
  req.release();
}

void LocalFolder::finish(const std::string& name, DoneCallback cb) {
  if (open_ && open_->name == name) open_.reset();
  // Moving or deleting touches the folder: on a network drop folder that
  // can take long, so it runs on libuv's thread pool.
  struct Move {
    uv_work_t req{};
    fs::path from, moveTo;
    std::error_code ec;
    std::weak_ptr<bool> alive;
    std::string what;
    DoneCallback done;
  };
  auto move = std::make_unique<Move>();
  move->req.data = move.get();
  move->from = pathOf(name);
  move->moveTo = moveTo_;
  move->alive = alive_;
  move->what = finishDescribe();
  move->done = std::move(cb);
  int rc = uv_queue_work(
      loop_, &move->req,
      [](uv_work_t* req) {
        auto& m = *static_cast<Move*>(req->data);
        if (m.moveTo.empty()) {
          fs::remove(m.from, m.ec);
          return;
        }
        fs::create_directories(m.moveTo, m.ec);
        fs::path target = m.moveTo / m.from.filename();
        std::error_code exists;
        if (fs::exists(target, exists)) target = movedAsideName(target.string());
        fs::rename(m.from, target, m.ec);
      },
      [](uv_work_t* req, int) {
        std::unique_ptr<Move> m(static_cast<Move*>(req->data));
        auto alive = m->alive.lock();
        if (!alive || !*alive) return;
        if (m->ec) return m->done(Error{m->ec.message(), ErrorKind::Unavailable});
        m->done(Status());
      });
  if (rc < 0) {
    // Said at once: the caller's round ends either way.
    return move->done(Error{std::string("its move could not start: ") + uv_strerror(rc)});
  }
  move.release();  // freed when the work is done
}

}  // namespace ductus::intake
