// sftp::Client: one SSH session with its SFTP channel to one server, kept
// open between requests, for an SFTP source or destination.
//
// libssh2 runs blocking on a thread of the client's own; the loop only
// queues requests and receives answers (a uv_async), so a slow or silent
// server never holds the loop. Requests run one at a time in the order
// given (a source lists, then reads, then moves; a destination's puts keep
// their order). At most maxQueued wait; a request beyond that is answered
// Busy at once, on a later turn of the loop.
//
// The session is opened by the first request that needs it and again by
// the first request after a failure that lost it: the server's key is
// checked against the pinned keys (ServerSettings) before anything else is
// sent, then the key is offered, then the password. Each step is bounded
// by ServerSettings' timeouts.
//
// What a failure's ErrorKind means to a caller:
//   Unavailable  the network, the session or a timeout: worth retrying
//   Denied       the host key did not match, or the sign-in was refused:
//                retrying changes nothing until the project does (the
//                message says which)
//   NotFound     no such file or folder
//   Invalid      the server refused the request (permission denied, a
//                name it won't take); the message has the server's words
//   Internal     anything else
#pragma once

#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/sftp/settings.h"

namespace ductus::sftp {

// One name in a listed folder.
struct Entry {
  enum class Type { File, Folder, Link, Other };
  std::string name;  // inside the folder, never "." or ".."
  Type type = Type::Other;
  uint64_t size = 0;
  int64_t mtimeNs = 0;  // SFTP version 3 has whole seconds only
};

class Client {
 public:
  static constexpr size_t kDefaultMaxQueued = 64;

  template <typename T>
  using Callback = std::function<void(Result<T>)>;
  using StatusCallback = std::function<void(Status)>;

  // who: how the log and errors name the client's user ("lab-in source").
  Client(uv_loop_t* loop, ServerSettings settings, std::string who,
         size_t maxQueued = kDefaultMaxQueued);
  // Requests not yet answered never call back. The thread is joined: the
  // session's socket is shut down first, so a blocking call returns at once.
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Paths are as the server takes them: relative ones are under the user's
  // start folder (usually its home).

  // The folder's names (without "." and ".."), with type, size and time;
  // a link is reported as a link, never followed.
  void list(std::string folder, Callback<std::vector<Entry>> cb);
  void stat(std::string path, Callback<Entry> cb);
  // Up to `max` bytes of the file from `offset`; an empty string at its end.
  // The file stays open between reads of the same path, so reading a file
  // in order opens it once; any other request closes it.
  void read(std::string path, uint64_t offset, size_t max, Callback<std::string> cb);
  // Writes `bytes` to `temporary` (created or truncated, `mode`), flushes it
  // to the server's disk where the server offers fsync@openssh.com, and
  // renames it to `final`, replacing a file of that name. On any failure
  // the temporary is removed when the session still allows it.
  void put(std::string temporary, std::string final, std::string bytes, int mode,
           StatusCallback cb);
  // Fails (Invalid) when `to` exists.
  void rename(std::string from, std::string to, StatusCallback cb);
  void remove(std::string path, StatusCallback cb);
  // Makes the folder and its missing parents (mkdir -p); an existing folder
  // is fine.
  void makeFolders(std::string path, int mode, StatusCallback cb);

  // Sessions opened so far (a kept session is one, however many requests).
  uint64_t sessionsOpened() const;
  const ServerSettings& settings() const { return settings_; }

  // One request as the client's thread runs it (common/sftp/client.cpp).
  struct Job;

 private:
  struct Shared;  // the queue, the thread and the session, shared with the thread
  // Queues a request, or answers it Busy when maxQueued wait.
  void submit(Job job);
  ServerSettings settings_;
  std::shared_ptr<Shared> shared_;
};

}  // namespace ductus::sftp
