#include "common/sftp/client.h"

#include <fcntl.h>
#include <libssh2.h>
#include <libssh2_sftp.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "common/detached_threads.h"
#include "common/file_text.h"
#include "common/log.h"
#include "common/loop_mailbox.h"
#include "common/sftp/known_hosts.h"

namespace ductus::sftp {
namespace {

// A private key file is a few kilobytes; anything much bigger is a wrong path.
constexpr std::uintmax_t kMaxKeyBytes = 64u << 10;
// One SFTP read or write asks for at most this much; libssh2 splits it
// into packets and pipelines them.
constexpr size_t kChunk = 256u << 10;

void initLibssh2Once() {
  static std::once_flag once;
  std::call_once(once, [] { libssh2_init(0); });
}

// The key type names as known_hosts and host_key write them.
const char* hostKeyTypeName(int type) {
  switch (type) {
    case LIBSSH2_HOSTKEY_TYPE_RSA:
      return "ssh-rsa";
    case LIBSSH2_HOSTKEY_TYPE_DSS:
      return "ssh-dss";
    case LIBSSH2_HOSTKEY_TYPE_ECDSA_256:
      return "ecdsa-sha2-nistp256";
    case LIBSSH2_HOSTKEY_TYPE_ECDSA_384:
      return "ecdsa-sha2-nistp384";
    case LIBSSH2_HOSTKEY_TYPE_ECDSA_521:
      return "ecdsa-sha2-nistp521";
    case LIBSSH2_HOSTKEY_TYPE_ED25519:
      return "ssh-ed25519";
  }
  return "unknown";
}

// The host key algorithms to ask for: the pinned keys' types, an RSA key
// by the SHA-2 signatures OpenSSH accepts as well as the old one.
std::string hostKeyAlgorithms(const std::vector<std::string>& pinned) {
  std::string out;
  for (const auto& t : pinnedKeyTypes(pinned)) {
    if (!out.empty()) out += ',';
    out += t == "ssh-rsa" ? "rsa-sha2-512,rsa-sha2-256,ssh-rsa" : t;
  }
  return out;
}

Error err(ErrorKind kind, std::string message) { return Error{std::move(message), kind}; }

}  // namespace

// The SSH session and its SFTP channel, used by the worker thread only.
class Session {
 public:
  Session(const ServerSettings& s, const std::string& who, std::atomic<int>& fdOut,
          std::mutex& fdMutex, std::atomic<uint64_t>& opened)
      : s_(s), who_(who), fdOut_(fdOut), fdMutex_(fdMutex), opened_(opened) {}
  ~Session() { close(); }

  bool open() const { return sftp_ != nullptr; }

  // Connects, checks the host key, signs in, starts SFTP; says so in the
  // log either way.
  Status connect() {
    // A failure is the caller's to log (a source once per distinct
    // message, a destination as its delivery's transient outcome): here it
    // would repeat at every poll or retry.
    auto st = tryConnect();
    if (!st) return st;
    ++opened_;
    spdlog::info("sftp: {}: session open with {}", who_, s_.describe());
    return {};
  }

  Status tryConnect() {
    close();
    auto fd = dial();
    if (!fd) return fd.error();
    {
      std::lock_guard lock(fdMutex_);
      fd_ = *fd;
      fdOut_ = fd_;
    }
    session_ = libssh2_session_init();
    if (!session_) return fail(err(ErrorKind::Internal, "libssh2_session_init failed"));
    libssh2_session_set_blocking(session_, 1);
    libssh2_session_set_timeout(session_, static_cast<long>(s_.connectTimeout.count()));
    std::vector<std::string> pinned = s_.hostKeys;
    if (!s_.knownHostsFile.empty()) {
      auto text = readFileBounded(s_.knownHostsFile, kMaxKnownHostsBytes);
      if (!text) return fail(err(ErrorKind::Denied, text.error().message));
      pinned = knownHostKeys(*text, s_.host, s_.port);
      if (pinned.empty())
        return fail(err(ErrorKind::Denied, s_.knownHostsFile.string() + " has no key for " +
                                               knownHostsName(s_.host, s_.port)));
    }
    std::string algorithms = hostKeyAlgorithms(pinned);
    if (!algorithms.empty() &&
        libssh2_session_method_pref(session_, LIBSSH2_METHOD_HOSTKEY, algorithms.c_str()) != 0) {
      return fail(err(ErrorKind::Denied, "none of the pinned key types (" + algorithms +
                                             ") is one this client can check"));
    }
    if (int rc = libssh2_session_handshake(session_, fd_); rc != 0)
      return fail(sessionError("the SSH handshake", rc, ErrorKind::Unavailable));
    size_t len = 0;
    int type = 0;
    const char* key = libssh2_session_hostkey(session_, &len, &type);
    if (!key) return fail(err(ErrorKind::Denied, "the server showed no host key"));
    std::string_view blob(key, len);
    if (!pinnedKeyMatches(pinned, hostKeyTypeName(type), blob)) {
      // Nothing more is sent: not the user's name, not a credential.
      return fail(err(ErrorKind::Denied, std::string("the host key did not match: ") +
                                             s_.describe() + " showed " + hostKeyTypeName(type) +
                                             " " + fingerprint(blob) +
                                             ", which is not pinned (host_key or known_hosts at " +
                                             s_.at + "); refused before signing in"));
    }
    if (auto st = signIn(); !st) return fail(st.error());
    libssh2_session_set_timeout(session_, static_cast<long>(s_.requestTimeout.count()));
    sftp_ = libssh2_sftp_init(session_);
    if (!sftp_)
      return fail(sessionError("starting SFTP", libssh2_session_last_errno(session_),
                               ErrorKind::Unavailable));
    // fsync@openssh.com is offered in the server's version packet.
    return {};
  }

  void close() {
    closeReader();
    if (sftp_) libssh2_sftp_shutdown(sftp_);
    sftp_ = nullptr;
    if (session_) {
      libssh2_session_disconnect(session_, "closing");
      libssh2_session_free(session_);
    }
    session_ = nullptr;
    std::lock_guard lock(fdMutex_);
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    fdOut_ = -1;
  }

  // --- requests --------------------------------------------------------

  Result<std::vector<Entry>> list(const std::string& folder) {
    closeReader();
    LIBSSH2_SFTP_HANDLE* dir = libssh2_sftp_opendir(sftp_, folder.c_str());
    if (!dir) return requestError("opening the folder " + folder);
    std::vector<Entry> out;
    char name[1024];
    for (;;) {
      LIBSSH2_SFTP_ATTRIBUTES attrs{};
      int n = libssh2_sftp_readdir(dir, name, sizeof name, &attrs);
      if (n == 0) break;
      if (n < 0) {
        auto e = requestError("listing the folder " + folder, n);
        libssh2_sftp_closedir(dir);
        return e;
      }
      std::string_view nm(name, static_cast<size_t>(n));
      if (nm == "." || nm == "..") continue;
      out.push_back(entryOf(std::string(nm), attrs));
    }
    libssh2_sftp_closedir(dir);
    return out;
  }

  Result<Entry> stat(const std::string& path) {
    closeReader();
    LIBSSH2_SFTP_ATTRIBUTES attrs{};
    if (int rc = libssh2_sftp_lstat(sftp_, path.c_str(), &attrs); rc != 0)
      return requestError("reading the attributes of " + path, rc);
    auto slash = path.rfind('/');
    return entryOf(slash == std::string::npos ? path : path.substr(slash + 1), attrs);
  }

  Result<std::string> read(const std::string& path, uint64_t offset, size_t max) {
    if (reader_ && readerPath_ != path) closeReader();
    if (!reader_) {
      reader_ = libssh2_sftp_open(sftp_, path.c_str(), LIBSSH2_FXF_READ, 0);
      if (!reader_) return requestError("opening " + path);
      readerPath_ = path;
      readerAt_ = 0;
    }
    if (readerAt_ != offset) {
      libssh2_sftp_seek64(reader_, offset);
      readerAt_ = offset;
    }
    std::string out;
    out.resize(max);
    size_t got = 0;
    while (got < max) {
      ssize_t n = libssh2_sftp_read(reader_, out.data() + got, std::min(kChunk, max - got));
      if (n == 0) break;
      if (n < 0) {
        auto e = requestError("reading " + path, static_cast<int>(n));
        closeReader();
        return e;
      }
      got += static_cast<size_t>(n);
    }
    out.resize(got);
    readerAt_ += got;
    return out;
  }

  Status put(const std::string& temporary, const std::string& final, std::string_view bytes,
             int mode) {
    closeReader();
    LIBSSH2_SFTP_HANDLE* h = libssh2_sftp_open(
        sftp_, temporary.c_str(), LIBSSH2_FXF_WRITE | LIBSSH2_FXF_CREAT | LIBSSH2_FXF_TRUNC, mode);
    if (!h) return requestError("creating " + temporary);
    size_t sent = 0;
    while (sent < bytes.size()) {
      ssize_t n = libssh2_sftp_write(h, bytes.data() + sent, std::min(kChunk, bytes.size() - sent));
      if (n < 0) {
        auto e = requestError("writing " + temporary, static_cast<int>(n));
        libssh2_sftp_close(h);
        removeQuietly(temporary);
        return e;
      }
      sent += static_cast<size_t>(n);
    }
    // To the server's disk before the name appears; a server without
    // fsync@openssh.com answers "unsupported", which is not a failure.
    if (int rc = libssh2_sftp_fsync(h); rc != 0 && !unsupported(rc)) {
      auto e = requestError("flushing " + temporary, rc);
      libssh2_sftp_close(h);
      removeQuietly(temporary);
      return e;
    }
    if (int rc = libssh2_sftp_close(h); rc != 0) {
      auto e = requestError("closing " + temporary, rc);
      removeQuietly(temporary);
      return e;
    }
    // SFTP version 3's rename refuses an existing name on OpenSSH (and
    // libssh2 speaks no posix-rename@openssh.com): a file of that name is
    // removed first, so the new one replaces it.
    int rc = renameOn(temporary, final, true);
    if (rc != 0 && sftpCode(rc) != 0 && exists(final)) {
      libssh2_sftp_unlink(sftp_, final.c_str());
      rc = renameOn(temporary, final, true);
    }
    if (rc != 0) {
      auto e = requestError("renaming " + temporary + " to " + final, rc);
      removeQuietly(temporary);
      return e;
    }
    return {};
  }

  Status rename(const std::string& from, const std::string& to) {
    closeReader();
    if (exists(to)) return err(ErrorKind::Invalid, to + " exists already on " + s_.describe());
    if (int rc = renameOn(from, to, false); rc != 0)
      return requestError("renaming " + from + " to " + to, rc);
    return {};
  }

  Status remove(const std::string& path) {
    closeReader();
    if (int rc = libssh2_sftp_unlink(sftp_, path.c_str()); rc != 0)
      return requestError("removing " + path, rc);
    return {};
  }

  Status makeFolders(const std::string& path, int mode) {
    closeReader();
    size_t at = path.starts_with('/') ? 1 : 0;
    while (at <= path.size()) {
      size_t slash = path.find('/', at);
      std::string prefix = path.substr(0, slash);
      at = slash == std::string::npos ? path.size() + 1 : slash + 1;
      if (prefix.empty() || prefix.ends_with('/')) continue;
      int rc = libssh2_sftp_mkdir(sftp_, prefix.c_str(), mode);
      if (rc == 0) continue;
      if (sftpCode(rc) == 0) return requestError("making the folder " + prefix, rc);
      // mkdir fails on an existing name; an existing folder is fine.
      LIBSSH2_SFTP_ATTRIBUTES attrs{};
      if (libssh2_sftp_stat(sftp_, prefix.c_str(), &attrs) == 0 &&
          LIBSSH2_SFTP_S_ISDIR(attrs.permissions))
        continue;
      return requestError("making the folder " + prefix, rc);
    }
    return {};
  }

  // An error of the session itself (not an SFTP status): the connection is
  // gone or in an unknown state, and is closed.
  bool lostSession(const Error& e) const { return e.kind == ErrorKind::Unavailable; }

 private:
  Result<int> dial() {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_family = AF_UNSPEC;
    addrinfo* found = nullptr;
    std::string port = std::to_string(s_.port);
    if (int rc = getaddrinfo(s_.host.c_str(), port.c_str(), &hints, &found); rc != 0)
      return err(ErrorKind::Unavailable, "resolving " + s_.host + ": " + gai_strerror(rc));
    std::string why = "no address";
    int fd = -1;
    for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
      fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
      if (fd < 0) {
        why = std::strerror(errno);
        continue;
      }
      int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
      if (rc != 0 && errno == EINPROGRESS) {
        pollfd p{fd, POLLOUT, 0};
        int n = ::poll(&p, 1, static_cast<int>(s_.connectTimeout.count()));
        if (n == 0) {
          errno = ETIMEDOUT;
        } else if (n > 0) {
          int soErr = 0;
          socklen_t l = sizeof soErr;
          ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &soErr, &l);
          errno = soErr;
          rc = soErr == 0 ? 0 : -1;
        }
      }
      if (rc != 0) {
        why = std::strerror(errno);
        ::close(fd);
        fd = -1;
      }
    }
    freeaddrinfo(found);
    if (fd < 0)
      return err(ErrorKind::Unavailable, "connecting to " + s_.host + ":" + port + ": " + why);
    // libssh2 blocks on the socket itself, bounded by its session timeout.
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
  }

  Status signIn() {
    std::string offered;
    if (!s_.privateKeyFile.empty() || !s_.privateKeyPem.empty()) {
      std::string pem = s_.privateKeyPem;
      if (pem.empty()) {
        // Read at each connect, so a replaced key is used without a restart.
        auto text = readFileBounded(s_.privateKeyFile, kMaxKeyBytes);
        if (!text) return err(ErrorKind::Denied, "the private key: " + text.error().message);
        pem = std::move(*text);
      }
      int rc = libssh2_userauth_publickey_frommemory(session_, s_.user.data(), s_.user.size(),
                                                     nullptr, 0, pem.data(), pem.size(), nullptr);
      std::fill(pem.begin(), pem.end(), '\0');
      if (rc == 0) return {};
      if (rc != LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED && rc != LIBSSH2_ERROR_AUTHENTICATION_FAILED &&
          rc != LIBSSH2_ERROR_FILE && rc != LIBSSH2_ERROR_METHOD_NOT_SUPPORTED)
        return sessionError("signing in with the key", rc, ErrorKind::Unavailable);
      offered = rc == LIBSSH2_ERROR_FILE ? "the private key (unreadable: " + lastMessage() + ")"
                                         : "the private key";
    }
    if (!s_.password.empty()) {
      int rc = libssh2_userauth_password_ex(
          session_, s_.user.data(), static_cast<unsigned>(s_.user.size()), s_.password.data(),
          static_cast<unsigned>(s_.password.size()), nullptr);
      if (rc == 0) return {};
      if (rc != LIBSSH2_ERROR_AUTHENTICATION_FAILED && rc != LIBSSH2_ERROR_PASSWORD_EXPIRED &&
          rc != LIBSSH2_ERROR_METHOD_NOT_SUPPORTED)
        return sessionError("signing in with the password", rc, ErrorKind::Unavailable);
      offered += offered.empty() ? "the password" : " and the password";
    }
    if (offered.empty()) offered = "no credential (neither private_key nor password is set)";
    return err(ErrorKind::Denied, "the server refused " + s_.user + "'s sign-in with " + offered);
  }

  Entry entryOf(std::string name, const LIBSSH2_SFTP_ATTRIBUTES& a) const {
    Entry e;
    e.name = std::move(name);
    if (a.flags & LIBSSH2_SFTP_ATTR_PERMISSIONS) {
      if (LIBSSH2_SFTP_S_ISREG(a.permissions))
        e.type = Entry::Type::File;
      else if (LIBSSH2_SFTP_S_ISDIR(a.permissions))
        e.type = Entry::Type::Folder;
      else if (LIBSSH2_SFTP_S_ISLNK(a.permissions))
        e.type = Entry::Type::Link;
    }
    if (a.flags & LIBSSH2_SFTP_ATTR_SIZE) e.size = a.filesize;
    if (a.flags & LIBSSH2_SFTP_ATTR_ACMODTIME)
      e.mtimeNs = static_cast<int64_t>(a.mtime) * 1'000'000'000;
    return e;
  }

  // The server's rename, its libssh2 code. The flags reach only servers
  // of SFTP version 5 and later; OpenSSH's version 3 rename refuses an
  // existing name whatever they say.
  int renameOn(const std::string& from, const std::string& to, bool overwrite) {
    long flags = LIBSSH2_SFTP_RENAME_ATOMIC | LIBSSH2_SFTP_RENAME_NATIVE;
    if (overwrite) flags |= LIBSSH2_SFTP_RENAME_OVERWRITE;
    return libssh2_sftp_rename_ex(sftp_, from.data(), static_cast<unsigned>(from.size()), to.data(),
                                  static_cast<unsigned>(to.size()), flags);
  }

  bool exists(const std::string& path) {
    LIBSSH2_SFTP_ATTRIBUTES attrs{};
    return libssh2_sftp_lstat(sftp_, path.c_str(), &attrs) == 0;
  }

  void removeQuietly(const std::string& path) {
    if (sftp_) libssh2_sftp_unlink(sftp_, path.c_str());
  }

  void closeReader() {
    if (reader_) libssh2_sftp_close(reader_);
    reader_ = nullptr;
    readerPath_.clear();
  }

  // The SFTP status of a failed request, or 0 when the failure was the
  // session's (a timeout, the connection).
  unsigned long sftpCode(int rc) const {
    if (rc != LIBSSH2_ERROR_SFTP_PROTOCOL || !sftp_) return 0;
    return libssh2_sftp_last_error(sftp_);
  }

  bool unsupported(int rc) const { return sftpCode(rc) == LIBSSH2_FX_OP_UNSUPPORTED; }

  std::string lastMessage() const {
    char* msg = nullptr;
    int len = 0;
    if (session_) libssh2_session_last_error(session_, &msg, &len, 0);
    return msg && len > 0 ? std::string(msg, static_cast<size_t>(len)) : "no detail";
  }

  Error sessionError(const std::string& what, int rc, ErrorKind kind) const {
    std::string detail = rc == LIBSSH2_ERROR_TIMEOUT ? "no answer in time" : lastMessage();
    return err(kind, what + " with " + s_.describe() + " failed: " + detail);
  }

  // A failed SFTP request: the server's status when it gave one, else the
  // session is lost.
  Error requestError(const std::string& what, int rc = 0) const {
    if (rc == 0 && session_) rc = libssh2_session_last_errno(session_);
    unsigned long code = sftpCode(rc);
    if (code == 0) return sessionError(what, rc, ErrorKind::Unavailable);
    std::string words;
    ErrorKind kind = ErrorKind::Invalid;
    switch (code) {
      case LIBSSH2_FX_NO_SUCH_FILE:
      case LIBSSH2_FX_NO_SUCH_PATH:
        words = "no such file or folder";
        kind = ErrorKind::NotFound;
        break;
      case LIBSSH2_FX_PERMISSION_DENIED:
        words = "permission denied";
        break;
      case LIBSSH2_FX_FILE_ALREADY_EXISTS:
        words = "the name exists already";
        break;
      case LIBSSH2_FX_WRITE_PROTECT:
        words = "the file system is read-only";
        break;
      case LIBSSH2_FX_NO_SPACE_ON_FILESYSTEM:
        words = "no space left";
        break;
      case LIBSSH2_FX_QUOTA_EXCEEDED:
        words = "over quota";
        break;
      case LIBSSH2_FX_NOT_A_DIRECTORY:
        words = "not a folder";
        break;
      case LIBSSH2_FX_INVALID_FILENAME:
        words = "the server does not take that name";
        break;
      case LIBSSH2_FX_OP_UNSUPPORTED:
        words = "the server does not support it";
        break;
      case LIBSSH2_FX_FAILURE:
        words = "the server refused (SSH_FX_FAILURE)";
        break;
      default:
        words = "SFTP status " + std::to_string(code);
        break;
    }
    return err(kind, what + " on " + s_.describe() + ": " + words);
  }

  Error fail(Error e) {
    close();
    return e;
  }

  const ServerSettings& s_;
  const std::string& who_;
  std::atomic<int>& fdOut_;
  std::mutex& fdMutex_;
  std::atomic<uint64_t>& opened_;
  int fd_ = -1;
  LIBSSH2_SESSION* session_ = nullptr;
  LIBSSH2_SFTP* sftp_ = nullptr;
  LIBSSH2_SFTP_HANDLE* reader_ = nullptr;
  std::string readerPath_;
  uint64_t readerAt_ = 0;
};

// One request, as queued: what it does on the worker thread, and the
// answer it leaves for the loop.
struct Client::Job {
  // Runs the request on an open session; returns the call of its callback.
  std::function<std::function<void()>(Session&, bool reused)> run;
  // The call of its callback with an error, when it cannot run (Busy, or
  // no session could be opened).
  std::function<std::function<void()>(Error)> failWith;
};

struct Client::Shared {
  Shared(uv_loop_t* loop, ServerSettings s, std::string w, size_t max)
      : settings(std::move(s)), who(std::move(w)), maxQueued(max), mailbox(loop) {}

  const ServerSettings settings;
  const std::string who;
  const size_t maxQueued;

  std::mutex mutex;
  std::condition_variable wake;
  std::deque<Job> jobs;   // waiting for the thread
  bool stopping = false;  // the client is gone: answer nothing more
  LoopMailbox mailbox;    // answers, for the loop; closed by ~Client

  // The session's socket, for ~Client to shut down under fdMutex.
  std::atomic<int> fd{-1};
  std::mutex fdMutex;
  std::atomic<uint64_t> sessions{0};

  void answer(std::function<void()> fn) { mailbox.post(std::move(fn)); }

  void runThread() {
    Session session(settings, who, fd, fdMutex, sessions);
    for (;;) {
      Job job;
      {
        std::unique_lock lock(mutex);
        wake.wait(lock, [&] { return stopping || !jobs.empty(); });
        if (stopping) return;
        job = std::move(jobs.front());
        jobs.pop_front();
      }
      bool reused = session.open();
      if (!reused) {
        if (auto st = session.connect(); !st) {
          answer(job.failWith(st.error()));
          continue;
        }
      }
      answer(job.run(session, reused));
    }
  }
};

namespace {

// A request as a Job. A failure that lost the session closes it, so the
// next request opens a new one; when the session was a kept one (the
// server may have closed it while it sat idle), a retryable request is
// tried once more on a new session.
template <typename T>
Client::Job makeJob(Client::Callback<T> cb, bool retryable, std::function<Result<T>(Session&)> op) {
  Client::Job job;
  job.run = [cb, retryable, op = std::move(op)](Session& s, bool reused) -> std::function<void()> {
    Result<T> r = op(s);
    if (!r && s.lostSession(r.error())) {
      s.close();
      if (reused && retryable && s.connect()) r = op(s);
    }
    return [cb, r = std::move(r)]() mutable { cb(std::move(r)); };
  };
  job.failWith = [cb](Error e) -> std::function<void()> {
    return [cb, e = std::move(e)]() mutable { cb(Result<T>(std::move(e))); };
  };
  return job;
}

}  // namespace

Client::Client(uv_loop_t* loop, ServerSettings settings, std::string who, size_t maxQueued)
    : settings_(settings),
      shared_(std::make_shared<Shared>(loop, std::move(settings), std::move(who), maxQueued)) {
  initLibssh2Once();
  // The thread keeps the shared state alive until it returns; ~Client
  // never waits for it (a DNS lookup or a connect cannot be interrupted).
  std::thread([s = shared_] {
    DetachedThreads::Running running;
    s->runThread();
  }).detach();
}

Client::~Client() {
  {
    std::lock_guard lock(shared_->mutex);
    shared_->stopping = true;
    shared_->jobs.clear();
  }
  shared_->wake.notify_all();
  {
    // A blocking libssh2 call returns at once on a shut-down socket.
    std::lock_guard lock(shared_->fdMutex);
    if (int fd = shared_->fd.load(); fd >= 0) ::shutdown(fd, SHUT_RDWR);
  }
  shared_->mailbox.close();
}

void Client::submit(Job job) {
  std::unique_lock lock(shared_->mutex);
  if (shared_->jobs.size() >= shared_->maxQueued) {
    lock.unlock();
    shared_->answer(
        job.failWith(Error{"sftp: " + shared_->who + ": " + std::to_string(shared_->maxQueued) +
                               " requests to " + settings_.describe() + " wait already",
                           ErrorKind::Busy}));
    return;
  }
  shared_->jobs.push_back(std::move(job));
  lock.unlock();
  shared_->wake.notify_one();
}

uint64_t Client::sessionsOpened() const { return shared_->sessions.load(); }

void Client::list(std::string folder, Callback<std::vector<Entry>> cb) {
  submit(makeJob<std::vector<Entry>>(std::move(cb), true,
                                     [folder](Session& s) { return s.list(folder); }));
}

void Client::stat(std::string path, Callback<Entry> cb) {
  submit(makeJob<Entry>(std::move(cb), true, [path](Session& s) { return s.stat(path); }));
}

void Client::read(std::string path, uint64_t offset, size_t max, Callback<std::string> cb) {
  submit(makeJob<std::string>(
      std::move(cb), true, [path, offset, max](Session& s) { return s.read(path, offset, max); }));
}

void Client::put(std::string temporary, std::string final, std::string bytes, int mode,
                 StatusCallback cb) {
  auto data = std::make_shared<const std::string>(std::move(bytes));
  submit(makeJob<void>(std::move(cb), true, [temporary, final, data, mode](Session& s) {
    return s.put(temporary, final, *data, mode);
  }));
}

void Client::rename(std::string from, std::string to, StatusCallback cb) {
  // Not tried again: the first try may have renamed, and the second would
  // then find `to` taken.
  submit(
      makeJob<void>(std::move(cb), false, [from, to](Session& s) { return s.rename(from, to); }));
}

void Client::remove(std::string path, StatusCallback cb) {
  submit(makeJob<void>(std::move(cb), true, [path](Session& s) { return s.remove(path); }));
}

void Client::makeFolders(std::string path, int mode, StatusCallback cb) {
  submit(makeJob<void>(std::move(cb), true,
                       [path, mode](Session& s) { return s.makeFolders(path, mode); }));
}

}  // namespace ductus::sftp
