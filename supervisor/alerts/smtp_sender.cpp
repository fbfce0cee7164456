#include "supervisor/alerts/smtp_sender.h"

#include <openssl/evp.h>
#include <openssl/rand.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>

#include "common/net/curl_easy.h"
#include "common/net/curl_multi_uv.h"
#include "common/net/loop_post.h"
#include "common/text.h"

namespace ductus::supervisor::alerts {
namespace {

// The longest line RFC 5321 lets a message carry, without its CRLF.
constexpr size_t kMaxLine = 998;
// Raw bytes per encoded-word: 45 bytes are 60 base64 characters, and
// "=?UTF-8?B?" + 60 + "?=" is 72, under RFC 2047's 75.
constexpr size_t kWordBytes = 45;
// How much of a header value is kept (an alert's subject is one line).
constexpr size_t kMaxHeaderBytes = 2000;
// How much of the server's last reply goes into an error.
constexpr size_t kReplyExcerpt = 200;

bool continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// The longest prefix of at most `n` bytes that does not split a UTF-8
// character.
size_t charBoundary(std::string_view s, size_t n) {
  if (n >= s.size()) return s.size();
  while (n > 0 && continuation(static_cast<unsigned char>(s[n]))) --n;
  return n;
}

std::string base64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(bytes.data()),
                          static_cast<int>(bytes.size()));
  out.resize(n < 0 ? 0 : static_cast<size_t>(n));
  return out;
}

std::string printable(std::string_view bytes) {
  std::string out;
  for (unsigned char c : bytes) out += (c < 0x20 || c == 0x7f) ? ' ' : static_cast<char>(c);
  return out;
}

// "Fri, 04 Dec 2026 23:01:00 +0000" (RFC 5322), written without the
// locale's names.
std::string rfc5322Date(std::chrono::system_clock::time_point t) {
  static constexpr const char* kDays[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s, %02d %s %04d %02d:%02d:%02d +0000", kDays[tm.tm_wday % 7],
                tm.tm_mday, kMonths[tm.tm_mon % 12], tm.tm_year + 1900, tm.tm_hour, tm.tm_min,
                tm.tm_sec);
  return buf;
}

// What EHLO names us: this machine's name when it is a plain host name.
std::string heloDomain() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  std::string_view n(name);
  bool plain = !n.empty() && std::all_of(n.begin(), n.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '.';
  });
  return plain ? std::string(n) : "localhost";
}

// A host name or an IP address as the configuration gave it, nothing that
// would change the URL's meaning.
bool plainHost(std::string_view host) {
  return !host.empty() && std::all_of(host.begin(), host.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '.' || c == ':' || c == '_';
  });
}

std::string messageId(uint64_t n, std::string_view from) {
  unsigned char random[8] = {};
  RAND_bytes(random, sizeof random);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id = std::to_string(
      std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::system_clock::now().time_since_epoch()).count());
  id += "." + std::to_string(n) + ".";
  for (unsigned char b : random) {
    id += kHex[b >> 4];
    id += kHex[b & 15];
  }
  size_t at = from.rfind('@');
  std::string domain = at == std::string_view::npos ? "" : std::string(from.substr(at + 1));
  if (!plainHost(domain)) domain = "ductus.invalid";
  return "<" + id + "@" + domain + ">";
}

}  // namespace

Status checkAddress(std::string_view address) {
  if (address.empty()) return Error{"an empty e-mail address", ErrorKind::Invalid};
  for (unsigned char c : address) {
    if (c <= 0x20 || c == 0x7f || c == '<' || c == '>' || c == ',')
      return Error{"\"" + printable(address) +
                       "\" is not an e-mail address (no spaces, line breaks, '<', '>' or ',')",
                   ErrorKind::Invalid};
  }
  return {};
}

std::string headerValue(std::string_view raw) {
  std::string text = asText(raw);
  text.resize(charBoundary(text, kMaxHeaderBytes));
  // A line break would end the header and start another one (Bcc: ...).
  for (char& c : text) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) c = ' ';
  }
  bool ascii = std::none_of(text.begin(), text.end(), [](char c) { return c & 0x80; });
  if (ascii && text.size() <= 200 && text.find("=?") == std::string::npos) return text;
  std::string out;
  std::string_view rest(text);
  while (!rest.empty()) {
    size_t n = charBoundary(rest, kWordBytes);
    if (n == 0) n = std::min(rest.size(), kWordBytes);  // not UTF-8 after all: never loop
    if (!out.empty()) out += "\r\n ";
    out += "=?UTF-8?B?" + base64(rest.substr(0, n)) + "?=";
    rest.remove_prefix(n);
  }
  return out;
}

std::string buildMessage(const Email& email, std::chrono::system_clock::time_point date,
                         std::string_view id) {
  std::string to;
  for (const auto& a : email.to) to += (to.empty() ? "" : ", ") + a;
  std::string m;
  m += "Date: " + rfc5322Date(date) + "\r\n";
  m += "From: " + email.from + "\r\n";
  m += "To: " + to + "\r\n";
  m += "Subject: " + headerValue(email.subject) + "\r\n";
  m += "Message-ID: " + std::string(id) + "\r\n";
  m += "MIME-Version: 1.0\r\n";
  m += "Content-Type: text/plain; charset=utf-8\r\n";
  m += "Content-Transfer-Encoding: 8bit\r\n";
  m += "\r\n";
  std::string body = asText(email.text);
  if (body.size() > kMaxTextBytes) {
    body.resize(charBoundary(body, kMaxTextBytes));
    body += "\n[cut at " + std::to_string(kMaxTextBytes) + " bytes]\n";
  }
  size_t line = 0;  // bytes on the current line
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c == '\r' || c == '\n') {
      if (c == '\r' && i + 1 < body.size() && body[i + 1] == '\n') ++i;
      m += "\r\n";
      line = 0;
      continue;
    }
    if (c == '\0') continue;
    // A long line is broken before a character's first byte.
    if (line >= kMaxLine && !continuation(static_cast<unsigned char>(c))) {
      m += "\r\n";
      line = 0;
    }
    m += c;
    ++line;
  }
  if (m.size() < 2 || m.compare(m.size() - 2, 2, "\r\n") != 0) m += "\r\n";
  return m;
}

struct SmtpSender::Transfer {
  net::CurlEasy easy;
  net::CurlSlist recipients;
  std::string from;     // "<a@b>", read by libcurl in place
  std::string message;  // read by onRead
  size_t offset = 0;
  std::string lastRefusal;  // the server's last 4xx or 5xx reply line, for errors
  char error[CURL_ERROR_SIZE] = {};
  std::function<void(Status)> done;

  static size_t onRead(char* buffer, size_t size, size_t n, void* userp) {
    auto* t = static_cast<Transfer*>(userp);
    size_t len = std::min(size * n, t->message.size() - t->offset);
    std::copy_n(t->message.data() + t->offset, len, buffer);
    t->offset += len;
    return len;
  }
  // The server's replies, as libcurl's debug output shows them (lines it
  // reads: what it writes, AUTH included, is never looked at).
  static int onDebug(CURL*, curl_infotype type, char* data, size_t size, void* userp) {
    if (type != CURLINFO_HEADER_IN) return 0;
    auto* t = static_cast<Transfer*>(userp);
    std::string_view text(data, size);
    while (!text.empty() && (text.back() == '\r' || text.back() == '\n')) text.remove_suffix(1);
    size_t nl = text.rfind('\n');
    if (nl != std::string_view::npos) text.remove_prefix(nl + 1);
    // A refusal (4xx, 5xx), not the QUIT's "221 Bye" that follows it.
    if (!text.empty() && (text[0] == '4' || text[0] == '5'))
      t->lastRefusal = printable(text.substr(0, kReplyExcerpt));
    return 0;
  }
  static size_t onHeader(char*, size_t size, size_t n, void*) { return size * n; }
  static size_t onBody(char*, size_t size, size_t n, void*) { return size * n; }
};

SmtpSender::SmtpSender(net::CurlMulti& multi, monitor::SmtpServer server,
                       std::shared_ptr<const net::CurlTls> tls, std::chrono::milliseconds timeout)
    : multi_(multi), server_(std::move(server)), tls_(std::move(tls)), timeout_(timeout) {
  std::string host = server_.host.find(':') != std::string::npos ? "[" + server_.host + "]"
                                                                  : server_.host;
  std::string hostPort = host + ":" + std::to_string(server_.port);
  label_ = "smtp " + printable(hostPort);
  // The URL's path is the name EHLO gives.
  url_ = (server_.tls == monitor::SmtpServer::Tls::Implicit ? "smtps://" : "smtp://") + hostPort +
         "/" + heloDomain();
}

SmtpSender::~SmtpSender() {
  *alive_ = false;
  for (auto& [easy, t] : transfers_) {
    // libcurl says QUIT to a connection it drops and waits for the answer
    // inside curl_multi_remove_handle, blocking the loop for as long as the
    // transfer's timeout has left: with none left, it does not wait.
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, 1L);
    multi_.cancel(easy);
  }
}

void SmtpSender::answerSoon(std::function<void(Status)> done, Error error) {
  error.message = label_ + ": " + error.message;
  net::postToLoop(multi_.loop(), [alive = alive_, done = std::move(done),
                                  e = std::move(error)]() mutable {
    if (*alive) done(std::move(e));
  });
}

void SmtpSender::send(Email email, std::function<void(Status)> done) {
  using Tls = monitor::SmtpServer::Tls;
  if (email.from.empty()) email.from = server_.from;
  if (!plainHost(server_.host))
    return answerSoon(std::move(done), Error{"not a host name", ErrorKind::Invalid});
  if (email.to.empty())
    return answerSoon(std::move(done), Error{"no recipients", ErrorKind::Invalid});
  // Checked again here, whatever the configuration's checks said: an
  // address is written into MAIL FROM / RCPT TO and the headers as is.
  if (auto ok = checkAddress(email.from); !ok) return answerSoon(std::move(done), ok.error());
  for (const auto& a : email.to) {
    if (auto ok = checkAddress(a); !ok) return answerSoon(std::move(done), ok.error());
  }
  // A password never goes in the clear: with one, "starttls" means the
  // server must offer STARTTLS (a man in the middle could hide the offer).
  // Only "off" sends it plain (loopback test servers).
  bool withPassword = !server_.user.empty();
  long useSsl = CURLUSESSL_NONE;
  if (server_.tls == Tls::StartTlsRequired ||
      (server_.tls == Tls::StartTlsIfOffered && withPassword))
    useSsl = CURLUSESSL_ALL;
  else if (server_.tls == Tls::StartTlsIfOffered)
    useSsl = CURLUSESSL_TRY;

  auto t = std::make_unique<Transfer>();
  t->done = std::move(done);
  t->from = "<" + email.from + ">";
  curl_slist* list = nullptr;
  for (const auto& a : email.to) list = curl_slist_append(list, ("<" + a + ">").c_str());
  t->recipients.reset(list);
  t->message = buildMessage(email, std::chrono::system_clock::now(), messageId(++sent_, email.from));

  t->easy.reset(curl_easy_init());
  CURL* e = t->easy.get();
  // The options every request of ours carries (close-on-exec sockets, no
  // signals, TLS 1.2 at least, the timeout, the error buffer), then SMTP's
  // own protocols in place of http(s).
  net::setRequestOptions(e, timeout_, nullptr, t->error, &Transfer::onBody, &Transfer::onHeader,
                         t.get());
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "smtp,smtps");
  curl_easy_setopt(e, CURLOPT_URL, url_.c_str());
  curl_easy_setopt(e, CURLOPT_USE_SSL, useSsl);
  // A connection per e-mail, closed (QUIT) as the transfer ends, while the
  // server that just took the message answers: one left in the multi's
  // cache would be closed at the engine's stop with a blocking QUIT.
  curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
  curl_easy_setopt(e, CURLOPT_MAIL_FROM, t->from.c_str());
  curl_easy_setopt(e, CURLOPT_MAIL_RCPT, t->recipients.get());
  curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
  curl_easy_setopt(e, CURLOPT_READFUNCTION, &Transfer::onRead);
  curl_easy_setopt(e, CURLOPT_READDATA, t.get());
  curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(t->message.size()));
  if (withPassword) {
    curl_easy_setopt(e, CURLOPT_USERNAME, server_.user.c_str());
    curl_easy_setopt(e, CURLOPT_PASSWORD, server_.password.c_str());
  }
  curl_easy_setopt(e, CURLOPT_DEBUGFUNCTION, &Transfer::onDebug);
  curl_easy_setopt(e, CURLOPT_DEBUGDATA, t.get());
  curl_easy_setopt(e, CURLOPT_VERBOSE, 1L);  // to onDebug alone, never to stderr
  if (tls_) tls_->apply(e);
  transfers_.emplace(e, std::move(t));
  multi_.add(e, [this, e](CURLcode code) { finish(e, code); });
}

void SmtpSender::finish(CURL* easy, CURLcode code) {
  auto it = transfers_.find(easy);
  if (it == transfers_.end()) return;
  std::unique_ptr<Transfer> t = std::move(it->second);
  transfers_.erase(it);
  Status out;
  if (code == CURLE_OPERATION_TIMEDOUT) {
    auto ms = timeout_.count();
    out = Error{label_ + ": no answer within " +
                    (ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms"),
                ErrorKind::Unavailable};
  } else if (code != CURLE_OK) {
    std::string cause = t->error[0] ? t->error : curl_easy_strerror(code);
    // The server's own words, when its refusal was the cause.
    if (!t->lastRefusal.empty()) cause += " (" + t->lastRefusal + ")";
    out = Error{label_ + ": " + cause, ErrorKind::Unavailable};
  }
  auto done = std::move(t->done);
  t.reset();
  done(std::move(out));  // last: it may destroy this sender
}

}  // namespace ductus::supervisor::alerts
