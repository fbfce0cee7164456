// SmtpSender: one alert e-mail at a time per call, any number at once,
// through libcurl's SMTP on the supervisor's loop (net::CurlMulti), so a
// slow or silent mail server never blocks the loop. The message is built
// here (buildMessage): its header values come from hostile text (an
// interface's name, a receiver's error), so line breaks are removed and
// anything not ASCII is written as RFC 2047 encoded-words; addresses that
// could smuggle an SMTP command or a second recipient are refused at send
// time, whatever the configuration's checks said.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <curl/curl.h>

#include "common/monitor/settings.h"
#include "common/result.h"

namespace ductus::net {
class CurlMulti;
class CurlTls;
}  // namespace ductus::net

namespace ductus::supervisor::alerts {

struct Email {
  std::string from;  // empty: the server's from:
  std::vector<std::string> to;
  std::string subject;
  std::string text;  // UTF-8 expected; any line ends
};

// An address as MAIL FROM / RCPT TO carry it: not empty, and none of CR,
// LF, '<', '>', ',', spaces or other control characters (each would end
// the command or add to it).
Status checkAddress(std::string_view address);

// A header's value as it goes on the wire: line breaks and other control
// characters become spaces; text that is not plain ASCII (or is long, or
// looks like an encoded-word itself) becomes UTF-8 "B" encoded-words of at
// most 75 characters, folded, never splitting a character.
std::string headerValue(std::string_view text);

// The whole message, CRLF line ends: Date, From, To, Subject, Message-ID,
// MIME-Version, Content-Type text/plain utf-8, 8bit, then the body with
// every line end made CRLF, NULs dropped and lines over 998 octets broken;
// a text over kMaxTextBytes is cut there, saying so. Dot-stuffing is
// libcurl's (it doubles a leading '.' on upload).
constexpr size_t kMaxTextBytes = 1u << 20;
std::string buildMessage(const Email& email, std::chrono::system_clock::time_point date,
                         std::string_view messageId);

class SmtpSender {
 public:
  static constexpr std::chrono::milliseconds kDefaultTimeout{30000};

  // `tls`: the server's ca: (null: the system's roots). Implicit TLS and
  // STARTTLS verify the server's certificate and name always.
  SmtpSender(net::CurlMulti& multi, monitor::SmtpServer server,
             std::shared_ptr<const net::CurlTls> tls = nullptr,
             std::chrono::milliseconds timeout = kDefaultTimeout);
  // Abandons transfers still running: their callbacks are not called.
  ~SmtpSender();
  SmtpSender(const SmtpSender&) = delete;
  SmtpSender& operator=(const SmtpSender&) = delete;

  // `done` runs once, on the loop, never inside send(). An error names the
  // server and the cause: "smtp mail.x:587: RCPT failed: 550 (550 5.1.1 ...)".
  void send(Email email, std::function<void(Status)> done);
  size_t running() const { return transfers_.size(); }
  // "smtp host:port", the start of every error.
  const std::string& label() const { return label_; }

 private:
  struct Transfer;
  void finish(CURL* easy, CURLcode code);
  void answerSoon(std::function<void(Status)> done, Error error);

  net::CurlMulti& multi_;
  monitor::SmtpServer server_;
  std::shared_ptr<const net::CurlTls> tls_;
  std::chrono::milliseconds timeout_;
  std::string url_;
  std::string label_;
  uint64_t sent_ = 0;  // for Message-IDs
  std::map<CURL*, std::unique_ptr<Transfer>> transfers_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ductus::supervisor::alerts
