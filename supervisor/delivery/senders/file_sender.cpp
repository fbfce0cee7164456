#include "supervisor/delivery/senders/file_sender.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "common/log.h"
#include "common/net/loop_post.h"

namespace ductus::senders {
namespace {

std::string utcDate(std::chrono::system_clock::time_point t) {
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y%m%d", &tm);
  return buf;
}

// A value may not add folders or climb out of one.
std::string safeValue(std::string v) {
  for (char& c : v) {
    if (c == '/' || c == '\0') c = '_';
  }
  if (v == "." || v == "..") v.assign(v.size(), '_');
  return v;
}

std::string describe(std::string_view what, const std::string& path, int uvErr) {
  return std::string(what) + " " + path + ": " + uv_strerror(uvErr) + " (" + uv_err_name(uvErr) +
         ")";
}

// Closes fd on libuv's pool, owning its request; the result is not
// needed (the file's data and name are already durable).
void closeInBackground(uv_loop_t* loop, uv_file fd) {
  auto req = std::make_unique<uv_fs_t>();
  int rc = uv_fs_close(loop, req.get(), fd, [](uv_fs_t* r) {
    std::unique_ptr<uv_fs_t> own(r);
    uv_fs_req_cleanup(r);
  });
  if (rc == 0)
    req.release();  // owned by the request until its callback
  else
    ::close(fd);  // not submitted (cannot happen with a live loop): not leaked either
}

std::string parentOf(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

Result<std::string> expandFileName(const std::string& nameTemplate, const SendRequest& request,
                                   std::chrono::system_clock::time_point now) {
  std::string out;
  for (size_t i = 0; i < nameTemplate.size();) {
    if (nameTemplate[i] != '{') {
      out += nameTemplate[i++];
      continue;
    }
    size_t close = nameTemplate.find('}', i);
    if (close == std::string::npos) {
      return Error{"file name template \"" + nameTemplate + "\": '{' without '}'"};
    }
    std::string key = nameTemplate.substr(i + 1, close - i - 1);
    if (key == "id") {
      out += std::to_string(request.messageId);
    } else if (key == "interface") {
      out += safeValue(request.interfaceName);
    } else if (key == "destination") {
      out += safeValue(request.destinationName);
    } else if (key == "date") {
      out += utcDate(now);
    } else {
      return Error{"file name template \"" + nameTemplate + "\": unknown placeholder {" + key +
                   "} (known: {id}, {interface}, {destination}, {date})"};
    }
    i = close + 1;
  }
  if (out.empty() || out.front() == '/') {
    return Error{"file name \"" + out + "\" must be relative to the destination's folder"};
  }
  size_t start = 0;
  for (;;) {
    size_t slash = out.find('/', start);
    std::string part = out.substr(start, slash == std::string::npos ? std::string::npos
                                                                     : slash - start);
    if (part.empty() || part == "." || part == "..") {
      return Error{"file name \"" + out + "\" has an empty, \".\" or \"..\" part"};
    }
    if (slash == std::string::npos) {
      if (part.front() == '.') {
        return Error{"file name \"" + out + "\" starts with '.', which marks temporary files"};
      }
      break;
    }
    start = slash + 1;
  }
  return out;
}

Status validateNameTemplate(const std::string& nameTemplate) {
  auto r = expandFileName(nameTemplate, {1, "interface", "destination", "", {}, {}},
                          std::chrono::system_clock::now());
  if (!r) return r.error();
  return {};
}

// One message's write: a chain of uv_fs_* steps, each started from the
// previous one's callback. The job owns itself from start to finish.
struct FileSender::Job {
  enum class Step {
    MakeDir,
    OpenTemp,
    Write,
    SyncFile,
    CloseFile,
    Rename,
    SyncName,  // sync: group, after the rename
    CleanupClose,
    CleanupUnlink
  };

  uv_fs_t req{};
  uv_work_t work{};   // the create and write (createAndWrite)
  int poolError = 0;  // its result: 0 or a negative errno
  std::shared_ptr<State> state;
  SendCallback cb;
  std::string payload;
  std::string finalPath, tempPath, dirPath;
  int mode = 0640;
  int folderMode = 0750;
  FileSync sync = FileSync::Group;
  Step step = Step::OpenTemp;
  uv_file fd = -1;
  size_t written = 0;
  bool triedMkdir = false;
  std::vector<std::string> dirsToMake;  // for MakeDir, parent first
  size_t nextDir = 0;
  std::optional<SendOutcome> failure;  // set once a step failed; cleanup follows
  // Written as an unnamed file (O_TMPFILE) and named by linking it: its
  // temporary name (tempPath) is used only where the final name exists
  // already, or where the file system makes no unnamed files.
  bool unnamed = true;
  bool replacing = false;  // the final name existed: linked to tempPath, renamed over it (pool)
  // Order within a stream: this job renames only after `prev` renamed; if
  // prev failed, this one fails too. `next` is told the same way.
  uint64_t stream = 0;
  Job* prev = nullptr;
  Job* next = nullptr;
  bool prevFailed = false;
  bool waitingForPrev = false;  // closed and ready to rename

  uv_loop_t* loop() const { return state->loop; }

  void start() { openTemp(); }

  // Creates the file and writes the payload, in one pool request: one
  // per step was two round trips through the pool for every file.
  void openTemp() {
    step = Step::OpenTemp;
    work.data = this;
    int rc = uv_queue_work(loop(), &work, &Job::createAndWrite, &Job::created);
    if (rc < 0) {
      poolError = rc;
      net::postToLoop(loop(), [this] { created(&work, 0); });
    }
  }
  // On libuv's pool. The fields it uses (paths, mode, payload, fd,
  // written, poolError) are not touched on the loop meanwhile.
  static void createAndWrite(uv_work_t* w) {
    auto* j = static_cast<Job*>(w->data);
    // An unnamed file is not O_EXCL: that would forbid the link that names it.
    int fd = j->unnamed ? ::open(j->dirPath.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, j->mode)
                        : ::open(j->tempPath.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
                                 j->mode);
    if (fd < 0) {
      j->poolError = -errno;
      return;
    }
    j->fd = fd;
    while (j->written < j->payload.size()) {
      ssize_t n = ::pwrite(fd, j->payload.data() + j->written, j->payload.size() - j->written,
                           static_cast<off_t>(j->written));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        j->poolError = -errno;
        return;
      }
      j->written += static_cast<size_t>(n);
    }
  }
  static void created(uv_work_t* w, int status) {
    auto* j = static_cast<Job*>(w->data);
    int err = status < 0 ? status : std::exchange(j->poolError, 0);
    if (j->fd < 0) return j->onStep(err);  // the create failed
    j->step = Step::Write;
    if (err) return j->onStep(err);
    j->dataWritten();
  }
  // Named by its link alone (not renamed over an existing name).
  bool linked() const { return unnamed && !replacing; }
  // The file being written, in an error: its temporary name, or its final
  // name with "(not yet linked)" (an unnamed file has no name of its own).
  std::string writing() const { return unnamed ? finalPath + " (not yet linked)" : tempPath; }
  // What a failed create names: the temporary file, or the folder an
  // unnamed file was to be made in.
  std::string creating() const {
    return unnamed ? "a file in " + dirPath + " (for " + finalPath + ")" : tempPath;
  }
  void makeNextDir() {
    step = Step::MakeDir;
    check(uv_fs_mkdir(loop(), &req, dirsToMake[nextDir].c_str(), folderMode, &Job::onFs));
  }

  // A submit error (as opposed to a failed operation) arrives here
  // synchronously; route it through the same path as a failed callback.
  // Posted to the loop so nothing is answered from inside send().
  void check(int rc) {
    if (rc < 0) {
      uv_fs_req_cleanup(&req);
      net::postToLoop(loop(), [this, rc] { onStep(rc); });
    }
  }

  static void onFs(uv_fs_t* r) {
    auto* job = static_cast<Job*>(r->data);
    ssize_t result = r->result;
    uv_fs_req_cleanup(r);
    job->onStep(result);
  }

  void onStep(ssize_t result) {
    const int err = result < 0 ? static_cast<int>(result) : 0;
    switch (step) {
      case Step::OpenTemp:
        if (err == UV_ENOENT && !triedMkdir) {
          triedMkdir = true;
          planDirs();
          return makeNextDir();
        }
        if (unnamed && (err == UV_ENOTSUP || err == UV_EISDIR || err == UV_EINVAL)) {
          // This file system makes no unnamed files (NFS, some FUSE):
          // this sender writes to temporary names from now on.
          if (state->unnamedFiles) {
            state->unnamedFiles = false;
            spdlog::info("file destination {}: the file system makes no unnamed files (O_TMPFILE: "
                         "{}); each file is written under a temporary dot-name and renamed",
                         dirPath, uv_err_name(err));
          }
          unnamed = false;
          return openTemp();
        }
        return fail(describe("create", creating(), err));
      case Step::MakeDir:
        if (err && err != UV_EEXIST) return fail(describe("make folder", dirsToMake[nextDir], err));
        if (++nextDir < dirsToMake.size()) return makeNextDir();
        return openTemp();
      case Step::Write:
        return fail(describe("write", writing(), err));
      case Step::SyncFile:
        if (err)
          return fail(
              describe(sync == FileSync::Group ? "sync (syncfs) of" : "fsync", writing(), err));
        // group: the file stays open for the sync after its rename.
        // An unnamed file is closed only once linked: closing it first
        // would free it.
        if (sync == FileSync::Group || unnamed) return renameInTurn();
        return closeFile();
      case Step::CloseFile:
        // A failed close after a successful fsync can still mean lost data
        // on NFS; treat it as the write failing.
        if (err) return fail(describe("close", tempPath, err));
        return renameInTurn();
      case Step::Rename:
        if (err) return fail(describe(linked() ? "link to" : "rename to", finalPath, err));
        releaseNext(false);
        if (sync != FileSync::Group && unnamed) closeInBackground(loop(), std::exchange(fd, -1));
        if (sync == FileSync::None) return done(SendOutcome::sent(finalPath));
        if (sync == FileSync::Each) return renamed();
        step = Step::SyncName;
        return state->group->flush(fd, [this](int e) { onStep(e); }, true);
      case Step::SyncName:
        // Answered now, in the order of the group's requests (so in send()
        // order per stream). The group closed the file after its sync.
        fd = -1;
        // The file is complete under its final name; only its name's
        // durability is in doubt. Retrying rewrites it, harmlessly.
        if (err)
          return done(
              SendOutcome::transient(describe(linked() ? "sync (syncfs) after linking to"
                                                       : "sync (syncfs) after renaming to",
                                              finalPath, err)));
        return done(SendOutcome::sent(finalPath));
      case Step::CleanupClose:
        step = Step::CleanupUnlink;
        return check(uv_fs_unlink(loop(), &req, tempPath.c_str(), &Job::onFs));
      case Step::CleanupUnlink:
        return done(*failure);
    }
  }

  // Queues for the folder's fsync, which calls done().
  void renamed();

  // Its turn: renames it and the jobs behind it in its stream that are
  // ready too (RenameRun).
  void rename();

  // This job's place in its stream is settled (renamed, or failed): the
  // next job may rename now, or must fail.
  void releaseNext(bool failed) {
    if (stream != 0) {
      auto tail = state->streamTails.find(stream);
      if (tail != state->streamTails.end() && tail->second == this) state->streamTails.erase(tail);
    }
    if (prev) prev->next = nullptr;  // (only when this one failed first)
    prev = nullptr;
    Job* n = std::exchange(next, nullptr);
    if (!n) return;
    n->prev = nullptr;
    n->prevFailed = failed;
    if (n->waitingForPrev) {
      n->waitingForPrev = false;
      n->rename();
    }
  }

  // The data is written: made durable as the destination's sync: says.
  void dataWritten() {
    if (sync == FileSync::None) return unnamed ? renameInTurn() : closeFile();
    step = Step::SyncFile;
    if (sync == FileSync::Group) return state->group->flush(fd, [this](int e) { onStep(e); });
    check(uv_fs_fsync(loop(), &req, fd, &Job::onFs));
  }

  void closeFile() {
    step = Step::CloseFile;
    check(uv_fs_close(loop(), &req, std::exchange(fd, -1), &Job::onFs));
  }

  // Renames of one stream happen in send() order.
  void renameInTurn() {
    step = Step::Rename;
    if (prev) {
      waitingForPrev = true;  // prev's turn comes first
      return;
    }
    rename();
  }

  // Folders from the first missing one down to the file's own, found by
  // walking up from the file's folder (mkdir on existing ones is EEXIST).
  void planDirs() {
    std::vector<std::string> chain;
    for (std::string d = dirPath; !d.empty() && d != "/" && d != "."; d = parentOf(d)) {
      chain.push_back(d);
    }
    dirsToMake.assign(chain.rbegin(), chain.rend());
    nextDir = 0;
    if (dirsToMake.empty()) dirsToMake.push_back(dirPath);
  }

  // Closes and removes the temporary file (when there is one), then
  // reports the first error.
  void fail(std::string detail) {
    failure = SendOutcome::transient(std::move(detail));
    releaseNext(true);
    if (unnamed) {  // nothing was named (a failed link removes its own leftovers)
      if (fd >= 0) closeInBackground(loop(), std::exchange(fd, -1));
      return done(*failure);
    }
    bool tempExists = step == Step::Write || step == Step::SyncFile ||
                      step == Step::CloseFile || step == Step::Rename;
    if (!tempExists) return done(*failure);
    if (fd >= 0) {
      step = Step::CleanupClose;
      return check(uv_fs_close(loop(), &req, std::exchange(fd, -1), &Job::onFs));
    }
    step = Step::CleanupUnlink;
    check(uv_fs_unlink(loop(), &req, tempPath.c_str(), &Job::onFs));
  }

  void done(SendOutcome outcome) {
    std::unique_ptr<Job> self(this);  // freed when this returns
    std::shared_ptr<State> s = state;
    --s->inFlight;
    if (!s->abandoned) cb(std::move(outcome));
    if (s->inFlight == 0 && s->onIdle) {
      auto idle = std::move(s->onIdle);
      s->onIdle = nullptr;
      idle();
    }
  }
};

// One fsync of one folder on behalf of every job waiting in its queue:
// open the folder, fsync it, close it, then answer them all.
struct FileSender::FolderSync {
  enum class Step { Open, Sync, Close };

  uv_fs_t req{};
  std::shared_ptr<State> state;
  std::string dir;
  std::vector<Job*> jobs;
  Step step = Step::Open;
  uv_file fd = -1;
  std::optional<SendOutcome> failure;

  static void join(const std::shared_ptr<State>& state, Job* job) {
    FolderQueue& q = state->folders[job->dirPath];
    q.waiting.push_back(job);
    if (!q.running) start(state, job->dirPath);
  }

  static void start(const std::shared_ptr<State>& state, const std::string& dir) {
    FolderQueue& q = state->folders[dir];
    auto op = std::make_unique<FolderSync>();
    op->req.data = op.get();
    op->state = state;
    op->dir = dir;
    op->jobs.swap(q.waiting);
    q.running = true;
    ++state->folderSyncs;
    FolderSync* raw = op.release();  // owns itself until finish()
    raw->submit(uv_fs_open(state->loop, &raw->req, raw->dir.c_str(),
                           O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0, &FolderSync::onFs));
  }

  void submit(int rc) {
    if (rc < 0) {
      uv_fs_req_cleanup(&req);
      net::postToLoop(state->loop, [this, rc] { onStep(rc); });
    }
  }

  static void onFs(uv_fs_t* r) {
    auto* op = static_cast<FolderSync*>(r->data);
    ssize_t result = r->result;
    uv_fs_req_cleanup(r);
    op->onStep(result);
  }

  void onStep(ssize_t result) {
    const int err = result < 0 ? static_cast<int>(result) : 0;
    switch (step) {
      case Step::Open:
        if (err) {
          failure = SendOutcome::transient(describe("open folder", dir, err));
          return finish();
        }
        fd = static_cast<uv_file>(result);
        step = Step::Sync;
        return submit(uv_fs_fsync(state->loop, &req, fd, &FolderSync::onFs));
      case Step::Sync:
        // Some file systems cannot fsync a folder (EINVAL); the rename is
        // then as durable as they make it.
        if (err && err != UV_EINVAL) {
          failure = SendOutcome::transient(describe("fsync folder", dir, err));
        }
        step = Step::Close;
        return submit(uv_fs_close(state->loop, &req, std::exchange(fd, -1), &FolderSync::onFs));
      case Step::Close:
        return finish();
    }
  }

  void finish() {
    std::unique_ptr<FolderSync> self(this);  // freed when this returns
    // Renames that arrived meanwhile get the next fsync; it starts before
    // the callbacks below, which may queue more writes of their own.
    FolderQueue& q = state->folders[dir];
    q.running = false;
    if (!q.waiting.empty()) {
      start(state, dir);
    } else {
      state->folders.erase(dir);
    }
    for (Job* job : jobs) job->done(failure ? *failure : SendOutcome::sent(job->finalPath));
  }
};

void FileSender::Job::renamed() { FolderSync::join(state, this); }

// A stream's renames happen in send() order, each after the one before it.
// One pool request per rename made them a chain of round trips through
// the pool: a group sync answers a whole read's files at once, and their
// renames then went one after another (at one destination, most of a
// read's time). So a job whose turn comes renames, in one request, every
// job behind it in the stream that is already waiting for its turn, in
// order, stopping at the first failure; the jobs behind a failure are not
// renamed and fail as they did before ("an earlier message ... failed").
// Jobs that become ready meanwhile wait for the last one of the run.
struct FileSender::RenameRun {
  uv_work_t work{};
  std::vector<Job*> jobs;  // in stream order; each waits in Step::Rename
  std::vector<int> results;  // 0, a negative errno, or kNotTried

  static constexpr int kNotTried = 1;

  static void start(Job* first) {
    auto run = std::make_unique<RenameRun>();
    run->work.data = run.get();
    run->jobs.push_back(first);
    for (Job* j = first; j->next && j->next->waitingForPrev; j = j->next) {
      j->next->waitingForPrev = false;
      run->jobs.push_back(j->next);
    }
    uv_loop_t* loop = first->loop();
    ++first->state->renameRequests;
    RenameRun* raw = run.release();  // owned by the request until answered()
    int rc = uv_queue_work(loop, &raw->work, &RenameRun::renameAll, &RenameRun::answered);
    if (rc < 0) net::postToLoop(loop, [raw, rc] { answered(&raw->work, rc); });
  }

  // On libuv's pool. The jobs' paths and fds are not touched on the loop
  // while they wait here.
  static void renameAll(uv_work_t* w) {
    auto* run = static_cast<RenameRun*>(w->data);
    run->results.assign(run->jobs.size(), kNotTried);
    for (size_t i = 0; i < run->jobs.size(); ++i) {
      Job* j = run->jobs[i];
      run->results[i] = j->unnamed ? link(*j) : renamed(*j);
      if (run->results[i] != 0) return;
    }
  }

  static int renamed(const Job& j) {
    return ::rename(j.tempPath.c_str(), j.finalPath.c_str()) == 0 ? 0 : -errno;
  }

  // Names an unnamed file: a link to its final name, through /proc (a
  // link from the fd itself, AT_EMPTY_PATH, needs CAP_DAC_READ_SEARCH).
  // A link never replaces a name, so where the final name exists (a
  // message written again) the file is linked to its temporary name and
  // renamed over it, and that name is removed if the rename fails.
  static int link(Job& j) {
    std::string self = "/proc/self/fd/" + std::to_string(j.fd);
    if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, j.finalPath.c_str(), AT_SYMLINK_FOLLOW) == 0)
      return 0;
    if (errno != EEXIST) return -errno;
    j.replacing = true;
    if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, j.tempPath.c_str(), AT_SYMLINK_FOLLOW) != 0)
      return -errno;
    int rc = renamed(j);
    if (rc != 0) ::unlink(j.tempPath.c_str());
    return rc;
  }

  static void answered(uv_work_t* w, int status) {
    std::unique_ptr<RenameRun> run(static_cast<RenameRun*>(w->data));
    if (status < 0) {  // never queued: the first fails with the error, the rest behind it
      run->results.assign(run->jobs.size(), kNotTried);
      run->results[0] = status;
    }
    // In order: each job's releaseNext() unlinks it from the next before
    // that one's result is taken; a failure marks the next prevFailed, so
    // a job not tried fails as "an earlier message ... failed". A job may
    // be freed by its own step, never the ones after it.
    for (size_t i = 0; i < run->jobs.size(); ++i) {
      Job* j = run->jobs[i];
      if (run->results[i] == kNotTried) {
        j->fail("not written: an earlier message of this delivery's batch failed");
      } else {
        j->onStep(run->results[i]);
      }
    }
  }
};

void FileSender::Job::rename() {
  if (prevFailed) return fail("not written: an earlier message of this delivery's batch failed");
  RenameRun::start(this);
}

int folderModeFor(int fileMode) {
  int m = fileMode & 0777;
  if (m & 0400) m |= 0100;
  if (m & 0040) m |= 0010;
  if (m & 0004) m |= 0001;
  return m;
}

std::string temporaryFileName(std::string_view finalName, pid_t writer, uint64_t n) {
  return "." + std::string(finalName) + "." + std::to_string(writer) + "-" + std::to_string(n) +
         ".tmp";
}

std::optional<pid_t> temporaryFileWriter(std::string_view n) {
  // As temporaryFileName() writes it: ".<name>.<pid>-<n>.tmp".
  if (n.size() < 8 || n[0] != '.' || !n.ends_with(".tmp")) return std::nullopt;
  n.remove_suffix(4);
  size_t dot = n.rfind('.');
  if (dot == std::string_view::npos || dot == 0) return std::nullopt;
  std::string_view tail = n.substr(dot + 1);  // "<pid>-<n>"
  size_t dash = tail.find('-');
  if (dash == std::string_view::npos || dash == 0 || dash + 1 == tail.size()) return std::nullopt;
  auto digits = [](std::string_view d) {
    return !d.empty() && d.size() <= 10 && d.find_first_not_of("0123456789") == std::string_view::npos;
  };
  if (!digits(tail.substr(0, dash)) || !digits(tail.substr(dash + 1))) return std::nullopt;
  return static_cast<pid_t>(std::stoll(std::string(tail.substr(0, dash))));
}

namespace {

// A crash between writing a temporary file and renaming it leaves the file
// behind, holding a message. At start, the ones in the destination's folder
// whose writer is gone are removed (a live writer, another engine during a
// handover say, keeps its own). Runs on libuv's pool; owns itself.
struct StaleTemporaries {
  uv_fs_t req{};
  std::string dir;
  int left = 0;

  static void start(uv_loop_t* loop, std::string dir) {
    auto s = std::make_unique<StaleTemporaries>();
    s->dir = std::move(dir);
    s->req.data = s.get();
    if (uv_fs_scandir(loop, &s->req, s->dir.c_str(), 0, &StaleTemporaries::listed) == 0)
      s.release();  // owned by the request until its callback
  }

  static void listed(uv_fs_t* req) {
    std::unique_ptr<StaleTemporaries> self(static_cast<StaleTemporaries*>(req->data));
    std::vector<std::string> stale;
    if (req->result >= 0) {
      uv_dirent_t ent;
      while (uv_fs_scandir_next(req, &ent) != UV_EOF) {
        if (ent.type == UV_DIRENT_DIR) continue;
        auto writer = temporaryFileWriter(ent.name);
        if (!writer || *writer == ::getpid()) continue;
        if (::kill(*writer, 0) == 0 || errno == EPERM) continue;  // still writing
        stale.push_back(self->dir + "/" + ent.name);
      }
    }
    uv_loop_t* loop = req->loop;
    uv_fs_req_cleanup(req);
    for (auto& path : stale) {
      spdlog::warn("file destination: removing {}, a temporary file left by a stopped engine "
                   "(its message is still pending and will be written again)",
                   path);
      auto unlink = std::make_unique<uv_fs_t>();
      int rc = uv_fs_unlink(loop, unlink.get(), path.c_str(), [](uv_fs_t* r) {
        std::unique_ptr<uv_fs_t> own(r);
        uv_fs_req_cleanup(r);
      });
      if (rc == 0) unlink.release();  // owned by the request until its callback
    }
  }
};

}  // namespace

FileSender::FileSender(uv_loop_t* loop, FileSenderSettings settings, Clock now)
    : settings_(std::move(settings)), now_(std::move(now)), state_(std::make_shared<State>()) {
  state_->loop = loop;
  if (settings_.sync == FileSync::Group) state_->group = FileSyncGroup::of(loop);
  // An unnamed file is linked through /proc/self/fd: without /proc (a
  // chroot, a sandbox that hides it), temporary names.
  static const bool procFds = ::access("/proc/self/fd", X_OK) == 0;
  state_->unnamedFiles = settings_.unnamedFiles && procFds;
  while (settings_.dir.size() > 1 && settings_.dir.back() == '/') settings_.dir.pop_back();
  if (!settings_.dir.empty()) StaleTemporaries::start(loop, settings_.dir);
}

FileSender::~FileSender() {
  state_->abandoned = true;
  state_->onIdle = nullptr;
}

void FileSender::send(SendRequest request, SendCallback cb) {
  if (closed_) {
    net::postToLoop(state_->loop,
                    [cb = std::move(cb)] { cb(SendOutcome::transient("sender closed")); });
    return;
  }
  auto name = expandFileName(settings_.nameTemplate, request, now_());
  if (!name) {
    // The template is the destination's config; every message would fail
    // alike. Transient keeps them queued until the config is fixed.
    net::postToLoop(state_->loop, [cb = std::move(cb), e = name.error().message] {
      cb(SendOutcome::transient(e));
    });
    return;
  }
  auto job = std::make_unique<Job>();
  job->req.data = job.get();
  job->state = state_;
  job->cb = std::move(cb);
  job->payload = std::move(request.payload);
  job->mode = settings_.fileMode;
  job->sync = settings_.sync;
  job->unnamed = state_->unnamedFiles;
  job->folderMode = folderModeFor(settings_.fileMode);
  job->finalPath = settings_.dir.empty() ? *name : settings_.dir + "/" + *name;
  job->dirPath = parentOf(job->finalPath);
  std::string base = job->finalPath.substr(job->finalPath.rfind('/') + 1);
  // Unique per process and write: two writes of one message at once (a
  // resend racing a retry) each get their own temporary file.
  job->tempPath = job->dirPath + "/" + temporaryFileName(base, ::getpid(), state_->nextTemp++);
  ++state_->inFlight;
  if (request.stream != 0) {
    job->stream = request.stream;
    Job*& tail = state_->streamTails[request.stream];
    if (tail) {
      tail->next = job.get();
      job->prev = tail;
    }
    tail = job.get();
  }
  // Every uv_fs_* call with a callback completes through the loop, so the
  // callback never runs inside send().
  job.release()->start();  // owns itself until done()
}

void FileSender::close(std::function<void()> done) {
  closed_ = true;
  if (!done) return;
  if (state_->inFlight == 0) {
    net::postToLoop(state_->loop, std::move(done));
  } else {
    state_->onIdle = std::move(done);
  }
}

}  // namespace ductus::senders
