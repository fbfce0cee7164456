// The file sender on a real folder: the bytes land unchanged under the
// expanded name, no temporary file stays behind, folders are made, and a
// folder we may not write to is a Transient error naming the path.
#include "supervisor/delivery/senders/file_sender.h"

#include <gtest/gtest.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include "tests/support/receivers.h"
#include "tests/support/test_env.h"

namespace ductus::senders {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// 2026-12-02 23:59:59 UTC: a time whose local date may differ from UTC's.
const auto kFixedTime = std::chrono::system_clock::from_time_t(1796255999);

using ::ductus::test::fileText;

std::vector<std::string> listAll(const fs::path& dir) {
  std::vector<std::string> out;
  for (auto& e : fs::recursive_directory_iterator(dir)) {
    out.push_back(fs::relative(e.path(), dir).string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// In a death test's child: sends one message on a loop of its own, prints
// the outcome for the matcher, and exits 0 when it was Transient.
[[noreturn]] void sendAndExit(const FileSenderSettings& settings, SendRequest request) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  std::optional<SendOutcome> out;
  {
    FileSender sender(&loop, settings);
    sender.send(std::move(request), [&](SendOutcome o) { out = o; });
    while (uv_run(&loop, UV_RUN_ONCE)) {
    }
  }
  if (!out) _exit(3);
  fprintf(stderr, "%s %s\n", toString(out->kind), out->detail.c_str());
  _exit(out->kind == SendOutcomeKind::Transient ? 0 : 1);
}

// Every behaviour holds whatever the destination's sync: says, with
// unnamed files (O_TMPFILE, linked) and with temporary names (the sender's
// fallback where the file system makes no unnamed files).
struct Variant {
  FileSync sync;
  bool unnamed;
};

class FileSenderTest : public ::testing::TestWithParam<Variant> {
 protected:
  void SetUp() override {
    ASSERT_EQ(uv_loop_init(&loop_), 0);
    char tmpl[] = "/tmp/senders-file-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override {
    sender_.reset();
    uv_run(&loop_, UV_RUN_DEFAULT);
    EXPECT_EQ(uv_loop_close(&loop_), 0);
    std::error_code ec;
    fs::permissions(root_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(root_, ec);
  }

  FileSender& makeSender(std::string dir, std::string nameTemplate) {
    FileSenderSettings s{dir, nameTemplate};
    s.sync = GetParam().sync;
    s.unnamedFiles = GetParam().unnamed;
    sender_ = std::make_unique<FileSender>(&loop_, s, [] { return kFixedTime; });
    return *sender_;
  }

  SendOutcome sendOne(SendRequest req) {
    std::optional<SendOutcome> out;
    int calls = 0;
    sender_->send(std::move(req), [&](SendOutcome o) {
      ++calls;
      out = std::move(o);
    });
    EXPECT_FALSE(out.has_value()) << "the callback ran inside send()";
    EXPECT_TRUE(test::runUntil(&loop_, [&] { return out.has_value(); }));
    EXPECT_EQ(calls, 1);
    return out.value_or(SendOutcome::transient("no outcome"));
  }

  uv_loop_t loop_;
  fs::path root_;
  std::unique_ptr<FileSender> sender_;
};

TEST_P(FileSenderTest, TheFileHoldsThePayloadByteForByteAndNoTemporaryFileRemains) {
  makeSender(root_.string(), "{interface}-{id}.hl7");
  // ISO-8859-1 (ü = 0xfc), a NUL and CR line ends: nothing is re-encoded.
  std::string payload = std::string("MSH|^~\\&|A|B\rPID|1||M\xfcller\x00x\r", 26);
  SendOutcome out = sendOne({42, "adt", "archive", payload, {}, {}});
  EXPECT_EQ(out.kind, SendOutcomeKind::Sent) << out.detail;
  EXPECT_EQ(out.detail, (root_ / "adt-42.hl7").string());
  EXPECT_EQ(fileText(root_ / "adt-42.hl7"), payload);
  EXPECT_EQ(listAll(root_), std::vector<std::string>{"adt-42.hl7"});
}

TEST_P(FileSenderTest, FilesAndFoldersAreNotWorldReadableByDefault) {
  mode_t old = umask(022);
  makeSender(root_.string(), "{interface}/{id}.hl7");
  EXPECT_EQ(sendOne({7, "adt", "archive", "MSH|x\r", {}, {}}).kind, SendOutcomeKind::Sent);
  umask(old);
  struct stat file {}, folder {};
  ASSERT_EQ(stat((root_ / "adt" / "7.hl7").c_str(), &file), 0);
  ASSERT_EQ(stat((root_ / "adt").c_str(), &folder), 0);
  EXPECT_EQ(file.st_mode & 0777, 0640u);
  EXPECT_EQ(folder.st_mode & 0777, 0750u);
  EXPECT_EQ(folderModeFor(0644), 0755);
  EXPECT_EQ(folderModeFor(0600), 0700);
}

TEST_P(FileSenderTest, TemporaryFilesOfAStoppedEngineAreRemovedAtStartAndALiveOnesAreKept) {
  // A dead writer: a pid that exited. A live one: this test's parent.
  pid_t dead = fork();
  if (dead == 0) _exit(0);
  ASSERT_GT(dead, 0);
  waitpid(dead, nullptr, 0);
  std::string deadName = ".7.hl7." + std::to_string(dead) + "-3.tmp";
  std::string liveName = ".8.hl7." + std::to_string(getppid()) + "-1.tmp";
  for (auto& n : {deadName, liveName, std::string(".hidden.tmp"), std::string("9.hl7")})
    std::ofstream(root_ / n) << "x";
  makeSender(root_.string(), "{id}.hl7");
  EXPECT_TRUE(test::runUntil(&loop_, [&] { return !fs::exists(root_ / deadName); }, 5s));
  EXPECT_TRUE(fs::exists(root_ / liveName));
  EXPECT_TRUE(fs::exists(root_ / ".hidden.tmp")) << "not a name this sender makes";
  EXPECT_TRUE(fs::exists(root_ / "9.hl7"));
  EXPECT_EQ(temporaryFileWriter(".a.hl7.123-4.tmp"), std::optional<pid_t>(123));
  EXPECT_EQ(temporaryFileName("a.hl7", 123, 4), ".a.hl7.123-4.tmp");
  EXPECT_EQ(temporaryFileWriter(".a.hl7.x-4.tmp"), std::nullopt);
  EXPECT_EQ(temporaryFileWriter("a.hl7.123-4.tmp"), std::nullopt);
}

TEST_P(FileSenderTest, ALargePayloadIsWrittenWhole) {
  makeSender(root_.string(), "{id}.bin");
  std::string payload;
  for (int i = 0; i < 5'000'000; ++i) payload += static_cast<char>(i * 7);
  EXPECT_EQ(sendOne({1, "adt", "archive", payload, {}, {}}).kind, SendOutcomeKind::Sent);
  EXPECT_EQ(fileText(root_ / "1.bin"), payload);
}

TEST_P(FileSenderTest, TheTemplateExpandsEveryPlaceholderAndMakesMissingFolders) {
  makeSender((root_ / "out").string(), "{date}/{destination}/{interface}_{id}.txt");
  EXPECT_EQ(sendOne({7, "adt", "lab", "x", {}, {}}).kind, SendOutcomeKind::Sent);
  EXPECT_EQ(fileText(root_ / "out" / "20261202" / "lab" / "adt_7.txt"), "x");
}

TEST_P(FileSenderTest, RewritingTheSameMessageReplacesTheFile) {
  makeSender(root_.string(), "{id}.txt");
  EXPECT_EQ(sendOne({3, "adt", "lab", "first", {}, {}}).kind, SendOutcomeKind::Sent);
  EXPECT_EQ(sendOne({3, "adt", "lab", "second", {}, {}}).kind, SendOutcomeKind::Sent);
  EXPECT_EQ(fileText(root_ / "3.txt"), "second");
  EXPECT_EQ(listAll(root_), std::vector<std::string>{"3.txt"});
}

TEST_P(FileSenderTest, AnUnwritableFolderIsTransientAndNamesThePathAndTheCause) {
  fs::permissions(root_, fs::perms::all, fs::perm_options::add);
  fs::create_directory(root_ / "locked");
  fs::permissions(root_ / "locked", fs::perms::owner_read | fs::perms::owner_exec |
                                        fs::perms::others_read | fs::perms::others_exec);
  const std::string dir = (root_ / "locked").string();
  // Runs in a child: root ignores folder permissions, so there the child
  // first becomes nobody. The child prints the outcome for the matcher.
  auto attempt = [&] {
    if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(2);
    FileSenderSettings settings{dir, "{id}.txt"};
    settings.unnamedFiles = GetParam().unnamed;
    sendAndExit(settings, {5, "adt", "lab", "x", {}, {}});
  };
  // "threadsafe" re-runs this test in the child (a fresh folder of its
  // own), so the pattern matches the path's shape, not this run's name.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(attempt(), ::testing::ExitedWithCode(0),
              GetParam().unnamed
                  ? "transient create a file in /tmp/senders-file-.*/locked \\(for "
                    "/tmp/senders-file-.*/locked/5\\.txt\\): permission denied \\(EACCES\\)"
                  : "transient create /tmp/senders-file-.*/locked/\\.5\\.txt\\..*\\.tmp: "
                    "permission denied \\(EACCES\\)");
  EXPECT_TRUE(fs::is_empty(root_ / "locked"));
}

TEST_P(FileSenderTest, AFailedWriteIsTransientNamesTheFileAndLeavesNothingBehind) {
  // A file size limit makes the write fail (EFBIG) after the create; in a
  // child, so the limit binds nothing else (but the child's stderr, which
  // the death test reads from a file: hence 4 KB, not less).
  const std::string dir = root_.string();
  auto attempt = [&] {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit limit {4096, 4096};
    if (setrlimit(RLIMIT_FSIZE, &limit) != 0) _exit(2);
    FileSenderSettings settings{dir, "{id}.txt"};
    settings.sync = GetParam().sync;
    settings.unnamedFiles = GetParam().unnamed;
    sendAndExit(settings, {6, "adt", "lab", std::string(10000, 'x'), {}, {}});
  };
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(attempt(), ::testing::ExitedWithCode(0),
              GetParam().unnamed
                  ? "transient write /tmp/senders-file-.*/6\\.txt \\(not yet linked\\): .*EFBIG"
                  : "transient write /tmp/senders-file-.*/\\.6\\.txt\\..*\\.tmp: .*EFBIG");
  EXPECT_TRUE(fs::is_empty(root_)) << listAll(root_).size();
}

TEST_P(FileSenderTest, AFolderThatIsAFileIsTransientAndLeavesNothingBehind) {
  // Works as root too: no permission bit can make a regular file a folder.
  { std::ofstream(root_ / "plain") << "not a folder"; }
  makeSender((root_ / "plain").string(), "{id}.txt");
  SendOutcome out = sendOne({5, "adt", "lab", "x", {}, {}});
  EXPECT_EQ(out.kind, SendOutcomeKind::Transient);
  EXPECT_NE(out.detail.find("ENOTDIR"), std::string::npos) << out.detail;
  EXPECT_EQ(listAll(root_), std::vector<std::string>{"plain"});
}

TEST_P(FileSenderTest, AFailedRenameRemovesTheTemporaryFile) {
  // The final name is an existing non-empty folder: the rename fails after
  // the temporary file was written, which must then be removed.
  fs::create_directories(root_ / "9.txt" / "inside");
  makeSender(root_.string(), "{id}.txt");
  SendOutcome out = sendOne({9, "adt", "lab", "x", {}, {}});
  EXPECT_EQ(out.kind, SendOutcomeKind::Transient);
  EXPECT_NE(out.detail.find("rename"), std::string::npos) << out.detail;
  EXPECT_EQ(listAll(root_), (std::vector<std::string>{"9.txt", "9.txt/inside"}));
}

size_t openFds() {
  return static_cast<size_t>(std::distance(fs::directory_iterator("/proc/self/fd"),
                                           fs::directory_iterator()));
}

TEST_P(FileSenderTest, ManyWritesAtOnceAllLandShareFolderFsyncsAndCloseWaitsForThem) {
  const size_t fdsBefore = openFds();  // before the sender's start-up scan opens its folder
  makeSender(root_.string(), "{id}.txt");
  int sent = 0;
  for (int i = 0; i < 40; ++i) {
    sender_->send({i, "adt", "lab", std::to_string(i), {}, {}}, [&](SendOutcome o) {
      EXPECT_EQ(o.kind, SendOutcomeKind::Sent) << o.detail;
      ++sent;
    });
  }
  bool closed = false;
  sender_->close([&] { closed = true; });
  ASSERT_TRUE(test::runUntil(&loop_, [&] { return closed; }));
  EXPECT_EQ(sent, 40);
  for (int i = 0; i < 40; ++i)
    EXPECT_EQ(fileText(root_ / (std::to_string(i) + ".txt")), std::to_string(i));
  EXPECT_EQ(listAll(root_).size(), 40u);
  uv_run(&loop_, UV_RUN_DEFAULT);  // the closes still under way
  EXPECT_EQ(openFds(), fdsBefore) << "a file left open";
  if (GetParam().sync == FileSync::Each) {
    // Renames that overlap share a folder fsync (one each would be 40).
    EXPECT_GT(sender_->folderSyncs(), 0u);
    EXPECT_LT(sender_->folderSyncs(), 40u);
  } else {
    EXPECT_EQ(sender_->folderSyncs(), 0u);
  }
}

// The final names that appear in a folder (renamed, or linked into it),
// in the order the kernel saw them; temporary dot-names are left out.
class NameWatch {
 public:
  explicit NameWatch(const fs::path& dir) : fd_(inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {
    if (fd_ >= 0) inotify_add_watch(fd_, dir.c_str(), IN_MOVED_TO | IN_CREATE);
  }
  ~NameWatch() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  std::vector<std::string> names() {
    alignas(inotify_event) char buf[64 * 1024];
    for (;;) {
      ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n <= 0) break;
      for (char* p = buf; p < buf + n;) {
        auto* e = reinterpret_cast<inotify_event*>(p);
        if (e->mask & IN_Q_OVERFLOW) names_.push_back("<overflow>");
        else if (e->len && e->name[0] != '.') names_.emplace_back(e->name);
        p += sizeof(inotify_event) + e->len;
      }
    }
    return names_;
  }

 private:
  int fd_;
  std::vector<std::string> names_;
};

TEST_P(FileSenderTest, AStreamsFilesAppearInTheOrderTheyWereSentEvenWhenALaterWriteIsQuicker) {
  makeSender(root_.string(), "{id}.txt");
  // What a reader of the folder sees is the order of the renames, not of
  // the callbacks: watched as the kernel reports them.
  NameWatch renames(root_);
  ASSERT_TRUE(renames.ok());
  std::vector<int64_t> order;
  for (int i = 0; i < 20; ++i) {
    // The first file is large: unordered, the small ones would land first.
    SendRequest req{i, "adt", "lab", i == 0 ? std::string(16 << 20, 'x') : std::to_string(i), {}, {}};
    req.stream = 7;
    sender_->send(std::move(req), [&order, i](SendOutcome o) {
      EXPECT_EQ(o.kind, SendOutcomeKind::Sent) << o.detail;
      order.push_back(i);
    });
  }
  ASSERT_TRUE(test::runUntil(&loop_, [&] { return order.size() == 20; }));
  for (int i = 0; i < 20; ++i) EXPECT_EQ(order[i], i);
  EXPECT_EQ(listAll(root_).size(), 20u);
  std::vector<std::string> expected;
  for (int i = 0; i < 20; ++i) expected.push_back(std::to_string(i) + ".txt");
  EXPECT_EQ(renames.names(), expected);
}

TEST_P(FileSenderTest, AStreamsFilesReadyTogetherAreRenamedInOneRequest) {
  // 32 files of one stream sent at once: each sync (or close) answers
  // several together, and their renames go in order in one pool request
  // rather than one round trip through the pool each, one after another.
  auto& sender = makeSender(root_.string(), "{id}.txt");
  NameWatch renames(root_);
  ASSERT_TRUE(renames.ok());
  int done = 0;
  for (int i = 0; i < 32; ++i) {
    SendRequest req{i, "adt", "lab", std::to_string(i), {}, {}};
    req.stream = 9;
    sender.send(std::move(req), [&done](SendOutcome o) {
      EXPECT_EQ(o.kind, SendOutcomeKind::Sent) << o.detail;
      ++done;
    });
  }
  ASSERT_TRUE(test::runUntil(&loop_, [&] { return done == 32; }));
  std::vector<std::string> expected;
  for (int i = 0; i < 32; ++i) expected.push_back(std::to_string(i) + ".txt");
  EXPECT_EQ(renames.names(), expected);
  EXPECT_LT(sender.renameRequests(), 32u);
  EXPECT_GE(sender.renameRequests(), 1u);
}

TEST_P(FileSenderTest, AfterAFailedWriteTheLaterFilesOfItsStreamFailAndLeaveNothingOthersLand) {
  fs::create_directories(root_ / "2.txt" / "inside");  // 2's rename fails
  makeSender(root_.string(), "{id}.txt");
  std::map<int64_t, SendOutcome> outcomes;
  auto send = [&](int64_t id, uint64_t stream) {
    SendRequest req{id, "adt", "lab", "payload " + std::to_string(id), {}, {}};
    req.stream = stream;
    sender_->send(std::move(req), [&outcomes, id](SendOutcome o) { outcomes.emplace(id, o); });
  };
  for (int64_t id = 1; id <= 5; ++id) send(id, 3);
  send(10, 4);  // another stream: not held by stream 3's failure
  ASSERT_TRUE(test::runUntil(&loop_, [&] { return outcomes.size() == 6; }));
  EXPECT_EQ(outcomes.at(1).kind, SendOutcomeKind::Sent);
  EXPECT_EQ(outcomes.at(10).kind, SendOutcomeKind::Sent);
  for (int64_t id = 2; id <= 5; ++id) EXPECT_EQ(outcomes.at(id).kind, SendOutcomeKind::Transient) << id;
  EXPECT_NE(outcomes.at(3).detail.find("earlier"), std::string::npos) << outcomes.at(3).detail;
  EXPECT_EQ(listAll(root_),
            (std::vector<std::string>{"1.txt", "10.txt", "2.txt", "2.txt/inside"}));
}

INSTANTIATE_TEST_SUITE_P(Sync, FileSenderTest,
                         ::testing::Values(Variant{FileSync::Group, true},
                                           Variant{FileSync::Each, true},
                                           Variant{FileSync::None, true},
                                           Variant{FileSync::Group, false},
                                           Variant{FileSync::Each, false},
                                           Variant{FileSync::None, false}),
                         [](const auto& info) {
                           std::string sync = info.param.sync == FileSync::Group  ? "Group"
                                              : info.param.sync == FileSync::Each ? "Each"
                                                                                  : "None";
                           return sync + (info.param.unnamed ? "" : "Named");
                         });

TEST(FileName, PlaceholdersExpandWithTheUtcDate) {
  auto r = expandFileName("{date}-{interface}-{destination}-{id}.hl7", {12, "adt", "lab", "", {}, {}},
                          kFixedTime);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, "20261202-adt-lab-12.hl7");
}

TEST(FileName, ValuesCannotLeaveTheFolder) {
  auto r = expandFileName("{interface}/{id}", {1, "..", "lab", "", {}, {}}, kFixedTime);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(*r, "__/1");
  r = expandFileName("{interface}.x", {1, "a/../../etc/passwd", "lab", "", {}, {}}, kFixedTime);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->find('/'), std::string::npos);
}

TEST(FileName, BadTemplatesAreRefused) {
  EXPECT_FALSE(validateNameTemplate("{nope}.txt").ok());
  EXPECT_FALSE(validateNameTemplate("{id").ok());
  EXPECT_FALSE(validateNameTemplate("/abs/{id}").ok());
  EXPECT_FALSE(validateNameTemplate("../{id}").ok());
  EXPECT_FALSE(validateNameTemplate(".{id}").ok());
  EXPECT_FALSE(validateNameTemplate("a//{id}").ok());
  EXPECT_TRUE(validateNameTemplate("{date}/{id}.hl7").ok());
}

}  // namespace
}  // namespace ductus::senders
