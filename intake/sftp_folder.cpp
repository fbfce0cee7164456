#include "intake/sftp_folder.h"

namespace ductus::intake {

namespace {

// "outbox/" and "outbox" name the same folder; "" is the start folder.
std::string trimSlash(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

std::string join(const std::string& folder, const std::string& name) {
  if (folder.empty() || folder == ".") return name;
  return folder.back() == '/' ? folder + name : folder + "/" + name;
}

FolderEntry::Type typeOf(sftp::Entry::Type t) {
  switch (t) {
    case sftp::Entry::Type::File: return FolderEntry::Type::File;
    case sftp::Entry::Type::Folder: return FolderEntry::Type::Folder;
    case sftp::Entry::Type::Link: return FolderEntry::Type::Link;
    default: return FolderEntry::Type::Other;
  }
}

}  // namespace

SftpFolder::SftpFolder(uv_loop_t* loop, sftp::ServerSettings server, std::string folder,
                       std::string moveTo, std::string who)
    : folder_(trimSlash(std::move(folder))),
      moveTo_(trimSlash(std::move(moveTo))),
      client_(loop, std::move(server), std::move(who)) {}

std::string SftpFolder::describe() const {
  return "sftp://" + client_.settings().describe() + "/" + folder_;
}

std::string SftpFolder::pathOf(const std::string& name) const { return join(folder_, name); }

void SftpFolder::list(Wanted wanted, ListCallback cb) {
  // The client answers on the loop and never after it is destroyed (it is
  // this folder's member), which is the folder's promise too.
  client_.list(folder_.empty() ? "." : folder_,
               [wanted = std::move(wanted), cb = std::move(cb)](
                   Result<std::vector<sftp::Entry>> r) {
                 if (!r) return cb(r.error());
                 FolderListing listing;
                 for (auto& e : *r) {
                   listing.names.insert(e.name);
                   if (!wanted(e.name)) continue;
                   listing.entries.push_back(
                       FolderEntry{std::move(e.name), typeOf(e.type), e.size, e.mtimeNs});
                 }
                 cb(std::move(listing));
               });
}

void SftpFolder::read(const std::string& name, uint64_t offset, size_t max, ReadCallback cb) {
  client_.read(pathOf(name), offset, max, std::move(cb));
}

void SftpFolder::finish(const std::string& name, DoneCallback cb) {
  std::string from = pathOf(name);
  if (moveTo_.empty()) return client_.remove(from, std::move(cb));
  std::string target = join(moveTo_, name);
  client_.makeFolders(moveTo_, 0755, [this, from, target, cb = std::move(cb)](Status s) {
    if (!s) return cb(s);
    client_.rename(from, target, [this, from, target, cb](Status s) {
      // rename never replaces: a name already in move_to gets a suffix, as
      // a local folder's does.
      if (s || s.error().kind != ErrorKind::Invalid) return cb(s);
      client_.rename(from, movedAsideName(target), cb);
    });
  });
}

}  // namespace ductus::intake
