// FileSource: a `file:` source. Every poll interval it asks the FilePoller
// what is ready, then takes the ready files oldest first, one at a time; a
// failure stops the round, so later files wait and file order is kept.
//
// Unsplit, a file is one message (capped at 256 MB; bigger ones are left in
// place with an error). With `split: records` the file is streamed in 256 KB
// reads through the RecordSplitter and stored 500 records (or 4 MB) at a
// time, each batch in one transaction with the file's progress
// (source_state "file:<name>": size, time, offset, done); one batch commits
// at a time while the next is read and split. After a crash
// reading resumes at the saved offset when size and time are unchanged,
// else from the start. Only after every record is committed is the file
// moved to move_to or deleted: that is the file's acknowledgement.
//
// The folder is a DropFolder (drop_folder.h): a local one (file I/O on
// libuv's thread pool) or one on an SFTP server (sftp_folder.h, the client's
// own thread); the loop never waits on either. A host key that does not
// match or a refused sign-in is logged once per distinct message, not at
// every poll; nothing is taken meanwhile.
#pragma once

#include <uv.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/config/model.h"
#include "common/uv_handle.h"
#include "intake/drop_folder.h"
#include "intake/file_poller.h"
#include "intake/record_splitter.h"

namespace ductus::intake {
class Intake;
}

namespace ductus::intake {

class FileSource {
 public:
  static constexpr uint64_t kMaxUnsplitBytes = uint64_t{256} << 20;
  static constexpr size_t kBatchRecords = 500;
  static constexpr size_t kBatchBytes = size_t{4} << 20;
  static constexpr size_t kReadChunk = 256 * 1024;

  // maxMessageBytes: the interface's max_message_size. A file read whole,
  // or a record, larger than that is not stored (the log says which).
  FileSource(uv_loop_t* loop, Intake& intake, const config::FileSelection& files,
             config::Format format, const std::filesystem::path& projectRoot,
             uint64_t maxMessageBytes = kMaxUnsplitBytes);
  // Any folder: files.path and files.moveTo are the folder's business.
  FileSource(uv_loop_t* loop, Intake& intake, std::unique_ptr<DropFolder> folder,
             const config::FileSelection& files, config::Format format,
             uint64_t maxMessageBytes = kMaxUnsplitBytes);
  ~FileSource();

  // Takes no new file until resume(): the engine lost its ownership lock,
  // and another engine may be reading this folder soon. A file being read
  // is finished (its records are stored, its move or delete done).
  void pause();
  void resume();
  bool paused() const { return paused_; }

 private:
  struct Job;
  void schedule(uint64_t ms);
  void poll();
  void nextFile();
  void startFile(const PolledFile& f, std::optional<std::string> state);
  void onHeader(Result<std::string> r);
  void readMore();
  void onRead(Result<std::string> r);
  void advance();
  void storeBatch();
  void finishFile();
  void fail(const std::string& why);
  void fail(const Error& e);
  // Denied (host key, sign-in): logged when the message is new.
  void refused(const Error& e);
  void roundDone();
  void dropJob();

  uv_loop_t* loop_;
  Intake& intake_;
  config::FileSelection files_;
  config::Format format_;
  uint64_t maxMessageBytes_;
  std::unique_ptr<DropFolder> folder_;
  FilePoller poller_;
  std::string lastRefusal_;  // the Denied message last logged; "" after a good poll
  UvHandle<uv_timer_t> timer_;
  std::vector<PolledFile> ready_;
  size_t next_ = 0;
  std::unique_ptr<Job> job_;
  uint64_t jobSeq_ = 0;
  bool paused_ = false;
  bool idle_ = false;  // paused with no poll planned: resume() plans one
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ductus::intake
