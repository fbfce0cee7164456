#include "supervisor/cli/send_command.h"

#include <curl/curl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/command_line.h"
#include "common/config/address.h"
#include "common/config/duration.h"
#include "common/fd.h"
#include "common/hl7/message.h"
#include "common/hl7/mllp.h"
#include "common/http_syntax.h"
#include "common/result.h"
#include "common/text.h"
#include "common/tls/certificates.h"
#include "common/tls/session.h"
#include "intake/record_splitter.h"

namespace ductus::supervisor {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// An ACK is a few hundred bytes, an HTTP answer rarely more than a few KB:
// a receiver that sends more is not answering, and is not read on.
constexpr size_t kMaxAnswerBytes = size_t{1} << 20;

struct SendArgs {
  std::vector<std::string> files;
  std::string to;    // HOST:PORT (MLLP)
  std::string http;  // URL
  std::string timeout = "10s";
  std::string contentType;  // overrides the one chosen from the file
  // TLS: over MLLP with --tls, over HTTP with an https:// URL.
  bool tls = false;
  std::string ca;          // a CA to trust beside the system's roots
  std::string cert, key;   // a client certificate to present
  std::string serverName;  // checked and sent as SNI; default: --to's host
};

// One message (or one whole file, over HTTP) to send.
struct Outgoing {
  std::string file;
  int index = 0;  // its place in the file, from 1
  std::string bytes;
  std::string contentType;
  std::string label;  // how lines about it start ("" when there is only one)
};

// A receiver's answer, and whether it accepted the message.
struct Answer {
  std::string shown;  // what is printed
  bool accepted = false;
};

// ---- files --------------------------------------------------------------

Result<std::string> readWholeFile(const std::string& path) {
  std::error_code ec;
  auto status = fs::status(path, ec);
  if (ec || !fs::exists(status)) return Error{path + ": no such file"};
  if (fs::is_directory(status)) return Error{path + ": is a folder, not a file"};
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error::fromErrno(path + ": cannot read it");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return Error::fromErrno(path + ": cannot read it");
  return bytes;
}

// HL7 wants each segment to end in CR; files end theirs in LF or CRLF as
// often as not, and a receiver may read LF as part of a field.
std::string withCrEndings(std::string_view record) {
  std::string out;
  out.reserve(record.size() + 1);
  for (size_t i = 0; i < record.size(); ++i) {
    char c = record[i];
    if (c == '\r' && i + 1 < record.size() && record[i + 1] == '\n') continue;
    out += c == '\n' ? '\r' : c;
  }
  if (!out.empty() && out.back() != '\r') out += '\r';
  return out;
}

bool endsWith(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && asciiLower(s.substr(s.size() - tail.size())) == tail;
}

// The file's messages: every HL7 message in it (a message starts at each
// line beginning with MSH; MLLP framing and batch envelopes are dropped, as
// the file source does), or over HTTP the whole file when it is JSON or
// not HL7 at all.
Result<std::vector<Outgoing>> messagesOf(const std::string& path, bool http,
                                         const std::string& contentType) {
  auto bytes = readWholeFile(path);
  if (!bytes) return bytes.error();
  std::vector<Outgoing> out;
  auto whole = [&](std::string type) {
    out.push_back({path, 1, std::move(*bytes), contentType.empty() ? type : contentType, {}});
  };
  if (http && endsWith(path, ".json")) {
    whole("application/json");
    return out;
  }
  intake::RecordSplitter splitter(intake::SplitFormat::Hl7);
  std::vector<intake::SplitRecord> records;
  splitter.feed(*bytes, records);
  splitter.finish(records);
  if (records.empty()) {
    if (http) {
      whole("text/plain");
      return out;
    }
    return Error{path +
                 ": no MSH segment, so no HL7 v2 message (each message starts with a "
                 "line beginning MSH|)"};
  }
  if (splitter.skippedBytes() > 0)
    std::fprintf(stderr, "ductus send: %s: %llu bytes outside any message were not sent\n",
                 path.c_str(), static_cast<unsigned long long>(splitter.skippedBytes()));
  int index = 0;
  for (auto& r : records)
    out.push_back({path,
                   ++index,
                   withCrEndings(r.bytes),
                   contentType.empty() ? "application/hl7-v2" : contentType,
                   {}});
  return out;
}

// "a.hl7 #2: " when there are several messages, "" for a single one.
void label(std::vector<Outgoing>& all) {
  if (all.size() < 2) return;
  // A file's messages are together, in order: the last one's index is
  // how many it holds.
  for (size_t i = 0; i < all.size();) {
    size_t end = i;
    while (end < all.size() && all[end].file == all[i].file &&
           (end == i || all[end].index == all[end - 1].index + 1))
      ++end;
    bool several = end - i > 1;
    for (; i < end; ++i)
      all[i].label = all[i].file + (several ? " #" + std::to_string(all[i].index) : "") + ": ";
  }
}

// ---- MLLP ---------------------------------------------------------------

int msLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::clamp<long long>(left.count(), 0, 1 << 30));
}

// Waits for `events` on fd until the deadline: 1 ready, 0 timed out, -1
// failed (errno).
int waitFor(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = poll(&p, 1, msLeft(deadline));
    if (rc < 0 && errno == EINTR) continue;
    return rc;
  }
}

// One connection to an MLLP receiver, made when the first message goes and
// again when the receiver closed it after an answer (some do, after each).
class MllpClient {
 public:
  // With `tls`, each connection is a TLS session for `serverName` (the
  // name sent as SNI and checked against the receiver's certificate).
  MllpClient(config::HostPort to, std::chrono::milliseconds timeout,
             std::shared_ptr<tls::ClientTls> tls = nullptr, std::string serverName = {})
      : to_(std::move(to)),
        name_(to_.toString()),
        timeout_(timeout),
        tls_(std::move(tls)),
        serverName_(serverName.empty() ? to_.host : std::move(serverName)) {}

  // Sends one message and returns its ACK (the frame's content).
  Result<std::string> exchange(std::string_view message) {
    if (fd_.valid() && closedByPeer()) drop();
    if (!fd_.valid())
      if (auto s = connect(); !s) return s.error();
    auto deadline = Clock::now() + timeout_;
    if (auto s = writeAll(hl7::mllp::frame(message), deadline); !s) {
      drop();
      return s.error();
    }
    auto ack = readFrame(deadline);
    if (!ack) drop();  // a late answer would be taken for the next one's
    return ack;
  }

 private:
  Status connect() {
    if (auto s = connectTcp(); !s) return s;
    if (!tls_) return {};
    if (auto s = handshake(); !s) {
      drop();
      return s;
    }
    return {};
  }

  Status connectTcp() {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* found = nullptr;
    std::string port = std::to_string(to_.port);
    if (int rc = getaddrinfo(to_.host.c_str(), port.c_str(), &hints, &found); rc != 0)
      return Error{"cannot find " + to_.host + ": " + gai_strerror(rc)};
    std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> list(found, &freeaddrinfo);
    auto deadline = Clock::now() + timeout_;
    std::string why = "no address";
    for (addrinfo* a = found; a; a = a->ai_next) {
      Fd fd(socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
      if (!fd.valid()) {
        why = std::strerror(errno);
        continue;
      }
      if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
        if (errno != EINPROGRESS) {
          why = std::strerror(errno);
          continue;
        }
        int ready = waitFor(fd.get(), POLLOUT, deadline);
        if (ready == 0)
          return Error{"cannot connect to " + name_ + ": no answer within " +
                       config::formatDuration(timeout_)};
        int err = 0;
        socklen_t len = sizeof err;
        if (ready < 0)
          err = errno;
        else if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0)
          err = errno;
        if (err != 0) {
          why = std::strerror(err);
          continue;
        }
      }
      fd_ = std::move(fd);
      return {};
    }
    return Error{"cannot connect to " + name_ + ": " + why};
  }

  // The TLS handshake over the connected socket, within --timeout.
  Status handshake() {
    tls::SslPtr ssl = tls_->session(serverName_);
    if (!ssl) return Error{"TLS with " + name_ + " could not start (the TLS context was not made)"};
    session_ = std::make_unique<tls::Session>(std::move(ssl));
    session_->start();
    auto deadline = Clock::now() + timeout_;
    std::string plain;
    for (;;) {
      if (auto s = flushTls(deadline); !s) return s;
      if (session_->state() == tls::Session::State::Open) return {};
      if (session_->state() != tls::Session::State::Handshaking) return tlsFailed();
      int ready = waitFor(fd_.get(), POLLIN, deadline);
      if (ready == 0)
        return Error{"TLS with " + name_ + " failed: no handshake within " +
                     config::formatDuration(timeout_) + " (--timeout)"};
      if (ready < 0) return Error::fromErrno("TLS with " + name_ + " failed");
      char chunk[16384];
      ssize_t n = recv(fd_.get(), chunk, sizeof chunk, 0);
      if (n == 0)
        return Error{"TLS with " + name_ + " failed: " + name_ +
                     " closed the connection during the handshake (not TLS, or it refused us)"};
      if (n < 0) {
        if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
        return Error::fromErrno("TLS with " + name_ + " failed");
      }
      session_->receive(std::string_view(chunk, static_cast<size_t>(n)), plain);
    }
  }

  // The session's own words: "certificate verify failed (...)", or an
  // alert from the receiver ("tlsv1 alert unknown ca").
  Error tlsFailed() const {
    std::string why = session_->state() == tls::Session::State::Closed
                          ? "the receiver closed the TLS session"
                          : session_->reason();
    return Error{"TLS with " + name_ + " failed: " + why};
  }

  // Writes what the session has for the socket.
  Status flushTls(Clock::time_point deadline) {
    if (!session_ || !session_->hasOutput()) return {};
    return writeRaw(session_->takeOutput(), deadline);
  }

  void drop() {
    session_.reset();
    fd_.reset();
  }

  // Whether the receiver closed the connection since its last answer.
  // Bytes it sent after that answer are dropped: they would be read as the
  // next message's ACK. Over TLS they go through the session first (a
  // TLS 1.3 receiver sends session tickets after the handshake; an alert
  // or close_notify ends the session).
  bool closedByPeer() {
    char junk[4096];
    for (;;) {
      ssize_t n = recv(fd_.get(), junk, sizeof junk, MSG_DONTWAIT);
      if (n > 0) {
        if (session_) {
          std::string plain;
          if (session_->receive(std::string_view(junk, static_cast<size_t>(n)), plain) !=
              tls::Session::State::Open)
            return true;
        }
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      return !(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
    }
  }

  Status writeAll(std::string_view bytes, Clock::time_point deadline) {
    if (!session_) return writeRaw(bytes, deadline);
    session_->send(bytes);
    if (session_->state() != tls::Session::State::Open) return tlsFailed();
    if (auto s = flushTls(deadline); !s) {
      // A receiver that refused our certificate after a TLS 1.3 handshake
      // has sent an alert saying why before it closed: worth reading.
      if (auto why = alertAfterClose()) return *why;
      return s;
    }
    return {};
  }

  // What a receiver that closed on us said over TLS, if anything.
  std::optional<Error> alertAfterClose() {
    if (!session_) return std::nullopt;
    char chunk[16384];
    std::string plain;
    for (;;) {
      ssize_t n = recv(fd_.get(), chunk, sizeof chunk, MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      session_->receive(std::string_view(chunk, static_cast<size_t>(n)), plain);
    }
    if (session_->state() == tls::Session::State::Failed) return tlsFailed();
    return std::nullopt;
  }

  Status writeRaw(std::string_view bytes, Clock::time_point deadline) {
    while (!bytes.empty()) {
      ssize_t n = ::send(fd_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n > 0) {
        bytes.remove_prefix(static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
        return Error::fromErrno("sending to " + name_ + " failed");
      int ready = waitFor(fd_.get(), POLLOUT, deadline);
      if (ready == 0)
        return Error{name_ + " took no more of the message within " +
                     config::formatDuration(timeout_)};
      if (ready < 0) return Error::fromErrno("sending to " + name_ + " failed");
    }
    return {};
  }

  // The next frame's content. Bytes before its start block are skipped, as
  // the listener does; the end block ends it (the CR after it is not waited
  // for: some receivers leave it out).
  Result<std::string> readFrame(Clock::time_point deadline) {
    std::string buf;
    char chunk[16384];
    for (;;) {
      if (auto start = buf.find(hl7::mllp::kStartBlock); start != std::string::npos) {
        if (auto end = buf.find(hl7::mllp::kEndBlock, start); end != std::string::npos)
          return buf.substr(start + 1, end - start - 1);
      } else {
        buf.clear();
      }
      if (buf.size() > kMaxAnswerBytes)
        return Error{name_ + " answered more than " + std::to_string(kMaxAnswerBytes >> 20) +
                     " MB without ending its frame: not an ACK"};
      if (session_ && session_->state() != tls::Session::State::Open) return tlsFailed();
      int ready = waitFor(fd_.get(), POLLIN, deadline);
      if (ready == 0)
        return Error{"no ACK from " + name_ + " within " + config::formatDuration(timeout_) +
                     " (--timeout)"};
      if (ready < 0) return Error::fromErrno("reading from " + name_ + " failed");
      ssize_t n = recv(fd_.get(), chunk, sizeof chunk, 0);
      if (n == 0)
        return Error{name_ + " closed the connection without answering" +
                     std::string(session_ ? " (over TLS a receiver that does not accept our "
                                            "certificate does this; its log says why)"
                                          : "")};
      if (n < 0) {
        if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
        return Error::fromErrno("reading from " + name_ + " failed");
      }
      if (!session_) {
        buf.append(chunk, static_cast<size_t>(n));
        continue;
      }
      session_->receive(std::string_view(chunk, static_cast<size_t>(n)), buf);
      // Key updates and alerts the session answers go out at once.
      if (auto s = flushTls(deadline); !s) return s.error();
    }
  }

  config::HostPort to_;
  std::string name_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<tls::ClientTls> tls_;
  std::string serverName_;
  Fd fd_;
  std::unique_ptr<tls::Session> session_;  // over fd_, with --tls
};

// The ACK's MSA line; accepted when MSA-1 is AA or CA.
Answer readAck(std::string_view ack, std::string_view message) {
  auto view = hl7::MessageView::parseFieldsOnly(ack);
  if (!view) return {"the answer is not an HL7 ACK (" + view.error().message + ")", false};
  std::string_view msa = view->segment("MSA");
  if (msa.empty()) return {"the answer has no MSA segment: " + std::string(view->msh()), false};
  std::string_view code = view->get("MSA.1");
  Answer a{std::string(msa), code == "AA" || code == "CA"};
  // Which message an ACK answers is MSA-2's to say; a receiver that echoes
  // something else is worth knowing about while building one.
  if (auto m = hl7::MessageView::parseFieldsOnly(message)) {
    std::string_view id = m->get("MSH.10"), echoed = view->get("MSA.2");
    if (echoed != id)
      a.shown += "\n  (MSA-2 is \"" + std::string(echoed) + "\", the message's MSH-10 is \"" +
                 std::string(id) + "\")";
  }
  return a;
}

// ---- HTTP ---------------------------------------------------------------

class HttpClient {
 public:
  // With `tls` (an https:// URL given --ca, --cert): its CA and pair go
  // to libcurl as PEM blobs, verified by the same rule as the engine's.
  HttpClient(std::string url, std::chrono::milliseconds timeout,
             std::shared_ptr<tls::ClientTls> tls = nullptr)
      : url_(std::move(url)),
        timeout_(timeout),
        tls_(std::move(tls)),
        curl_(curl_easy_init(), &curl_easy_cleanup) {}

  Result<Answer> post(const Outgoing& m) {
    if (!curl_) return Error{"libcurl could not start"};
    CURL* c = curl_.get();
    curl_easy_reset(c);
    Received got;
    char errors[CURL_ERROR_SIZE] = {};
    // "Expect:" turns off curl's wait for a 100 Continue before a large
    // body, which receivers that never send one make last a second.
    curl_slist* list = nullptr;
    for (std::string h : {"Content-Type: " + m.contentType, std::string("Expect:")}) {
      curl_slist* more = curl_slist_append(list, h.c_str());
      if (!more) {
        curl_slist_free_all(list);
        return Error{"out of memory"};
      }
      list = more;
    }
    std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> headers(list, &curl_slist_free_all);
    curl_easy_setopt(c, CURLOPT_URL, url_.c_str());
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, m.bytes.data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(m.bytes.size()));
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_.count()));
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errors);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, &HttpClient::onHeader);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &got);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &HttpClient::onBody);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &got);
    // Kept alive until the call returns (curl copies them anyway).
    std::string ca, cert, key;
    if (tls_) {
      ca = tls_->caPem();
      cert = tls_->certPem();
      key = tls_->keyPem();
      curl_easy_setopt(c, CURLOPT_SSLVERSION, static_cast<long>(CURL_SSLVERSION_TLSv1_2));
      auto blob = [&](CURLoption option, std::string& pem) {
        if (pem.empty()) return;
        curl_blob b{pem.data(), pem.size(), CURL_BLOB_COPY};
        curl_easy_setopt(c, option, &b);
      };
      blob(CURLOPT_CAINFO_BLOB, ca);
      blob(CURLOPT_SSLCERT_BLOB, cert);
      blob(CURLOPT_SSLKEY_BLOB, key);
      if (!cert.empty()) curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
      if (!key.empty()) curl_easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM");
    }
    CURLcode rc = curl_easy_perform(c);
    if (rc != CURLE_OK) {
      if (got.tooLarge)
        return Error{url_ + " answered more than " + std::to_string(kMaxAnswerBytes >> 20) +
                     " MB; not read on"};
      return Error{"POST " + url_ + " failed: " + (errors[0] ? errors : curl_easy_strerror(rc))};
    }
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    Answer a{got.statusLine.empty() ? "HTTP " + std::to_string(status) : got.statusLine,
             status >= 200 && status < 300};
    if (!got.body.empty()) {
      // An HL7 answer (respond mode) ends its segments in CR, which a
      // terminal prints over one line.
      std::string body = got.body;
      std::replace(body.begin(), body.end(), '\r', '\n');
      while (!body.empty() && body.back() == '\n') body.pop_back();
      a.shown += "\n" + body;
    }
    return a;
  }

 private:
  struct Received {
    std::string statusLine;
    std::string body;
    bool tooLarge = false;
  };

  static size_t onHeader(char* p, size_t size, size_t n, void* data) {
    auto* got = static_cast<Received*>(data);
    std::string_view line(p, size * n);
    // The last status line wins: a 100 Continue comes before the answer.
    if (line.starts_with("HTTP/")) {
      while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
      got->statusLine = line;
      got->body.clear();
    }
    return size * n;
  }

  static size_t onBody(char* p, size_t size, size_t n, void* data) {
    auto* got = static_cast<Received*>(data);
    if (got->body.size() + size * n > kMaxAnswerBytes) {
      got->tooLarge = true;
      return 0;  // curl stops with a write error
    }
    got->body.append(p, size * n);
    return size * n;
  }

  std::string url_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<tls::ClientTls> tls_;
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl_;
};

// ---- the command --------------------------------------------------------

int usage(const std::string& what) {
  std::fprintf(stderr, "ductus send: %s (see `ductus send --help`)\n", what.c_str());
  return kUsageError;
}

// --ca, --cert and --key as the engine's certificates: entries, loaded and
// checked the same way (a key that is not the certificate's, an expired
// certificate: refused here, before anything is sent), and the client TLS
// the engine's MLLP destinations use: the system's roots plus --ca.
Result<std::shared_ptr<tls::ClientTls>> clientTls(const SendArgs& args) {
  std::vector<tls::CertificateSource> sources;
  tls::ConnectTls connect;
  connect.enabled = true;
  connect.at = "the command line";
  if (!args.ca.empty()) {
    sources.push_back({.name = "ca", .caFile = args.ca, .at = "--ca"});
    connect.ca = "ca";
  }
  if (!args.cert.empty()) {
    sources.push_back(
        {.name = "client", .certFile = args.cert, .keyFile = args.key, .at = "--cert, --key"});
    connect.certificate = "client";
  }
  auto certs = tls::Certificates::load(std::move(sources));
  if (!certs) return certs.error();
  return (*certs)->client(connect);
}

int runSend(const SendArgs& args) {
  std::optional<config::HostPort> to;
  if (!args.to.empty() && !args.http.empty())
    return usage("--to (MLLP) or --http (HTTP): one of them");
  if (!args.contentType.empty() && args.http.empty()) return usage("--content-type is for --http");
  if (!args.to.empty()) {
    to = config::parseHostPort(args.to);
    if (!to) return usage("--to " + args.to + " is not HOST:PORT (e.g. 127.0.0.1:2575)");
  } else if (args.http.empty()) {
    return usage("say where to: --to HOST:PORT (MLLP) or --http URL");
  } else if (!config::isValidHttpUrl(args.http)) {
    return usage("--http " + args.http + " is not an http:// or https:// URL");
  }
  if (!isHttpHeaderValue(args.contentType)) return usage("--content-type may not hold line breaks");
  bool https = !to && asciiLower(args.http).starts_with("https://");
  if (args.tls && !to && !https) return usage("--tls over HTTP: give an https:// URL");
  bool tlsOptions = !args.ca.empty() || !args.cert.empty() || !args.key.empty();
  if ((tlsOptions || !args.serverName.empty()) && !args.tls && !https)
    return usage("--ca, --cert, --key and --server-name are for --tls (or an https:// URL)");
  if (!args.serverName.empty() && !to)
    return usage("--server-name is for --tls over MLLP (over HTTP the URL's host is checked)");
  if (args.cert.empty() != args.key.empty()) return usage("--cert and --key go together");
  auto timeout = config::parseDuration(args.timeout);
  if (!timeout || timeout->count() <= 0)
    return usage("--timeout " + args.timeout + " is not a duration like 10s or 500ms");

  // Every file is read before anything is sent: a typo in the last name
  // should not leave the first files sent and the rest not.
  bool http = !to;
  std::vector<Outgoing> all;
  bool filesOk = true;
  for (auto& file : args.files) {
    auto messages = messagesOf(file, http, args.contentType);
    if (!messages) {
      std::fprintf(stderr, "ductus send: %s\n", messages.error().message.c_str());
      filesOk = false;
      continue;
    }
    for (auto& m : *messages) all.push_back(std::move(m));
  }
  if (!filesOk) {
    std::fprintf(stderr, "ductus send: nothing was sent\n");
    return kUsageError;
  }
  label(all);

  std::shared_ptr<tls::ClientTls> tls;
  if (args.tls || (https && tlsOptions)) {
    auto made = clientTls(args);
    if (!made) {
      std::fprintf(stderr, "ductus send: %s\nductus send: nothing was sent\n",
                   made.error().message.c_str());
      return kUsageError;
    }
    tls = *made;
  }

  std::optional<MllpClient> mllp;
  std::optional<HttpClient> web;
  if (to)
    mllp.emplace(*to, *timeout, tls, args.serverName);
  else
    web.emplace(args.http, *timeout, tls);

  int refused = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    const Outgoing& m = all[i];
    Result<Answer> answer = Error{};
    if (mllp) {
      auto ack = mllp->exchange(m.bytes);
      answer = ack ? Result<Answer>(readAck(*ack, m.bytes)) : Result<Answer>(ack.error());
    } else {
      answer = web->post(m);
    }
    if (!answer) {
      // The connection is in doubt: the rest would most likely fail the
      // same way, or be taken for answers to this one.
      std::fprintf(stderr, "ductus send: %s%s\n", m.label.c_str(), answer.error().message.c_str());
      if (size_t left = all.size() - i - 1; left > 0)
        std::fprintf(stderr, "ductus send: %zu more message%s not sent\n", left,
                     left == 1 ? "" : "s");
      return 1;
    }
    std::printf("%s%s\n", m.label.c_str(), answer->shown.c_str());
    std::fflush(stdout);
    if (!answer->accepted) ++refused;
  }
  return refused > 0 ? 1 : 0;
}

}  // namespace

void addSendCommand(CLI::App& ductus, int& exitCode) {
  auto args = std::make_shared<SendArgs>();
  auto* cmd = ductus.add_subcommand(
      "send", "send HL7 files to an MLLP or HTTP receiver and print the answers");
  cmd->add_option("FILE", args->files, "files of HL7 messages (or, with --http, any file)")
      ->required()
      ->type_name("");
  cmd->add_option("--to", args->to, "send over MLLP to this receiver")->type_name("HOST:PORT");
  cmd->add_option("--http", args->http, "POST to this URL instead of MLLP")->type_name("URL");
  cmd->add_option("--timeout", args->timeout, "how long to wait for each answer")
      ->type_name("DURATION")
      ->capture_default_str();
  cmd->add_option("--content-type", args->contentType,
                  "with --http: the Content-Type of every POST")
      ->type_name("TYPE");
  cmd->add_flag("--tls", args->tls, "with --to: MLLP over TLS (1.2 or 1.3)");
  cmd->add_option("--ca", args->ca,
                  "trust this CA's certificates (PEM) beside the system's roots")
      ->type_name("FILE");
  cmd->add_option("--cert", args->cert, "present this client certificate (PEM, with its chain)")
      ->type_name("FILE");
  cmd->add_option("--key", args->key, "the key of --cert (PEM, not encrypted)")->type_name("FILE");
  cmd->add_option("--server-name", args->serverName,
                  "with --tls: the name checked in the receiver's certificate and sent as SNI "
                  "(default: --to's host)")
      ->type_name("NAME");
  cmd->footer(
      "A file may hold several HL7 messages: each starts at a line beginning MSH,\n"
      "segments may end in CR, LF or CRLF (they are sent ending in CR, as HL7 wants),\n"
      "and MLLP framing already in the file is dropped. The messages go one at a\n"
      "time, each after the answer to the one before.\n"
      "\n"
      "Over MLLP (--to) the ACK's MSA line is printed for each message; over HTTP\n"
      "(--http) each message, or a whole file that is not HL7 (JSON, say), is one\n"
      "POST (Content-Type application/hl7-v2, application/json for .json, else\n"
      "text/plain) and the status line and body are printed. With several messages\n"
      "each line starts with the file's name (and #N when the file holds several).\n"
      "\n"
      "Exits 0 when every message was accepted (AA or CA; a 2xx status), 1 when one\n"
      "was not (AE, AR, CE, CR; another status) or a connection failed or timed\n"
      "out (what was not sent is said), 2 on a usage error, including a file that\n"
      "is missing or holds no MSH (then nothing is sent).\n"
      "\n"
      "TLS, as the engine's MLLP destinations speak it: --tls wraps each MLLP\n"
      "connection in TLS 1.2 or 1.3. The receiver's certificate must chain to the\n"
      "system's roots or to --ca, and name the --to host (or --server-name, which\n"
      "is also sent as SNI; an IP address is checked as one). --cert and --key\n"
      "present a client certificate to a receiver that asks for one. The files are\n"
      "checked as the engine checks certificates: entries (the key must be the\n"
      "certificate's, an expired one is refused; exit 2). A handshake that fails\n"
      "prints why (\"TLS with HOST:PORT failed: certificate verify failed (...)\",\n"
      "or the receiver's alert) and exits 1. Over HTTP an https:// URL is TLS\n"
      "already; --ca, --cert and --key apply to it the same way.\n"
      "\n"
      "  ductus send adt_a01.hl7 --to 127.0.0.1:2575\n"
      "  ductus send result.json --http http://127.0.0.1:8080/lab\n"
      "  ductus send adt_a01.hl7 --to lab-gw:2575 --tls --ca tls/ca.pem\n"
      "  ductus send adt_a01.hl7 --to 10.1.2.3:2575 --tls --ca tls/ca.pem \\\n"
      "      --server-name lab-gw.hospital.org --cert tls/me.pem --key tls/me.key\n"
      "  ductus send result.json --http https://lab-gw:8443/lab --ca tls/ca.pem");
  cmd->callback([args, &exitCode] {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    exitCode = runSend(*args);
  });
}

}  // namespace ductus::supervisor
