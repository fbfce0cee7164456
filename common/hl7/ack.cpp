#include "common/hl7/ack.h"

#include <atomic>
#include <cctype>
#include <cstdio>
#include <ctime>

#include "common/hl7/mllp.h"

namespace ductus::hl7 {

std::string_view ackCodeText(AckCode code, bool enhanced) {
  switch (code) {
    case AckCode::Accept: return enhanced ? "CA" : "AA";
    case AckCode::Error: return enhanced ? "CE" : "AE";
    case AckCode::Reject: return enhanced ? "CR" : "AR";
  }
  return "AE";
}

bool wantsEnhancedAck(const MessageView& msg) {
  Path p;
  p.segment = "MSH";
  p.field = 15;
  return !msg.get(p).empty();
}

std::string newControlId() {
  static std::atomic<uint32_t> counter{0};
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                std::chrono::system_clock::now().time_since_epoch())
                .count();
  char buf[32];
  // 13 hex digits of microseconds last until the year 2255; 4 of counter.
  std::snprintf(buf, sizeof buf, "D%013llx%04x", static_cast<unsigned long long>(us),
                counter.fetch_add(1, std::memory_order_relaxed) & 0xffffu);
  return buf;
}

std::string formatTimestamp(std::chrono::system_clock::time_point t) {
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  localtime_r(&secs, &tm);
  char buf[32];
  // Real offsets are within +-14 h; the clamp keeps the field 4 digits.
  int off = static_cast<int>(tm.tm_gmtoff / 60);
  char sign = off < 0 ? '-' : '+';
  off = off < 0 ? -off : off;
  off = off > 99 * 60 ? 99 * 60 : off;
  std::snprintf(buf, sizeof buf, "%04d%02d%02d%02d%02d%02d%c%02d%02d",
                (tm.tm_year + 1900) % 10000, (tm.tm_mon + 1) % 100, tm.tm_mday % 100,
                tm.tm_hour % 100, tm.tm_min % 100, tm.tm_sec % 100, sign, off / 60, off % 60);
  return buf;
}

namespace {

Path mshField(int n, int component = 0) {
  Path p;
  p.segment = "MSH";
  p.field = n;
  p.component = component;
  return p;
}

}  // namespace

std::string buildAck(const MessageView& msg, AckCode code, std::string_view text,
                     const AckOptions& opt) {
  const Delimiters& d = msg.delimiters();
  const char f = d.field;
  std::string id = opt.controlId.empty() ? newControlId() : opt.controlId;
  std::string_view processing = msg.get(mshField(11));
  std::string_view trigger = msg.get(mshField(9, 2));

  std::string out;
  out.reserve(256 + text.size());
  out += "MSH";
  out += f;
  out += msg.get(mshField(2));  // the sender's encoding characters, verbatim
  for (int n : {5, 6, 3, 4}) {
    out += f;
    out += msg.get(mshField(n));
  }
  out += f;
  // "+0100" or "-0500": the sender may have declared '+' or '-' a delimiter.
  out += escape(formatTimestamp(opt.now), d);
  out += f;  // MSH-8 security
  out += f;
  out += "ACK";
  out += d.component;
  out += trigger;
  out += d.component;
  out += "ACK";
  out += f;
  out += id;
  out += f;
  out += processing.empty() ? std::string_view("P") : processing;
  out += f;
  out += msg.get(mshField(12));
  out += '\r';
  out += "MSA";
  out += f;
  out += ackCodeText(code, wantsEnhancedAck(msg));
  out += f;
  out += msg.get(mshField(10));
  if (!text.empty()) {
    out += f;
    out += escape(text, d);
  }
  out += '\r';
  return out;
}

std::string buildAckWithoutMessage(AckCode code, std::string_view text, const AckOptions& opt,
                                   std::string_view controlId) {
  std::string id = opt.controlId.empty() ? newControlId() : opt.controlId;
  std::string out = "MSH|^~\\&|||||" + formatTimestamp(opt.now) + "||ACK|" + id + "|P|2.5\r";
  out += "MSA|";
  out += ackCodeText(code, false);
  out += "|";
  out += escape(controlId, Delimiters{});
  if (!text.empty()) {
    out += "|";
    out += escape(text, Delimiters{});
  }
  out += '\r';
  return out;
}

std::string buildAckFor(std::string_view bytes, AckCode code, std::string_view text,
                        const AckOptions& opt) {
  if (auto m = MessageView::parse(bytes)) return buildAck(*m, code, text, opt);
  std::string_view controlId;
  if (auto f = MessageView::parseFieldsOnly(bytes)) {
    char sep = f->delimiters().field;
    // A letter or digit would have split "MSH" itself; a framing byte or
    // NUL is no separator anyone meant.
    if (!std::isalnum(static_cast<unsigned char>(sep)) && sep != '\0' &&
        sep != mllp::kStartBlock && sep != mllp::kEndBlock)
      controlId = f->get("MSH.10");
  }
  return buildAckWithoutMessage(code, text, opt, controlId);
}

}  // namespace ductus::hl7
