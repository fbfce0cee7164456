// The file source over a DropFolder, on a real PostgreSQL: what it does
// when the folder refuses it (a host key that does not match: said once,
// nothing taken) and when a read fails mid-file (a lost SFTP session: the
// next poll resumes at the saved offset, no record lost or repeated). An
// in-memory folder plays the server here; sftp_source_test.cpp runs the
// same source against a real sshd.
#include "intake/file_source.h"

#include <gtest/gtest.h>
#include <uv.h>

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "common/uv_handle.h"
#include "intake/intake.h"
#include "tests/intake/file_source_support.h"
#include "tests/schema/store_fixture.h"
#include "tests/support/log_capture.h"

namespace ductus::intake {
namespace {

using namespace std::chrono_literals;

// A folder in memory. Answers on a later turn of the loop, as a real one.
class MemoryFolder : public DropFolder {
 public:
  explicit MemoryFolder(uv_loop_t* loop) : timer_(makeTimer(loop, this)) {}

  std::map<std::string, std::string> files;  // name -> bytes
  std::map<std::string, std::string> finished;
  std::optional<Error> listFails;  // every list fails with this
  uint64_t failReadAt = 0;         // the first read at or past this offset fails (once)
  size_t chunk = 4096;             // a read answers at most this much
  int lists = 0;

  std::string describe() const override { return "mem:/in"; }
  std::string pathOf(const std::string& name) const override { return "mem:/in/" + name; }
  std::string finishDescribe() const override { return "moved to done"; }
  void list(Wanted wanted, ListCallback cb) override {
    ++lists;
    later([this, wanted, cb] {
      if (listFails) return cb(*listFails);
      FolderListing l;
      for (auto& [name, bytes] : files) {
        l.names.insert(name);
        // A whole second, as SFTP gives.
        if (wanted(name))
          l.entries.push_back(FolderEntry{name, FolderEntry::Type::File, bytes.size(),
                                          int64_t{1700000000} * 1000000000});
      }
      cb(std::move(l));
    });
  }
  void read(const std::string& name, uint64_t offset, size_t max, ReadCallback cb) override {
    later([this, name, offset, max, cb] {
      if (failReadAt > 0 && offset >= failReadAt) {
        failReadAt = 0;
        return cb(Error{"the session was lost", ErrorKind::Unavailable});
      }
      auto it = files.find(name);
      if (it == files.end()) return cb(Error{"no such file", ErrorKind::NotFound});
      if (offset >= it->second.size()) return cb(std::string());
      cb(it->second.substr(offset, std::min(max, chunk)));
    });
  }
  void finish(const std::string& name, DoneCallback cb) override {
    later([this, name, cb] {
      finished[name] = files[name];
      files.erase(name);
      cb(Status());
    });
  }

 private:
  void later(std::function<void()> f) {
    queue_.push_back(std::move(f));
    uv_timer_start(
        timer_.get(),
        [](uv_timer_t* t) {
          auto* self = static_cast<MemoryFolder*>(t->data);
          auto q = std::move(self->queue_);
          self->queue_.clear();
          for (auto& f : q) f();
        },
        0, 0);
  }
  UvHandle<uv_timer_t> timer_;
  std::deque<std::function<void()>> queue_;
};

class FileSourceOverAFolder : public test::FileSourceTest {};

TEST_F(FileSourceOverAFolder, ARefusedFolderIsSaidOncePerDistinctMessageAndNothingIsTaken) {
  ductus::test::LogCapture log(spdlog::level::info);
  auto folder = std::make_unique<MemoryFolder>(&loop_);
  MemoryFolder& mem = *folder;
  mem.files["a.hl7"] = test::hl7Records(3, "R");
  mem.listFails = Error{"the host key of 127.0.0.1:22 did not match", ErrorKind::Denied};
  auto source = makeSource(std::move(folder));
  runFor(600ms);
  EXPECT_GE(mem.lists, 4) << "polls carry on (every 50 ms)";
  EXPECT_EQ(log.count("host key of 127.0.0.1:22 did not match"), 1u) << log.all();
  mem.listFails = Error{"the server refused the sign-in of u", ErrorKind::Denied};
  runFor(300ms);
  EXPECT_EQ(log.count("refused the sign-in"), 1u) << log.all();
  EXPECT_EQ(scalar("SELECT count(*) FROM messages"), 0);
  EXPECT_EQ(mem.files.size(), 1u);
  // Fixed: the file is taken.
  mem.listFails.reset();
  ASSERT_TRUE(runUntil([&] { return mem.finished.count("a.hl7") == 1; }, 10s)) << log.all();
  EXPECT_EQ(scalar("SELECT count(*) FROM messages"), 3);
}

TEST_F(FileSourceOverAFolder, AReadLostMidFileResumesAtTheSavedOffsetAtTheNextPoll) {
  ductus::test::LogCapture log(spdlog::level::info);
  // The next round at once: it must not read the progress before the
  // commit that was in flight when the read failed is answered.
  pollMs_ = 1;
  auto folder = std::make_unique<MemoryFolder>(&loop_);
  MemoryFolder& mem = *folder;
  const int n = 1800;  // three batches and more
  mem.files["big.hl7"] = test::hl7Records(n, "L");
  mem.failReadAt = mem.files["big.hl7"].size() * 2 / 3;  // after a batch is committed
  auto source = makeSource(std::move(folder));
  ASSERT_TRUE(runUntil([&] { return mem.finished.count("big.hl7") == 1; }, 20s)) << log.all();
  EXPECT_EQ(mem.failReadAt, 0u) << "the read failed once";
  EXPECT_EQ(log.count("the session was lost"), 1u) << log.all();
  EXPECT_EQ(log.count("resuming big.hl7 at byte"), 1u) << log.all();
  EXPECT_EQ(scalar("SELECT count(*) FROM messages"), n);
  EXPECT_EQ(scalar("SELECT count(DISTINCT payload) FROM messages"), n);
}

}  // namespace
}  // namespace ductus::intake
