// LocalFolder: a drop folder on this machine's disks (a `file:` source).
// Every look at it runs on libuv's thread pool (uv_fs_scandir, uv_fs_lstat,
// uv_fs_open/read, a uv_work for the move) so the loop never blocks on a
// slow disk or an NFS mount.
#pragma once

#include <uv.h>

#include <filesystem>
#include <memory>
#include <string>

#include "intake/drop_folder.h"

namespace ductus::intake {

class LocalFolder : public DropFolder {
 public:
  // moveTo: empty to delete finished files.
  LocalFolder(uv_loop_t* loop, std::filesystem::path folder, std::filesystem::path moveTo);
  ~LocalFolder() override;
  LocalFolder(const LocalFolder&) = delete;
  LocalFolder& operator=(const LocalFolder&) = delete;

  std::string describe() const override { return folder_.string(); }
  std::string pathOf(const std::string& name) const override {
    return folder_.string() + "/" + name;
  }
  std::string finishDescribe() const override {
    return moveTo_.empty() ? "deleted" : "moved to " + moveTo_.string();
  }
  void list(Wanted wanted, ListCallback cb) override;
  void read(const std::string& name, uint64_t offset, size_t max, ReadCallback cb) override;
  void release() override { open_.reset(); }
  void finish(const std::string& name, DoneCallback cb) override;

  struct OpenFile;  // a file kept open between reads; closed by its last holder

 private:
  struct ListRun;
  struct ReadReq;
  void statNext(std::unique_ptr<ListRun> run);
  void readOpen(std::unique_ptr<ReadReq> req);

  uv_loop_t* loop_;
  std::filesystem::path folder_, moveTo_;
  std::shared_ptr<OpenFile> open_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ductus::intake
