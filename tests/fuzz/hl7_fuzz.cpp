// The HL7 v2 reader and the ACK builder: common/hl7/message.h and
// common/hl7/ack.h. Each input is a message's bytes (MLLP framing bytes
// included, as files and bodies may carry them).
//
// Checked beyond the sanitizers:
// * every lookup stays inside the message's bytes;
// * unescape(escape(text)) gives the text back (line breaks as \r);
// * the ACK built for a message that parses (AA, AE, AR; a text from the
//   input) parses too, with the same delimiters, MSA-1 the code, MSA-2 the
//   message's MSH-10, MSA-3 the text, and MSH-3..6 swapped;
// * the ACK without a message parses, for any text.
#include <stdlib.h>
#include <time.h>

#include <chrono>
#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/hl7/ack.h"
#include "common/hl7/message.h"
#include "common/hl7/mllp.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using namespace ductus;
using fuzz::show;

// Paths an interface's keys and the engine use, and some that stretch the
// path syntax.
const char* const kPaths[] = {
    "MSH.1",    "MSH.2",      "MSH.3",       "MSH-4",      "MSH.7",     "MSH.9",     "MSH.9.1",
    "MSH-9.2",  "MSH.9.3",    "MSH.10",      "MSH.11",     "MSH.12",    "MSH.15",    "MSH.18",
    "MSH.21",   "PID.3",      "PID.3.1",     "PID-3-1",    "PID.3[2].1", "PID.3.1.2", "PID(2).3",
    "PID.5.1",  "PID.5.2",    "PV1.3.1",     "OBX.5",      "OBX(3).5",  "OBR.4.2",   "MSA.1",
    "MSA.2",    "EVN.1",      "ZZZ.1",       "MSH.1000",   "PID.3[100]", "PID(100).1",
};

bool within(std::string_view part, std::string_view whole) {
  if (part.empty()) return true;
  return part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size();
}

// Delimiters none of which is a letter, a digit or '.': the characters
// escape sequences (\F\, \.br\, \X0D\) and the ACK's own words (MSA, AA,
// ACK) are made of. With such a delimiter ("MSH|A~\\&") they split on it, so
// the checks by path below do not apply (readDelimiters accepts any byte;
// senders use punctuation).
bool plainDelimiters(const hl7::Delimiters& d) {
  for (char c : {d.field, d.component, d.repetition, d.escape, d.subcomponent})
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '.') return false;
  return true;
}

// What unescape(escape(t)) should give: each line break (\r\n, \r, \n) is \r.
std::string lineBreaksAsCr(std::string_view t) {
  std::string out;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '\r' && i + 1 < t.size() && t[i + 1] == '\n') ++i;
    out += t[i] == '\n' ? '\r' : t[i];
  }
  return out;
}

void checkEscapeRoundTrip(std::string_view text, const hl7::Delimiters& d) {
  if (!plainDelimiters(d)) {
    (void)hl7::unescape(hl7::escape(text, d), d);
    return;
  }
  std::string escaped = hl7::escape(text, d);
  for (char c : escaped) {
    FUZZ_CHECK(c != d.field && c != d.component && c != d.repetition && c != d.subcomponent &&
                   c != '\r' && c != '\n',
               "escape() left a delimiter or line break in " + show(escaped));
  }
  std::string back = hl7::unescape(escaped, d);
  FUZZ_CHECK(back == lineBreaksAsCr(text),
             "unescape(escape(t)) != t for t = " + show(text) + ": " + show(back));
}

void checkAck(const hl7::MessageView& msg, hl7::AckCode code, std::string_view text) {
  hl7::AckOptions opt;
  opt.controlId = "FUZZACK1";
  opt.now = std::chrono::system_clock::time_point(std::chrono::seconds(1767225600));  // 2026-01-01
  std::string ack = hl7::buildAck(msg, code, text, opt);
  auto view = hl7::MessageView::parse(ack);
  FUZZ_CHECK(view, "the ACK does not parse (" + (view ? std::string() : view.error().message) +
                       "); message MSH: " + show(msg.msh()) + "\nACK: " + show(ack));
  const hl7::Delimiters& a = view->delimiters();
  const hl7::Delimiters& m = msg.delimiters();
  FUZZ_CHECK(a.field == m.field && a.component == m.component && a.repetition == m.repetition &&
                 a.escape == m.escape && a.subcomponent == m.subcomponent,
             "the ACK's delimiters are not the message's: " + show(ack));
  if (!plainDelimiters(m)) return;  // letters as delimiters split the ACK's own words
  bool enhanced = hl7::wantsEnhancedAck(msg);
  FUZZ_CHECK(view->get("MSA.1") == hl7::ackCodeText(code, enhanced), "MSA-1 is " + show(view->get("MSA.1")));
  FUZZ_CHECK(view->get("MSA.2") == msg.get("MSH.10"),
             "MSA-2 `" + show(view->get("MSA.2")) + "` is not MSH-10 `" + show(msg.get("MSH.10")) + "`");
  FUZZ_CHECK(view->get("MSH.10") == "FUZZACK1", "the ACK's MSH-10 is " + show(view->get("MSH.10")));
  FUZZ_CHECK(view->get("MSH.3") == msg.get("MSH.5") && view->get("MSH.4") == msg.get("MSH.6") &&
                 view->get("MSH.5") == msg.get("MSH.3") && view->get("MSH.6") == msg.get("MSH.4"),
             "sender and receiver are not swapped: " + show(ack));
  if (!text.empty())
    FUZZ_CHECK(view->getDecoded("MSA.3") == lineBreaksAsCr(text),
               "MSA-3 decodes to " + show(view->getDecoded("MSA.3")) + ", not the text " + show(text));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // The ACK's MSH-7 carries the local offset: UTC, so every run reads alike.
  setenv("TZ", "UTC", 1);
  tzset();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);

  // Any bytes as a path, too.
  (void)hl7::parsePath(input.substr(0, 64));

  size_t at = hl7::findMsh(input);
  if (at != std::string_view::npos) {
    FUZZ_CHECK(at + 3 <= input.size() && input.substr(at, 3) == "MSH", "findMsh points past MSH");
    (void)hl7::readDelimiters(input, at);
  }

  // The text an ACK carries (MSA-3): the last bytes of the input.
  std::string tail(input.substr(input.size() > 40 ? input.size() - 40 : 0));
  std::string_view text = tail;

  for (auto code : {hl7::AckCode::Accept, hl7::AckCode::Error, hl7::AckCode::Reject}) {
    hl7::AckOptions opt;
    opt.controlId = "FUZZACK0";
    std::string bare = hl7::buildAckWithoutMessage(code, text, opt);
    auto view = hl7::MessageView::parse(bare);
    FUZZ_CHECK(view, "the ACK without a message does not parse: " + show(bare));
    FUZZ_CHECK(view->get("MSA.1") == hl7::ackCodeText(code, false), "MSA-1 is " + show(view->get("MSA.1")));
    if (!text.empty())
      FUZZ_CHECK(view->getDecoded("MSA.3") == lineBreaksAsCr(text),
                 "MSA-3 decodes to " + show(view->getDecoded("MSA.3")) + ", not " + show(text));
  }
  checkEscapeRoundTrip(text, hl7::Delimiters{});

  auto fieldsOnly = hl7::MessageView::parseFieldsOnly(input);
  if (fieldsOnly) {
    for (const char* p : kPaths) FUZZ_CHECK(within(fieldsOnly->get(p), input), p);
    (void)fieldsOnly->getDecoded("MSA.3");
  }

  auto msg = hl7::MessageView::parse(input);
  if (!msg) return 0;
  FUZZ_CHECK(within(msg->msh(), input) && msg->msh().substr(0, 3) == "MSH", "msh() is not the MSH");
  for (const char* p : kPaths) {
    std::string_view v = msg->get(p);
    FUZZ_CHECK(within(v, input), std::string("get(") + p + ") points outside the message");
    (void)msg->getDecoded(p);
  }
  for (int n = 1; n <= 3; ++n) {
    FUZZ_CHECK(within(msg->segment("PID", n), input), "segment(PID) outside the message");
    FUZZ_CHECK(within(msg->segment("OBX", n), input), "segment(OBX) outside the message");
  }
  // Unusual numbers through the Path API directly.
  for (int field : {0, 1, 2, 3, 10, 255}) {
    hl7::Path p;
    p.segment = "MSH";
    p.field = field;
    p.component = field % 3;
    p.subcomponent = field % 2;
    FUZZ_CHECK(within(msg->get(p), input), "get(MSH." + std::to_string(field) + ")");
  }
  // Every field of the MSH decoded, as the SDK's reads would.
  std::string_view msh10 = msg->get("MSH.10");
  checkEscapeRoundTrip(msh10, msg->delimiters());
  checkEscapeRoundTrip(text, msg->delimiters());
  (void)hl7::unescape(input.substr(0, 4096), msg->delimiters());

  for (auto code : {hl7::AckCode::Accept, hl7::AckCode::Error, hl7::AckCode::Reject}) {
    checkAck(*msg, code, code == hl7::AckCode::Accept ? std::string_view() : text);
  }
  return 0;
}
