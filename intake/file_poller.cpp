#include "intake/file_poller.h"

#include <fnmatch.h>

#include <algorithm>

#include "common/log.h"

namespace ductus::intake {

FilePoller::FilePoller(DropFolder& folder, FilePollerSettings settings)
    : folder_(folder), settings_(std::move(settings)) {}

FilePoller::~FilePoller() { *alive_ = false; }

// By name alone: what is worth a stat. Markers are found in the listing's
// names, never taken themselves.
bool FilePoller::candidate(const FilePollerSettings& s, const std::string& n) {
  if (n.empty() || n[0] == '.') return false;  // dot-files: still being written, or hidden
  if (fnmatch(s.pattern.c_str(), n.c_str(), FNM_PERIOD) != 0) return false;
  const auto& m = s.markerSuffix;
  return m.empty() || n.size() < m.size() || n.compare(n.size() - m.size(), m.size(), m) != 0;
}

void FilePoller::poll(Callback cb) {
  if (polling_) {
    cb(Error{"poll of " + folder_.describe() + " is already running"});
    return;
  }
  polling_ = true;
  std::weak_ptr<bool> weak = alive_;
  // A copy: the folder may call it after the poller is gone.
  folder_.list([s = settings_](const std::string& n) { return candidate(s, n); },
               [this, weak, cb = std::move(cb)](Result<FolderListing> r) {
                 auto alive = weak.lock();
                 if (!alive || !*alive) return;
                 polling_ = false;
                 if (!r) return cb(r.error());
                 cb(decide(std::move(*r)));
               });
}

std::vector<PolledFile> FilePoller::decide(FolderListing listing) {
  std::vector<PolledFile> ready;
  std::unordered_map<std::string, Seen> now;
  for (auto& e : listing.entries) {
    if (!candidate(settings_, e.name)) continue;
    if (e.type == FolderEntry::Type::Link && warnedLinks_.insert(e.name).second)
      spdlog::warn("{}: {} is a symbolic link; links are not read, only regular files",
                   folder_.describe(), e.name);
    if (e.type != FolderEntry::Type::File) continue;
    // With a marker, a file waits for "<name><suffix>".
    if (!settings_.markerSuffix.empty() && !listing.names.count(e.name + settings_.markerSuffix))
      continue;
    now[e.name] = Seen{e.size, e.mtimeNs};
    bool isReady;
    if (!settings_.markerSuffix.empty()) {
      isReady = true;
    } else {
      auto it = seen_.find(e.name);
      isReady = it != seen_.end() && it->second.size == e.size && it->second.mtimeNs == e.mtimeNs;
    }
    if (isReady)
      ready.push_back(PolledFile{e.name, folder_.pathOf(e.name), e.size, e.mtimeNs});
  }
  seen_ = std::move(now);
  std::sort(ready.begin(), ready.end(), [](const PolledFile& a, const PolledFile& b) {
    return a.mtimeNs != b.mtimeNs ? a.mtimeNs < b.mtimeNs : a.name < b.name;
  });
  return ready;
}

}  // namespace ductus::intake
