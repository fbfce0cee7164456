// `ductus send` and `ductus sink` as someone building an interface runs
// them: both are real processes of the built binary, talking over
// 127.0.0.1 (the sink on port 0, its port read from its first line).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/fd.h"
#include "tests/support/exit_status.h"
#include "tests/support/test_ca.h"
#include "tests/support/test_env.h"

extern char** environ;

namespace ductus::test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

// Only a safety net against a hung child: nothing here is timed.
constexpr std::chrono::seconds kPatience{60};

// A child with stdout and stderr on one pipe, read as it goes.
class Child {
 public:
  explicit Child(const std::vector<std::string>& argv) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return;
    Fd readEnd(fds[0]), writeEnd(fds[1]);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, writeEnd.get(), 1);
    posix_spawn_file_actions_adddup2(&fa, writeEnd.get(), 2);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    if (posix_spawn(&pid_, args[0], &fa, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
    out_ = std::move(readEnd);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  // The next line of its output, without the newline; "" at its end.
  std::string readLine() {
    auto deadline = std::chrono::steady_clock::now() + kPatience;
    for (;;) {
      if (auto nl = text_.find('\n', taken_); nl != std::string::npos) {
        std::string line = text_.substr(taken_, nl - taken_);
        taken_ = nl + 1;
        return line;
      }
      if (!readSome(deadline)) return "";
    }
  }

  // Everything it printed, once it has exited; its exit code (-1 for a
  // signal).
  int waitExit() {
    auto deadline = std::chrono::steady_clock::now() + kPatience;
    while (readSome(deadline)) {
    }
    int status = 0;
    if (pid_ <= 0 || waitpid(pid_, &status, 0) != pid_) return -1;
    pid_ = -1;
    return ::ductus::test::exitCode(status);
  }

  int stop(int signal = SIGTERM) {
    if (pid_ > 0) kill(pid_, signal);
    return waitExit();
  }

  const std::string& output() const { return text_; }

 private:
  bool readSome(std::chrono::steady_clock::time_point deadline) {
    if (!out_.valid()) return false;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{out_.get(), POLLIN, 0};
    if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0) {
      ADD_FAILURE() << "the child did not finish; it printed:\n" << text_;
      out_.reset();
      return false;
    }
    char buf[4096];
    ssize_t n = read(out_.get(), buf, sizeof buf);
    if (n <= 0) {
      out_.reset();
      return false;
    }
    text_.append(buf, static_cast<size_t>(n));
    return true;
  }

  pid_t pid_ = -1;
  Fd out_;
  std::string text_;
  size_t taken_ = 0;
};

struct Run {
  int code = -1;
  std::string out;  // stdout and stderr
};

Run ductus(std::vector<std::string> args) {
  args.insert(args.begin(), ductusBinary());
  Child c(args);
  Run r;
  r.code = c.waitExit();
  r.out = c.output();
  return r;
}

// A running `ductus sink ARGS... --PROTOCOL 0` and the port it took.
class Sink {
 public:
  Sink(const std::string& protocol, std::vector<std::string> extra) {
    std::vector<std::string> argv{ductusBinary(), "sink", "--" + protocol, "0"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    child_ = std::make_unique<Child>(argv);
    // Log lines (stderr, on the same pipe) may come before it.
    do first_ = child_->readLine();
    while (!first_.empty() && !first_.starts_with("ductus sink: "));
    // "ductus sink: MLLP on 127.0.0.1:40123, answering AA; Ctrl-C stops"
    auto colon = first_.find("127.0.0.1:");
    if (colon != std::string::npos) port_ = std::stoi(first_.substr(colon + 10));
  }
  int port() const { return port_; }
  std::string to() const { return "127.0.0.1:" + std::to_string(port_); }
  const std::string& firstLine() const { return first_; }
  // Stops it as Ctrl-C would; its exit code.
  int stop() { return child_->stop(SIGINT); }
  const std::string& output() const { return child_->output(); }

 private:
  std::unique_ptr<Child> child_;
  std::string first_;
  int port_ = 0;
};

class SendSink : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ductus-send-sink.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& bytes) {
    auto p = dir_ / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p.string();
  }
  static std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  fs::path dir_;
};

std::string message(const std::string& id, const std::string& eol) {
  return "MSH|^~\\&|SEND|FAC|RECV|FAC|20260101120000||ADT^A01|" + id + "|P|2.5" + eol +
         "PID|1||42^^^H||Doe^John" + eol;
}

TEST_F(SendSink, EachMessageOfEachFileIsAcknowledgedAndTheSinkPrintsItsSegments) {
  Sink sink("mllp", {});
  ASSERT_GT(sink.port(), 0) << sink.firstLine();
  EXPECT_THAT(sink.firstLine(), HasSubstr("answering AA"));
  // Two messages with LF endings, and one file as an MLLP stream saved it.
  auto two = write("two.hl7", message("CTRL1", "\n") + "\n" + message("CTRL2", "\n"));
  auto framed = write("framed.hl7", "\x0b" + message("CTRL3", "\r\n") + "\x1c\r");

  auto r = ductus({"send", two, framed, "--to", sink.to()});
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr(two + " #1: MSA|AA|CTRL1\n"));
  EXPECT_THAT(r.out, HasSubstr(two + " #2: MSA|AA|CTRL2\n"));
  EXPECT_THAT(r.out, HasSubstr(framed + ": MSA|AA|CTRL3\n"));

  EXPECT_EQ(sink.stop(), 0) << sink.output();
  // One segment a line, each message after a line saying what was answered.
  EXPECT_THAT(sink.output(), HasSubstr(", answered AA\nMSH|^~\\&|SEND|FAC|RECV|FAC|20260101120000||"
                                       "ADT^A01|CTRL1|P|2.5\nPID|1||42^^^H||Doe^John\n"));
  EXPECT_THAT(sink.output(), HasSubstr("|CTRL3|"));
  EXPECT_THAT(sink.output(), HasSubstr("#3 from 127.0.0.1:"));
  EXPECT_THAT(sink.output(), Not(HasSubstr("\r")));
}

TEST_F(SendSink, ASingleMessageIsPrintedWithoutItsFileName) {
  Sink sink("mllp", {});
  ASSERT_GT(sink.port(), 0) << sink.firstLine();
  auto one = write("one.hl7", message("ONLY", "\r"));
  auto r = ductus({"send", one, "--to", sink.to()});
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, "MSA|AA|ONLY\n");
}

TEST_F(SendSink, AnAckOtherThanAaExitsWithOne) {
  Sink sink("mllp", {"--ack", "AE"});
  ASSERT_GT(sink.port(), 0) << sink.firstLine();
  auto file = write("a.hl7", message("E1", "\r"));
  auto r = ductus({"send", file, "--to", sink.to()});
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("MSA|AE|E1|"));
  EXPECT_EQ(sink.stop(), 0);
  EXPECT_THAT(sink.output(), HasSubstr("answered AE"));
}

TEST_F(SendSink, OutSavesEachMessageNumberedAfterTheFilesThere) {
  fs::path out = dir_ / "received";
  fs::create_directories(out);
  std::ofstream(out / "7.hl7") << "from an earlier run";
  Sink sink("mllp", {"--out", out.string()});
  ASSERT_GT(sink.port(), 0) << sink.firstLine();
  auto file = write("two.hl7", message("S1", "\n") + message("S2", "\r\n"));
  auto r = ductus({"send", file, "--to", sink.to()});
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(sink.stop(), 0);
  EXPECT_EQ(read(out / "7.hl7"), "from an earlier run");
  // As sent: segments end in CR whatever the file had.
  EXPECT_EQ(read(out / "8.hl7"), message("S1", "\r"));
  EXPECT_EQ(read(out / "9.hl7"), message("S2", "\r"));
  EXPECT_THAT(sink.output(), HasSubstr("saved as " + (out / "8.hl7").string()));
  // Saved, not printed.
  EXPECT_THAT(sink.output(), Not(HasSubstr("PID|1||42")));
}

TEST_F(SendSink, HttpPostsJsonWholeAndHl7MessageByMessage) {
  fs::path out = dir_ / "http";
  Sink sink("http", {"--out", out.string()});
  ASSERT_GT(sink.port(), 0) << sink.firstLine();
  std::string url = "http://" + sink.to() + "/lab";
  auto json = write("result.json", "{\"mrn\": \"42\"}\n");
  auto hl7 = write("a.hl7", message("H1", "\n"));
  auto r = ductus({"send", json, hl7, "--http", url});
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr(json + ": HTTP/1.1 200 OK\nductus sink: received #1\n"));
  EXPECT_THAT(r.out, HasSubstr(hl7 + ": HTTP/1.1 200 OK\n"));
  EXPECT_EQ(sink.stop(), 0);
  EXPECT_THAT(sink.output(), HasSubstr("#1 POST /lab from 127.0.0.1:"));
  EXPECT_THAT(sink.output(), HasSubstr("application/json, 14 bytes"));
  EXPECT_THAT(sink.output(), HasSubstr("application/hl7-v2"));
  EXPECT_EQ(read(out / "1.json"), "{\"mrn\": \"42\"}\n");
  EXPECT_EQ(read(out / "2.hl7"), message("H1", "\r"));
}

TEST_F(SendSink, AnHttpStatusOutsideTwoHundredsExitsWithOne) {
  Sink sink("http", {"--status", "503"});
  ASSERT_GT(sink.port(), 0) << sink.firstLine();
  auto text = write("note.txt", "hello");
  auto r = ductus(
      {"send", text, "--http", "http://" + sink.to() + "/x", "--content-type", "text/x-note"});
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("HTTP/1.1 503 Service Unavailable"));
  EXPECT_EQ(sink.stop(), 0);
  EXPECT_THAT(sink.output(), HasSubstr("POST /x from 127.0.0.1:"));
  EXPECT_THAT(sink.output(), HasSubstr("text/x-note, 5 bytes, answered 503\nhello\n"));
}

// A port where nothing listens: bound, never listening, so no one else
// takes it while the test runs.
struct ClosedPort {
  ClosedPort() : fd(socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len) == 0)
      port = ntohs(a.sin_port);
  }
  Fd fd;
  int port = 0;
};

TEST_F(SendSink, ARefusedConnectionNamesTheReceiverAndTheCause) {
  ClosedPort closed;
  ASSERT_GT(closed.port, 0);
  std::string to = "127.0.0.1:" + std::to_string(closed.port);
  auto file = write("two.hl7", message("R1", "\r") + message("R2", "\r"));
  auto r = ductus({"send", file, "--to", to});
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("cannot connect to " + to + ": Connection refused"));
  EXPECT_THAT(r.out, HasSubstr("1 more message not sent"));

  auto web = ductus({"send", file, "--http", "http://" + to + "/"});
  EXPECT_EQ(web.code, 1) << web.out;
  EXPECT_THAT(web.out, HasSubstr("POST http://" + to + "/ failed"));
}

TEST_F(SendSink, AReceiverThatNeverAnswersTimesOut) {
  // Listening, so the connection is made, but nothing ever reads or answers.
  ClosedPort silent;
  ASSERT_EQ(listen(silent.fd.get(), 4), 0);
  std::string to = "127.0.0.1:" + std::to_string(silent.port);
  auto file = write("a.hl7", message("T1", "\r"));
  auto r = ductus({"send", file, "--to", to, "--timeout", "300ms"});
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("no ACK from " + to + " within 300ms"));
}

TEST_F(SendSink, AMissingFileOrOneWithoutMshSendsNothing) {
  Sink sink("mllp", {});
  ASSERT_GT(sink.port(), 0) << sink.firstLine();
  auto good = write("good.hl7", message("G1", "\r"));
  auto notHl7 = write("notes.txt", "just some text\n");
  auto r = ductus({"send", good, (dir_ / "missing.hl7").string(), notHl7, "--to", sink.to()});
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr((dir_ / "missing.hl7").string() + ": no such file"));
  EXPECT_THAT(r.out, HasSubstr(notHl7 + ": no MSH segment"));
  EXPECT_THAT(r.out, HasSubstr("nothing was sent"));
  EXPECT_EQ(sink.stop(), 0);
  EXPECT_THAT(sink.output(), Not(HasSubstr("#1 from")));
}

TEST_F(SendSink, UsageMistakesExitWithTwo) {
  auto file = write("a.hl7", message("U1", "\r"));
  EXPECT_EQ(ductus({"send", file}).code, 2);
  EXPECT_EQ(ductus({"send", file, "--to", "nowhere"}).code, 2);
  EXPECT_EQ(ductus({"send", file, "--to", "127.0.0.1:1", "--http", "http://x/"}).code, 2);
  EXPECT_EQ(ductus({"sink"}).code, 2);
  EXPECT_EQ(ductus({"sink", "--mllp", "0", "--status", "500"}).code, 2);
  EXPECT_EQ(ductus({"sink", "--mllp", "0", "--ack", "XX"}).code, 2);
}

// ---- TLS ----------------------------------------------------------------

class SendSinkTls : public SendSink {
 protected:
  void SetUp() override {
    SendSink::SetUp();
    ca_.emplace(dir_ / "ca");
    other_.emplace(dir_ / "other", "Another CA");
    server_ = ca_->issue("server", "/CN=localhost", {"localhost"}, {"127.0.0.1"});
    lab_ = ca_->issue("lab", "/CN=lab-analyzer/O=Hospital");
    pharmacy_ = ca_->issue("pharmacy", "/CN=pharmacy");
    foreign_ = other_->issue("foreign", "/CN=lab-analyzer/O=Hospital");
  }
  // sink --tls with the server pair, EXTRA after it.
  std::vector<std::string> tlsSink(std::vector<std::string> extra = {}) const {
    std::vector<std::string> a{"--tls", "--cert", server_.cert.string(), "--key",
                               server_.key.string()};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  std::vector<std::string> requireLab() const {
    return tlsSink({"--client-ca", ca_->cert().string(), "--subject", "CN=lab-analyzer"});
  }
  // send FILE --to SINK --tls --ca CA, then EXTRA.
  test::Run sendTls(const Sink& sink, const std::string& file, std::vector<std::string> extra) {
    std::vector<std::string> a{"send", file, "--to", sink.to(), "--tls", "--ca",
                               ca_->cert().string()};
    a.insert(a.end(), extra.begin(), extra.end());
    return ductus(a);
  }
  static std::vector<std::string> as(const Issued& who) {
    return {"--cert", who.cert.string(), "--key", who.key.string()};
  }

  std::optional<TestCa> ca_, other_;
  Issued server_, lab_, pharmacy_, foreign_;
};

TEST_F(SendSinkTls, AClientCertificateOfTheSinksCaGetsAaAndTheMessageIsSaved) {
  fs::path out = dir_ / "received";
  auto args = requireLab();
  args.insert(args.end(), {"--out", out.string()});
  Sink sink("mllp", args);
  ASSERT_GT(sink.port(), 0) << sink.firstLine();
  EXPECT_THAT(sink.firstLine(), HasSubstr("MLLP over TLS (client certificates from "));
  auto file = write("a.hl7", message("TLS1", "\n") + message("TLS2", "\n"));
  auto r = sendTls(sink, file, as(lab_));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr(file + " #1: MSA|AA|TLS1\n"));
  EXPECT_THAT(r.out, HasSubstr(file + " #2: MSA|AA|TLS2\n"));
  EXPECT_EQ(sink.stop(), 0) << sink.output();
  EXPECT_EQ(read(out / "1.hl7"), message("TLS1", "\r"));
  EXPECT_EQ(read(out / "2.hl7"), message("TLS2", "\r"));
  // Each connection's TLS version, in the listener's own line.
  EXPECT_THAT(sink.output(), HasSubstr("TLSv1.3 from 127.0.0.1:"));
  EXPECT_THAT(sink.output(), Not(HasSubstr("refused")));
}

TEST_F(SendSinkTls, ACertificateOfAnotherCaIsRefusedAndTheSenderSaysWhy) {
  Sink sink("mllp", requireLab());
  ASSERT_GT(sink.port(), 0) << sink.firstLine();
  auto file = write("a.hl7", message("F1", "\r"));
  auto r = sendTls(sink, file, as(foreign_));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("TLS with " + sink.to() + " failed: "));
  EXPECT_THAT(r.out, HasSubstr("unknown ca"));
  EXPECT_THAT(r.out, Not(HasSubstr("MSA|")));
  EXPECT_EQ(sink.stop(), 0);
  // Refused in the engine's words, and nothing received.
  EXPECT_THAT(sink.output(), HasSubstr("refused 127.0.0.1:"));
  EXPECT_THAT(sink.output(), HasSubstr("certificate verify failed"));
  EXPECT_THAT(sink.output(), Not(HasSubstr("#1 from")));
}

TEST_F(SendSinkTls, NoCertificateOrAnotherSubjectGetsNoAck) {
  Sink sink("mllp", requireLab());
  ASSERT_GT(sink.port(), 0) << sink.firstLine();
  auto file = write("a.hl7", message("N1", "\r"));
  for (auto who : {std::vector<std::string>{}, as(pharmacy_)}) {
    auto r = sendTls(sink, file, who);
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_THAT(r.out, Not(HasSubstr("MSA|")));
  }
  EXPECT_EQ(sink.stop(), 0);
  EXPECT_THAT(sink.output(), Not(HasSubstr("#1 from")));
}

TEST_F(SendSinkTls, AReceiverCertificateNotTrustedOrForAnotherNameFailsTheHandshake) {
  Sink sink("mllp", tlsSink());
  ASSERT_GT(sink.port(), 0) << sink.firstLine();
  auto file = write("a.hl7", message("V1", "\r"));
  // Without --ca: the system's roots alone do not know the test CA.
  auto untrusted = ductus({"send", file, "--to", sink.to(), "--tls"});
  EXPECT_EQ(untrusted.code, 1) << untrusted.out;
  EXPECT_THAT(untrusted.out, HasSubstr("ductus send: TLS with " + sink.to() +
                                       " failed: certificate verify failed ("));
  auto otherName = sendTls(sink, file, {"--server-name", "lab-gw.hospital.org"});
  EXPECT_EQ(otherName.code, 1) << otherName.out;
  EXPECT_THAT(otherName.out, HasSubstr("certificate verify failed (hostname mismatch)"));
  // The name the certificate has, checked instead of the address.
  auto named = sendTls(sink, file, {"--server-name", "localhost"});
  EXPECT_EQ(named.code, 0) << named.out;
  EXPECT_EQ(named.out, "MSA|AA|V1\n");
  EXPECT_EQ(sink.stop(), 0);
}

TEST_F(SendSinkTls, HttpsWithAClientCertificate) {
  Sink sink("http", requireLab());
  ASSERT_GT(sink.port(), 0) << sink.firstLine();
  EXPECT_THAT(sink.firstLine(), HasSubstr("HTTP over TLS"));
  auto json = write("result.json", "{\"mrn\": \"42\"}\n");
  std::string url = "https://" + sink.to() + "/lab";
  auto args = std::vector<std::string>{"send", json, "--http", url, "--ca", ca_->cert().string()};
  auto withLab = args;
  withLab.insert(withLab.end(), {"--cert", lab_.cert.string(), "--key", lab_.key.string()});
  auto r = ductus(withLab);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("HTTP/1.1 200 OK"));
  auto without = ductus(args);
  EXPECT_EQ(without.code, 1) << without.out;
  EXPECT_THAT(without.out, HasSubstr("POST " + url + " failed"));
  EXPECT_EQ(sink.stop(), 0);
  EXPECT_THAT(sink.output(), HasSubstr("#1 POST /lab from 127.0.0.1:"));
  EXPECT_THAT(sink.output(), Not(HasSubstr("#2 ")));
}

TEST_F(SendSinkTls, BadTlsOptionsAreUsageErrors) {
  auto file = write("a.hl7", message("U1", "\r"));
  auto expired = ca_->issue("old", "/CN=localhost", {"localhost"}, {"127.0.0.1"}, -1);
  std::string ca = ca_->cert().string();
  // sink: --tls without its pair; a pair that expired; --subject without --client-ca.
  EXPECT_EQ(ductus({"sink", "--mllp", "0", "--tls"}).code, 2);
  auto old = ductus({"sink", "--mllp", "0", "--tls", "--cert", expired.cert.string(), "--key",
                     expired.key.string()});
  EXPECT_EQ(old.code, 2) << old.out;
  EXPECT_THAT(old.out, HasSubstr("expired"));
  EXPECT_EQ(ductus({"sink", "--mllp", "0", "--cert", server_.cert.string()}).code, 2);
  auto subj = tlsSink({"--subject", "CN=x"});
  subj.insert(subj.begin(), {"sink", "--mllp", "0"});
  EXPECT_EQ(ductus(subj).code, 2);
  // send: TLS options without --tls; --cert without --key; a key of another pair.
  EXPECT_EQ(ductus({"send", file, "--to", "127.0.0.1:1", "--ca", ca}).code, 2);
  EXPECT_EQ(ductus({"send", file, "--to", "127.0.0.1:1", "--tls", "--cert", lab_.cert.string()})
                .code,
            2);
  auto mixed = ductus({"send", file, "--to", "127.0.0.1:1", "--tls", "--cert",
                       lab_.cert.string(), "--key", pharmacy_.key.string()});
  EXPECT_EQ(mixed.code, 2) << mixed.out;
  EXPECT_THAT(mixed.out, HasSubstr("the key does not belong to the certificate"));
  EXPECT_EQ(ductus({"send", file, "--http", "http://127.0.0.1:1/", "--tls"}).code, 2);
}

}  // namespace
}  // namespace ductus::test
