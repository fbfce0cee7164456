#include "intake/file_poller.h"

#include "intake/local_folder.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace ductus::intake {
namespace {

namespace fs = std::filesystem;

class FilePollerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ductus-poller-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    uv_loop_init(&loop_);
  }
  void TearDown() override {
    poller_.reset();
    folder_.reset();
    uv_run(&loop_, UV_RUN_DEFAULT);
    uv_loop_close(&loop_);
    fs::remove_all(dir_);
  }
  void make(FilePollerSettings s = {}) {
    poller_.reset();
    folder_ = std::make_unique<LocalFolder>(&loop_, dir_, "");
    poller_ = std::make_unique<FilePoller>(*folder_, s);
  }
  void write(const std::string& name, const std::string& data, bool append = false) {
    std::ofstream(dir_ + "/" + name, append ? std::ios::app : std::ios::trunc) << data;
  }
  void setMtime(const std::string& name, time_t secs) {
    timespec t[2] = {{secs, 0}, {secs, 0}};
    ASSERT_EQ(utimensat(AT_FDCWD, (dir_ + "/" + name).c_str(), t, 0), 0);
  }
  // Runs one poll to completion; the names of the ready files in order.
  std::vector<std::string> poll() {
    std::vector<std::string> names;
    bool done = false;
    poller_->poll([&](Result<std::vector<PolledFile>> r) {
      done = true;
      ASSERT_TRUE(r) << r.error().message;
      for (auto& f : *r) {
        EXPECT_EQ(f.path, dir_ + "/" + f.name);
        names.push_back(f.name);
      }
    });
    uv_run(&loop_, UV_RUN_DEFAULT);
    EXPECT_TRUE(done);
    return names;
  }

  std::string dir_;
  uv_loop_t loop_;
  std::unique_ptr<LocalFolder> folder_;
  std::unique_ptr<FilePoller> poller_;
};

using Names = std::vector<std::string>;

TEST_F(FilePollerTest, AFileIsReadyOnceItsSizeAndTimeHoldStillBetweenPolls) {
  make();
  write("a.hl7", "MSH|1");
  EXPECT_EQ(poll(), Names{}) << "a file seen for the first time is not ready yet";
  EXPECT_EQ(poll(), Names{"a.hl7"});
  write("a.hl7", "more", true);
  setMtime("a.hl7", 2000000000);
  EXPECT_EQ(poll(), Names{}) << "a file that grew is still being written";
  EXPECT_EQ(poll(), Names{"a.hl7"});
}

TEST_F(FilePollerTest, DotFilesDirectoriesAndOtherPatternsAreSkipped) {
  FilePollerSettings s;
  s.pattern = "*.hl7";
  make(s);
  write(".partial.hl7", "x");
  write("notes.txt", "x");
  write("in.hl7", "x");
  fs::create_directory(dir_ + "/sub.hl7");
  poll();
  EXPECT_EQ(poll(), Names{"in.hl7"});
}

TEST_F(FilePollerTest, ReadyFilesComeOldestFirst) {
  make();
  write("b", "x");
  write("a", "x");
  write("c", "x");
  write("d", "x");
  setMtime("b", 1700000300);
  setMtime("a", 1700000200);
  setMtime("c", 1700000100);
  setMtime("d", 1700000200);  // same time as a: by name
  poll();
  EXPECT_EQ(poll(), (Names{"c", "a", "d", "b"}));
}

TEST_F(FilePollerTest, WithAMarkerAFileIsReadyWhenItsMarkerExists) {
  FilePollerSettings s;
  s.markerSuffix = ".done";
  make(s);
  write("x.csv", "a,b\n");
  EXPECT_EQ(poll(), Names{});
  EXPECT_EQ(poll(), Names{}) << "without its marker a file waits however still it is";
  write("x.csv.done", "");
  EXPECT_EQ(poll(), Names{"x.csv"}) << "the marker makes it ready at once";
}

TEST_F(FilePollerTest, AMissingFolderIsAnError) {
  FilePollerSettings s;
  make(s);
  fs::remove_all(dir_);
  bool failed = false;
  poller_->poll([&](Result<std::vector<PolledFile>> r) {
    failed = !r;
    if (!r) {
      EXPECT_NE(r.error().message.find(dir_), std::string::npos);
    }
  });
  uv_run(&loop_, UV_RUN_DEFAULT);
  EXPECT_TRUE(failed);
}

TEST_F(FilePollerTest, APollerDestroyedMidPollNeverCallsBack) {
  make();
  write("a", "x");
  bool called = false;
  poller_->poll([&](Result<std::vector<PolledFile>>) { called = true; });
  poller_.reset();
  uv_run(&loop_, UV_RUN_DEFAULT);
  EXPECT_FALSE(called);
}

}  // namespace
}  // namespace ductus::intake
