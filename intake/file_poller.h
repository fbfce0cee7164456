// FilePoller: one look at a drop folder (drop_folder.h: local or SFTP) for
// the file source. The readiness rule lives here only, for both kinds.
//
// A file is ready when
// * without a marker: its size and modification time are the same as at
//   the previous poll (a writer that is still appending changes one of
//   them), so a new file is never ready on the poll that first sees it;
// * with a marker suffix (e.g. ".done"): "<name><suffix>" exists; marker
//   files themselves are never candidates.
// Dot-files, directories, links and names not matching the pattern are
// skipped. SFTP (version 3) gives times in whole seconds: a writer that
// appends within the same second still changes the size, but one that
// rewrites a file to the same size within that second looks still; such a
// writer should write a dot-file (or another name) and rename it.
// Ready files come oldest first (modification time, then name), so the
// source can take them one at a time in order.
//
// Scheduling polls and taking files one at a time belong to the file
// source; this only answers "what is ready now".
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/result.h"
#include "intake/drop_folder.h"

namespace ductus::intake {

struct PolledFile {
  std::string name;  // inside the folder
  std::string path;  // folder + "/" + name
  uint64_t size = 0;
  int64_t mtimeNs = 0;  // modification time, ns since the epoch
};

struct FilePollerSettings {
  std::string pattern = "*";  // fnmatch(3) glob on the name
  std::string markerSuffix;   // "" = ready when size and time hold still
};

class FilePoller {
 public:
  using Callback = std::function<void(Result<std::vector<PolledFile>>)>;

  // The folder outlives the poller.
  FilePoller(DropFolder& folder, FilePollerSettings settings);
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
  struct Seen {
    uint64_t size;
    int64_t mtimeNs;
  };
  static bool candidate(const FilePollerSettings& s, const std::string& name);
  std::vector<PolledFile> decide(FolderListing listing);

  DropFolder& folder_;
  FilePollerSettings settings_;
  std::unordered_map<std::string, Seen> seen_;
  bool polling_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  std::set<std::string> warnedLinks_;  // each link in the folder is logged once
};

}  // namespace ductus::intake
