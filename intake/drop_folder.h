// DropFolder: the folder a file source reads, whatever holds it: a local
// folder (local_folder.h, libuv's thread pool) or one on an SFTP server
// (sftp_folder.h, over sftp::Client). The file source and the FilePoller
// see only this, so readiness, splitting, progress, resume and the final
// move or delete are one code path for both.
//
// Every call answers on the loop, never after the folder is destroyed;
// usually later, but at once when the request cannot even be queued. One request at a time is what the file
// source sends; a folder need not take more.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_set>
#include <vector>

#include "common/result.h"

namespace ductus::intake {

struct FolderEntry {
  enum class Type { File, Folder, Link, Other };
  std::string name;  // inside the folder
  Type type = Type::Other;
  uint64_t size = 0;
  int64_t mtimeNs = 0;  // modification time, ns since the epoch
};

// One look at the folder: every name in it (a marker is found by name), and
// type, size and time for the names the caller asked about.
struct FolderListing {
  std::unordered_set<std::string> names;
  std::vector<FolderEntry> entries;
};

// The name a finished file takes in move_to when its own is taken there,
// for every kind of folder: "<target>.<ns since the epoch>", so the file
// already there is kept.
inline std::string movedAsideName(const std::string& target) {
  return target + "." + std::to_string(std::chrono::system_clock::now().time_since_epoch().count());
}

class DropFolder {
 public:
  using Wanted = std::function<bool(const std::string& name)>;
  using ListCallback = std::function<void(Result<FolderListing>)>;
  using ReadCallback = std::function<void(Result<std::string>)>;
  using DoneCallback = std::function<void(Status)>;

  virtual ~DropFolder() = default;

  // How messages name the folder, and a file in it.
  virtual std::string describe() const = 0;
  virtual std::string pathOf(const std::string& name) const = 0;
  // What finish() does, for messages: "deleted" or "moved to done/".
  virtual std::string finishDescribe() const = 0;

  // Lists the folder; entries only for names `wanted` accepts (a folder may
  // skip looking at the others). A link is reported as a link, never
  // followed: anyone who can write to the folder could otherwise have the
  // engine read any file it may.
  virtual void list(Wanted wanted, ListCallback cb) = 0;
  // Up to `max` bytes of the file from `offset`; empty at its end. Reading a
  // file in order keeps it open between reads; release() lets it go.
  virtual void read(const std::string& name, uint64_t offset, size_t max, ReadCallback cb) = 0;
  virtual void release() {}
  // The file's acknowledgement once every record is stored: moved into
  // move_to (made when missing; a suffix when the name is taken there), or
  // deleted when there is no move_to.
  virtual void finish(const std::string& name, DoneCallback cb) = 0;
};

}  // namespace ductus::intake
