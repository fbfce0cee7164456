// SftpFolder: a drop folder on an SFTP server (an `sftp:` source), over one
// kept sftp::Client session (common/sftp/client.h: its own thread, so the
// loop never waits on the network). A lost session fails the request in
// hand (Unavailable); the client opens a new one on the next request, so
// the file source simply resumes at its next poll from the saved offset.
// A host key that does not match, or a refused sign-in, fails every
// request Denied with the client's message until the project changes.
#pragma once

#include <uv.h>

#include <string>

#include "common/sftp/client.h"
#include "intake/drop_folder.h"

namespace ductus::intake {

class SftpFolder : public DropFolder {
 public:
  // folder and moveTo as the server takes them (relative ones under the
  // user's start folder); moveTo empty to delete finished files. who: how
  // the client's log names its user ("lab-in source").
  SftpFolder(uv_loop_t* loop, sftp::ServerSettings server, std::string folder,
             std::string moveTo, std::string who);

  std::string describe() const override;
  std::string pathOf(const std::string& name) const override;
  std::string finishDescribe() const override {
    return moveTo_.empty() ? "deleted" : "moved to " + moveTo_;
  }
  void list(Wanted wanted, ListCallback cb) override;
  void read(const std::string& name, uint64_t offset, size_t max, ReadCallback cb) override;
  void finish(const std::string& name, DoneCallback cb) override;

  const sftp::Client& client() const { return client_; }

 private:
  std::string folder_, moveTo_;
  sftp::Client client_;
};

}  // namespace ductus::intake
