// The SFTP destination's half of scripts/bench-sftp.sh: every file of a
// folder (read into memory first, not timed) delivered through one
// SftpSender to a server, one after another as a destination's loop sends
// them (pipelineDepth 1: each waits for its outcome). Prints
// "files=N rate=R sessions=S"; exits 1 on any failure, naming it.
//
//   sftp_load FOLDER HOST PORT USER KEYFILE "HOSTKEY" REMOTE_DIR
#include <uv.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "supervisor/delivery/senders/sftp_sender.h"

using namespace ductus;

int main(int argc, char** argv) {
  if (argc != 8) {
    std::fprintf(stderr, "usage: sftp_load FOLDER HOST PORT USER KEYFILE \"HOSTKEY\" REMOTE_DIR\n");
    return 2;
  }
  std::vector<std::pair<std::string, std::string>> files;  // name, bytes
  for (auto& e : std::filesystem::directory_iterator(argv[1])) {
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    files.emplace_back(e.path().filename().string(), ss.str());
  }
  uv_loop_t loop;
  uv_loop_init(&loop);
  senders::SftpSenderSettings s;
  s.server.host = argv[2];
  s.server.port = static_cast<uint16_t>(std::atoi(argv[3]));
  s.server.user = argv[4];
  s.server.privateKeyFile = argv[5];
  s.server.hostKeys = {argv[6]};
  s.dir = argv[7];
  // The destination's id is the name: the same names `sftp -b` puts.
  s.nameTemplate = "{destination}";
  s.who = "sftp_load";
  auto sender = std::make_unique<senders::SftpSender>(&loop, s);
  size_t next = 0, answered = 0;
  std::string failure;
  std::function<void()> sendNext = [&] {
    senders::SendRequest r;
    r.messageId = static_cast<int64_t>(next + 1);
    r.interfaceName = "bench";
    r.destinationName = files[next].first;
    r.payload = files[next].second;
    ++next;
    sender->send(std::move(r), [&](senders::SendOutcome o) {
      ++answered;
      if (o.kind != senders::SendOutcomeKind::Sent)
        failure = o.detail;
      else if (next < files.size())
        sendNext();
    });
  };
  auto t0 = std::chrono::steady_clock::now();
  if (!files.empty()) sendNext();
  while (answered < files.size() && failure.empty()) uv_run(&loop, UV_RUN_ONCE);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  uint64_t sessions = sender->sessionsOpened();
  bool closed = false;
  sender->close([&] { closed = true; });
  while (!closed) uv_run(&loop, UV_RUN_ONCE);
  sender.reset();
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  if (!failure.empty()) {
    std::fprintf(stderr, "sftp_load: %s\n", failure.c_str());
    return 1;
  }
  std::printf("files=%zu rate=%.0f sessions=%llu\n", files.size(), files.size() / secs,
              static_cast<unsigned long long>(sessions));
  return 0;
}
