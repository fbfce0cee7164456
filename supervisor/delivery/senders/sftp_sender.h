// SftpSender: the SFTP destination. One sftp::Client per destination, its
// session kept open between messages and reopened by the client after a
// failure. Each message is written to a temporary dot-name in the target
// folder and renamed to its final name (Client::put), so a reader on the
// server never sees a partial file. A missing folder is made (mkdir -p) and
// the put tried once more.
//
// Outcomes: a name the template can't make is Permanent (no retry would
// change it); every other failure is Transient with the server's words: a
// server down, a key rotated or a full disk must never quarantine a message
// that was already acknowledged upstream.
#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/sftp/client.h"
#include "supervisor/delivery/senders/sender.h"

namespace ductus::senders {

struct SftpSenderSettings {
  sftp::ServerSettings server;
  std::string dir;  // the folder on the server; relative ones under the user's home
  // As a file destination's: {id}, {interface}, {destination}, {date}.
  std::string nameTemplate = "{id}";
  int fileMode = 0640;  // of the files written; folders made get folderModeFor() of it
  // Who the client's log lines name ("adt/lab").
  std::string who = "sftp destination";
};

class SftpSender final : public Sender {
 public:
  using Clock = std::function<std::chrono::system_clock::time_point()>;

  SftpSender(
      uv_loop_t* loop, SftpSenderSettings settings,
      Clock now = [] { return std::chrono::system_clock::now(); });
  // Requests in flight never call back (the client is joined).
  ~SftpSender() override;
  SftpSender(const SftpSender&) = delete;
  SftpSender& operator=(const SftpSender&) = delete;

  void send(SendRequest request, SendCallback cb) override;
  // One: the client runs requests in order, so a later put already queued
  // would still run after an earlier one failed, and become visible out of
  // order. Waiting for each outcome keeps a stream's files in order.
  size_t pipelineDepth() const override { return 1; }
  // Requests in flight are answered with their real outcome, then done.
  void close(std::function<void()> done) override;

  // Sessions the client has opened (one while the server stays up).
  uint64_t sessionsOpened() const { return client_->sessionsOpened(); }

 private:
  struct Job;
  void put(std::shared_ptr<Job> job);
  void finish(const std::shared_ptr<Job>& job, SendOutcome outcome);
  std::string describeFailure(const Error& e) const;

  uv_loop_t* loop_;
  SftpSenderSettings settings_;
  Clock now_;
  uint64_t nextTemp_ = 0;
  int inFlight_ = 0;
  bool closed_ = false;
  std::function<void()> onIdle_;
  // Last: destroyed first, so no answer arrives for a sender half gone.
  std::unique_ptr<sftp::Client> client_;
};

}  // namespace ductus::senders
