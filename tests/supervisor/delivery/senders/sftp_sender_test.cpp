// The SFTP destination against a real OpenSSH server on 127.0.0.1 (a
// /usr/sbin/sshd per test, tests/support/sshd_server.h): many messages over
// one kept session with no temporary left behind, a server stopped and
// started again, a wrong host key, a password sign-in, a missing folder and
// a name the template can't make.
#include "supervisor/delivery/senders/sftp_sender.h"

#include <gtest/gtest.h>
#include <uv.h>

#include <filesystem>
#include <fstream>
#include <optional>

#include "tests/support/run_until.h"
#include "tests/support/sshd_server.h"
#include "tests/support/test_env.h"

namespace ductus::senders {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

using ::ductus::test::fileText;

std::vector<std::string> namesIn(const fs::path& dir) {
  std::vector<std::string> out;
  for (auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

class SftpSenderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(uv_loop_init(&loop_), 0);
    sshd_ = std::make_unique<::ductus::test::SshdServer>();
    auto started = sshd_->start();
    ASSERT_TRUE(started) << started.error().message;
    inbox_ = sshd_->folder() / "inbox";
    sshd_->makeFolder("inbox");
  }
  void TearDown() override {
    if (sender_) {
      bool closed = false;
      sender_->close([&] { closed = true; });
      EXPECT_TRUE(test::runUntil(&loop_, [&] { return closed; }));
    }
    sender_.reset();
    uv_run(&loop_, UV_RUN_DEFAULT);
    EXPECT_EQ(uv_loop_close(&loop_), 0);
  }

  // Key sign-in, the server's key pinned, into inbox/.
  SftpSenderSettings settings() {
    SftpSenderSettings s;
    s.server = sshd_->keySettings();
    s.dir = inbox_.string();
    s.nameTemplate = "{id}.hl7";
    return s;
  }
  SftpSender& makeSender(SftpSenderSettings s) {
    sender_ = std::make_unique<SftpSender>(&loop_, std::move(s));
    return *sender_;
  }

  SendOutcome sendOne(int64_t id, std::string payload) {
    std::optional<SendOutcome> out;
    SendRequest req;
    req.messageId = id;
    req.interfaceName = "adt";
    req.destinationName = "lab";
    req.payload = std::move(payload);
    sender_->send(std::move(req), [&](SendOutcome o) { out = std::move(o); });
    EXPECT_FALSE(out) << "the callback ran inside send()";
    EXPECT_TRUE(test::runUntil(
        &loop_, [&] { return out.has_value(); }, 60s));
    return out.value_or(SendOutcome::transient("no outcome"));
  }

  uv_loop_t loop_{};
  std::unique_ptr<::ductus::test::SshdServer> sshd_;
  fs::path inbox_;
  std::unique_ptr<SftpSender> sender_;
};

TEST_F(SftpSenderTest, TwoHundredMessagesGoOverOneSessionAndLeaveNoTemporary) {
  makeSender(settings());
  for (int i = 1; i <= 200; ++i) {
    auto o = sendOne(i, "MSH|^~\\&|LAB|||||||ORU^R01|" + std::to_string(i) + "|P|2.5\r");
    ASSERT_EQ(o.kind, SendOutcomeKind::Sent) << i << ": " << o.detail;
  }
  EXPECT_EQ(sender_->sessionsOpened(), 1u);
  auto names = namesIn(inbox_);
  ASSERT_EQ(names.size(), 200u);  // no dot-temporary beside them
  for (auto& n : names) EXPECT_NE(n[0], '.') << n;
  EXPECT_EQ(fileText(inbox_ / "37.hl7"), "MSH|^~\\&|LAB|||||||ORU^R01|37|P|2.5\r");
}

TEST_F(SftpSenderTest, AStoppedServerIsTransientNamingItAndTheMessageGoesWhenItIsBack) {
  auto s = settings();
  std::string server = s.server.describe();
  makeSender(s);
  ASSERT_EQ(sendOne(1, "one").kind, SendOutcomeKind::Sent);
  sshd_->stop();
  auto down = sendOne(2, "two");
  EXPECT_EQ(down.kind, SendOutcomeKind::Transient);
  EXPECT_NE(down.detail.find(server), std::string::npos) << down.detail;
  auto restarted = sshd_->restart();
  ASSERT_TRUE(restarted) << restarted.error().message;
  auto back = sendOne(2, "two");
  EXPECT_EQ(back.kind, SendOutcomeKind::Sent) << back.detail;
  EXPECT_EQ(fileText(inbox_ / "2.hl7"), "two");
  EXPECT_EQ(namesIn(inbox_), (std::vector<std::string>{"1.hl7", "2.hl7"}));
}

TEST_F(SftpSenderTest, AWrongHostKeyIsTransientSayingTheKeyDidNotMatch) {
  auto s = settings();
  // Another server's key: a real ed25519 key, not this sshd's.
  s.server.hostKeys = {
      "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAkUt5CgstUNshcz4pink7vlO2LXNGaqbB//9HWYoX6I"};
  makeSender(s);
  auto o = sendOne(1, "x");
  EXPECT_EQ(o.kind, SendOutcomeKind::Transient);
  EXPECT_NE(o.detail.find("host key"), std::string::npos) << o.detail;
  EXPECT_NE(o.detail.find("did not match"), std::string::npos) << o.detail;
  EXPECT_TRUE(namesIn(inbox_).empty());
}

TEST_F(SftpSenderTest, APasswordOnlyDestinationSignsIn) {
  auto s = settings();
  s.server = sshd_->passwordSettings();
  makeSender(s);
  auto o = sendOne(5, "by password");
  ASSERT_EQ(o.kind, SendOutcomeKind::Sent) << o.detail;
  EXPECT_EQ(fileText(inbox_ / "5.hl7"), "by password");
}

TEST_F(SftpSenderTest, AMissingFolderIsMadeAndThePutRetried) {
  auto s = settings();
  s.dir = (sshd_->folder() / "new" / "deeper").string();
  makeSender(s);
  auto o = sendOne(3, "made");
  ASSERT_EQ(o.kind, SendOutcomeKind::Sent) << o.detail;
  EXPECT_EQ(fileText(sshd_->folder() / "new" / "deeper" / "3.hl7"), "made");
}

TEST_F(SftpSenderTest, ANameTheTemplateCannotMakeIsPermanent) {
  auto s = settings();
  s.nameTemplate = "{nope}.hl7";
  makeSender(s);
  auto o = sendOne(1, "x");
  EXPECT_EQ(o.kind, SendOutcomeKind::Permanent);
  EXPECT_NE(o.detail.find("{nope}"), std::string::npos) << o.detail;
}

TEST_F(SftpSenderTest, CloseAnswersWhatIsInFlightThenIsDone) {
  makeSender(settings());
  std::optional<SendOutcome> out;
  bool closed = false;
  SendRequest req;
  req.messageId = 9;
  req.payload = "last";
  sender_->send(std::move(req), [&](SendOutcome o) {
    EXPECT_FALSE(closed) << "done ran before the answer";
    out = std::move(o);
  });
  sender_->close([&] { closed = true; });
  ASSERT_TRUE(test::runUntil(
      &loop_, [&] { return closed; }, 60s));
  ASSERT_TRUE(out);
  EXPECT_EQ(out->kind, SendOutcomeKind::Sent) << out->detail;
  auto after = sendOne(10, "late");
  EXPECT_EQ(after.kind, SendOutcomeKind::Transient);
  sender_.reset();
}

}  // namespace
}  // namespace ductus::senders
