// FileSender: the file destination. Each message is written to an
// unnamed file in the target folder (O_TMPFILE) and linked to its final
// name, so a reader never sees a partial file, and a crash leaves nothing
// behind: the file system frees an unnamed file with its last fd. Where
// the final name exists already (a message written again: the new file
// replaces it) the file is linked to a temporary dot-name and renamed
// over it; where the file system makes no unnamed files, every file is
// written under a temporary dot-name and renamed. "Named" below is either
// way. How the write is made durable is
// the destination's `sync:` (FileSync below); with group and each, a crash
// or a power loss never loses a file that was reported Sent, and a final
// name never points at data that is not on disk. Every step runs on
// libuv's thread pool (uv_fs_* with callbacks); the loop never waits on
// the disk. Missing folders are made. Errors (EACCES, ENOSPC, EROFS, ...)
// are Transient and name the path and the cause; a rewrite of the same
// message replaces the file, so retrying is harmless.
#pragma once

#include <uv.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

#include "common/result.h"
#include "supervisor/delivery/senders/file_sync_group.h"
#include "supervisor/delivery/senders/sender.h"

namespace ductus::senders {

// How a file destination makes its writes durable (`sync:`).
//   group (the default): write; FileSyncGroup (the data of every file
//     destination's writes since the last group, one syncfs per file
//     system); named; FileSyncGroup again (the names; it closes the file);
//     Sent.
//   each: write; fsync the file; named (a temporary name's file is closed
//     before its rename, an unnamed one after its link); fsync the folder
//     (names landing while one runs share the next); Sent.
//   none: write; named; Sent (a temporary name's file is closed before
//     its rename, an unnamed one after its link). Nothing waits for the disk: a power
//     loss or a kernel crash may lose files reported Sent, or leave a final
//     name over an empty file. For those who accept that (validate says so).
enum class FileSync { Group, Each, None };

struct FileSenderSettings {
  std::string dir;
  // Placeholders: {id}, {interface}, {destination}, {date} (UTC yyyymmdd).
  // May contain '/' for sub-folders under dir.
  std::string nameTemplate = "{interface}-{id}.msg";
  // Before the umask. Messages are patient data: readable by the engine's
  // group at most, unless the destination's `mode:` says otherwise.
  int fileMode = 0640;
  FileSync sync = FileSync::Group;
  // Write each file unnamed (O_TMPFILE) and link it to its final name, as
  // long as the file system allows: one name made per file, where a
  // temporary name costs a create, then a rename's two lookups, insert
  // and delete in the folder. A folder watcher then sees IN_CREATE for
  // the final name (IN_MOVED_TO where the name existed). false (the
  // destination's `publish: rename`, and the fallback): a temporary name
  // renamed, IN_MOVED_TO, for readers that wait for a rename.
  bool unnamedFiles = true;
};

// The mode of a folder made for files of `fileMode`: the same, with search
// wherever reading is allowed (0640 -> 0750, 0644 -> 0755).
int folderModeFor(int fileMode);

// The temporary file a write goes to before its rename: hidden (pollers
// skip dot-files), and named for its writer so a later start can tell a dead
// writer's leftovers from a live one's: ".<name>.<pid>-<n>.tmp".
std::string temporaryFileName(std::string_view finalName, pid_t writer, uint64_t n);
// The pid that wrote such a temporary file; nullopt for any other name.
std::optional<pid_t> temporaryFileWriter(std::string_view fileName);

// The file name for a message, relative to the destination's folder.
// Slashes inside values become '_' so a name can never leave the folder;
// an unknown placeholder, an absolute name, "." or ".." components and
// names whose last part starts with '.' (the temporary files' namespace)
// are errors.
Result<std::string> expandFileName(const std::string& nameTemplate, const SendRequest& request,
                                   std::chrono::system_clock::time_point now);

// Checks a template once, at config time, with placeholder values.
Status validateNameTemplate(const std::string& nameTemplate);

class FileSender final : public Sender {
 public:
  using Clock = std::function<std::chrono::system_clock::time_point()>;

  FileSender(uv_loop_t* loop, FileSenderSettings settings,
             Clock now = [] { return std::chrono::system_clock::now(); });
  // Writes still running finish on the pool but call no callback.
  ~FileSender() override;
  FileSender(const FileSender&) = delete;
  FileSender& operator=(const FileSender&) = delete;

  // Writes run concurrently, each on its own file; files of one stream
  // are named in the order of send() (see Sender::pipelineDepth).
  void send(SendRequest request, SendCallback cb) override;
  // A whole read (50) in flight: its files share the group's syncs, so a
  // read costs about two disk flushes, not two per 16 files. At 16 it was
  // the limit at one destination (everything delivered 2.0-2.4 x the time
  // its ACKs took, against 1.4-1.7 x at 50). Each file in flight holds an
  // fd: 50 per busy destination loop (the unit's LimitNOFILE is 65,536).
  size_t pipelineDepth() const override { return 50; }
  // Waits for writes in flight (they report their real outcome), then done.
  void close(std::function<void()> done) override;

  // Folder fsyncs run so far (fewer than files when writes overlap).
  uint64_t folderSyncs() const { return state_->folderSyncs; }
  // Pool requests that renamed files so far (fewer than files when a
  // stream's files are ready together: RenameRun in file_sender.cpp).
  uint64_t renameRequests() const { return state_->renameRequests; }

 private:
  struct Job;
  struct FolderSync;
  struct RenameRun;
  // A folder's fsyncs. A folder fsync makes every rename done before it
  // durable, so renames that land while one runs wait for the next, and
  // one fsync serves them all: concurrent writes into one folder cost
  // about one file fsync each instead of two.
  struct FolderQueue {
    bool running = false;
    std::vector<Job*> waiting;
  };
  // Shared with every job, so a job can outlive the sender safely.
  struct State {
    uv_loop_t* loop;
    std::map<std::string, FolderQueue> folders;
    int inFlight = 0;
    bool abandoned = false;  // the sender is gone: call nobody back
    std::function<void()> onIdle;
    std::map<uint64_t, Job*> streamTails;  // the last job of each stream in flight
    uint64_t nextTemp = 0;
    uint64_t folderSyncs = 0;
    uint64_t renameRequests = 0;
    // New files are made unnamed (O_TMPFILE) and linked; false once the
    // file system refused (each file then has a temporary name).
    bool unnamedFiles = true;
    std::shared_ptr<FileSyncGroup> group;  // sync: group
  };

  FileSenderSettings settings_;
  Clock now_;
  std::shared_ptr<State> state_;
  bool closed_ = false;
};

}  // namespace ductus::senders
