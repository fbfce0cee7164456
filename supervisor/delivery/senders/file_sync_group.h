// FileSyncGroup: makes file destinations' writes durable in groups, as
// PostgreSQL's group commit does for WAL.
//
// A file write is durable once its data and then its name are on disk.
// Syncing each file (fsync) costs a journal commit per file, and those
// commits queue behind PostgreSQL's own WAL flushes on the same disk. So
// every file destination of a loop hands its "make this durable" requests
// here: while one group's sync runs, the requests that arrive wait, and
// the next group takes them all at once (no timer: an idle group starts at
// once, a busy one gathers). A group is at most kMaxGroup requests.
//
// A group's sync is one syncfs() per file system it touches (fstat'd for
// the device, on libuv's pool): the kernel writes every dirty page of that
// file system and commits its journal once (ext4 and xfs both force the
// log in sync_fs), and since Linux 5.8 it reports a writeback error of
// any file there. It also writes other programs' dirty pages on that file
// system (PostgreSQL's, if its data shares it): more bytes, not more
// commits. The file sender uses it twice per write: after the data
// (before the rename, so a final name never points at data that is not
// on disk) and after the rename (before reporting sent, so a sent file's
// name survives a power loss). See file_sender.h for the order.
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace ductus::senders {

class FileSyncGroup : public std::enable_shared_from_this<FileSyncGroup> {
 public:
  static constexpr size_t kMaxGroup = 1024;

  // The loop's group, made on first use and shared by every file
  // destination on that loop; gone with the last of them.
  static std::shared_ptr<FileSyncGroup> of(uv_loop_t* loop);

  explicit FileSyncGroup(uv_loop_t* loop) : loop_(loop) {}
  FileSyncGroup(const FileSyncGroup&) = delete;
  FileSyncGroup& operator=(const FileSyncGroup&) = delete;

  // Every write to fd's file system made before this call is durable when
  // done(0) runs, on the loop and never inside flush(); done(<0) is the
  // libuv error (a negative errno) the sync reported. fd stays open (the
  // caller's) until done; with closeAfter, the group closes it after the
  // sync, on the pool (the caller's last use of it: one pool request less
  // per file than a close of its own).
  void flush(int fd, std::function<void(int)> done, bool closeAfter = false);

  // For the tests and the bench: groups synced, and requests they served.
  uint64_t groups() const { return groups_; }
  uint64_t requests() const { return requests_; }

 private:
  struct Request {
    int fd;
    std::function<void(int)> done;
    bool closeAfter = false;
  };
  struct Group;
  void start();

  uv_loop_t* loop_;
  bool running_ = false;
  std::vector<Request> waiting_;
  uint64_t groups_ = 0;
  uint64_t requests_ = 0;
};

}  // namespace ductus::senders
