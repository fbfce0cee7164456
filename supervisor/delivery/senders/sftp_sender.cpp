#include "supervisor/delivery/senders/sftp_sender.h"

#include <unistd.h>

#include <utility>

#include "common/net/loop_post.h"
#include "supervisor/delivery/senders/file_sender.h"

namespace ductus::senders {

struct SftpSender::Job {
  SendCallback cb;
  std::string payload;
  std::string temporary;  // beside the final name, so the rename stays in one folder
  std::string final;
  std::string folder;  // the final name's folder, made when missing
  bool madeFolder = false;
};

namespace {

std::string joinPath(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

}  // namespace

SftpSender::SftpSender(uv_loop_t* loop, SftpSenderSettings settings, Clock now)
    : loop_(loop), settings_(std::move(settings)), now_(std::move(now)) {
  client_ = std::make_unique<sftp::Client>(loop_, settings_.server, settings_.who);
}

SftpSender::~SftpSender() { client_.reset(); }

std::string SftpSender::describeFailure(const Error& e) const {
  // The log and last_error name the server, whatever words the client chose.
  std::string server = settings_.server.describe();
  if (e.message.find(server) != std::string::npos) return e.message;
  return "sftp " + server + ": " + e.message;
}

void SftpSender::send(SendRequest request, SendCallback cb) {
  if (closed_) {
    net::postToLoop(loop_, [cb = std::move(cb)] { cb(SendOutcome::transient("sender closed")); });
    return;
  }
  auto name = expandFileName(settings_.nameTemplate, request, now_());
  if (!name) {
    // The template can't name this message: retrying gives the same name.
    net::postToLoop(
        loop_, [cb = std::move(cb), e = name.error().message] { cb(SendOutcome::permanent(e)); });
    return;
  }
  auto job = std::make_shared<Job>();
  job->cb = std::move(cb);
  job->payload = std::move(request.payload);
  job->final = joinPath(settings_.dir, *name);
  auto slash = job->final.rfind('/');
  job->folder = slash == std::string::npos ? "" : job->final.substr(0, slash == 0 ? 1 : slash);
  std::string base = slash == std::string::npos ? job->final : job->final.substr(slash + 1);
  // Per process and write: a resend racing a retry gets its own temporary.
  job->temporary = joinPath(job->folder, temporaryFileName(base, ::getpid(), nextTemp_++));
  ++inFlight_;
  put(std::move(job));  // the client answers on a later turn of the loop, never inside send()
}

void SftpSender::put(std::shared_ptr<Job> job) {
  // The client keeps the bytes for a retry after a missing folder: copied,
  // not moved.
  client_->put(job->temporary, job->final, job->payload, settings_.fileMode, [this, job](Status s) {
    if (s) return finish(job, SendOutcome::sent());
    if (s.error().kind == ErrorKind::NotFound && !job->madeFolder && !job->folder.empty()) {
      job->madeFolder = true;
      client_->makeFolders(
          job->folder, folderModeFor(settings_.fileMode), [this, job](Status made) {
            if (!made) return finish(job, SendOutcome::transient(describeFailure(made.error())));
            put(job);
          });
      return;
    }
    finish(job, SendOutcome::transient(describeFailure(s.error())));
  });
}

void SftpSender::finish(const std::shared_ptr<Job>& job, SendOutcome outcome) {
  auto cb = std::move(job->cb);
  std::function<void()> done;
  if (--inFlight_ == 0 && onIdle_) done = std::exchange(onIdle_, nullptr);
  // Nothing of `this` after the callback: the caller may destroy the sender
  // once its last answer is in.
  cb(std::move(outcome));
  if (done) done();
}

void SftpSender::close(std::function<void()> done) {
  closed_ = true;
  if (!done) return;
  if (inFlight_ == 0)
    net::postToLoop(loop_, std::move(done));
  else
    onIdle_ = std::move(done);
}

}  // namespace ductus::senders
