// FilePoller: one look at a local folder for the file source, on libuv's
// thread pool (uv_fs_scandir, uv_fs_stat) so the loop never blocks on a
// slow disk or NFS mount.
//
// A file is ready when
// * without a marker: its size and modification time are the same as at
//   the previous poll (a writer that is still appending changes one of
//   them), so a new file is never ready on the poll that first sees it;
// * with a marker suffix (e.g. ".done"): "<name><suffix>" exists; marker
//   files themselves are never candidates.
// Dot-files, directories and names not matching the pattern are skipped.
// Ready files come oldest first (modification time, then name), so the
// source can take them one at a time in order.
//
// Scheduling polls and taking files one at a time belong to the file
// source; this only answers "what is ready now".
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/result.h"

namespace ductus::intake {

struct PolledFile {
  std::string name;  // inside the folder
  std::string path;  // folder + "/" + name
  uint64_t size = 0;
  int64_t mtimeNs = 0;  // modification time, ns since the epoch
};

struct FilePollerSettings {
  std::string folder;
  std::string pattern = "*";  // fnmatch(3) glob on the name
  std::string markerSuffix;   // "" = ready when size and time hold still
};

class FilePoller {
 public:
  using Callback = std::function<void(Result<std::vector<PolledFile>>)>;

  FilePoller(uv_loop_t* loop, FilePollerSettings settings);
  // A poll in flight when the poller goes never calls back.
  ~FilePoller();
  FilePoller(const FilePoller&) = delete;
  FilePoller& operator=(const FilePoller&) = delete;

  // Lists the folder and calls back with the files ready now. One poll at a
  // time: a poll while one runs fails at once.
  void poll(Callback cb);

  // Forgets what the last poll saw of a file (after it was moved or
  // deleted, or to make a changed file wait another round).
  void forget(const std::string& name) { seen_.erase(name); }

 private:
  struct Run;
  struct Seen {
    uint64_t size;
    int64_t mtimeNs;
  };
  void finish(Run& run);

  uv_loop_t* loop_;
  FilePollerSettings settings_;
  std::unordered_map<std::string, Seen> seen_;
  bool polling_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  std::set<std::string> warnedLinks_;  // each link in the folder is logged once
};

}  // namespace ductus::intake
