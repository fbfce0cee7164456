// HL7 v2 reading without decoding: the message stays the bytes it arrived
// as (ISO-8859-1, UTF-8, anything: payloads are bytes), and a field is
// a view into those bytes. Only MSH-1/MSH-2 are interpreted, so a message
// with custom delimiters ("MSH#@!*&") reads like any other. HL7 escapes
// (\F\, \S\, ...) are decoded only when asked (unescape()).
//
// Segments end in \r as the standard says; \n and \r\n are accepted too,
// because files and hand-made test messages use them.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"

namespace ductus::hl7 {

struct Delimiters {
  char field = '|';
  char component = '^';
  char repetition = '~';
  char escape = '\\';
  char subcomponent = '&';
};

// Where the first "MSH" that starts a segment is (offset 0, or right after
// \r, \n or an MLLP start byte 0x0B); npos when there is none.
size_t findMsh(std::string_view bytes);

// The delimiters MSH-1 and MSH-2 declare, for the MSH at mshAt. Refused when
// MSH-2 is shorter than 4 characters (components, repetitions, escape,
// subcomponents), when two delimiters are the same byte, a delimiter is a
// segment terminator or an MLLP framing byte, or the field separator is a
// letter or digit (it would split the segment names). Letters and digits
// are fine as the other four.
Result<Delimiters> readDelimiters(std::string_view bytes, size_t mshAt);

// Why parse() refuses these bytes, and where, for a person to fix them (the
// API's edit and dry run): the same checks, with the offset of the MSH
// (npos when there is none) and the field at fault ("MSH.1" the field
// separator, "MSH.2" the encoding characters; "" when no field is). nullopt
// when parse() reads the bytes.
struct Unreadable {
  std::string text;
  size_t mshAt = std::string_view::npos;
  std::string field;
};
std::optional<Unreadable> whyUnreadable(std::string_view bytes);

// A path into a message: "MSH.10", "MSH-10", "PID.3.1", "PID.3.1.2",
// "PID(2).3" (the second PID), "PID.3[2].1" (the second repetition of PID-3).
// Segment and repetition indexes count from 1; a missing component is "".
struct Path {
  std::string segment;
  int segmentOccurrence = 1;
  int field = 0;
  int repetition = 1;
  int component = 0;     // 0 = the whole field (repetition)
  int subcomponent = 0;  // 0 = the whole component
};
Result<Path> parsePath(std::string_view path);

// A view over one message's bytes. It owns nothing: the bytes must outlive
// it. Lookups scan the bytes each time; they are for a handful of fields
// (MSH-9, MSH-10, the ordering and dedupe keys), not for full parsing.
class MessageView {
 public:
  // Finds MSH and reads its delimiters. Bytes before MSH (e.g. a stray
  // BOM or framing byte) are skipped.
  static Result<MessageView> parse(std::string_view bytes);
  // A view over a temporary string would dangle at once.
  static Result<MessageView> parse(std::string&& bytes) = delete;
  static Result<MessageView> parse(const char* bytes) { return parse(std::string_view(bytes)); }

  // Reads only MSH-1, for another system's answer (an ACK) read field by
  // field: a sender must not stop at an MSH-2 that parse() refuses when the
  // MSA it needs is plain to read. Every other delimiter is taken to be
  // MSH-1 too, which no field contains, so nothing inside a field is split
  // or decoded: a field (MSA-3's text with a stray '~', say) comes back as
  // sent. For reading only; an ACK built from such a view would be garbled.
  static Result<MessageView> parseFieldsOnly(std::string_view bytes);
  static Result<MessageView> parseFieldsOnly(std::string&& bytes) = delete;
  static Result<MessageView> parseFieldsOnly(const char* bytes) {
    return parseFieldsOnly(std::string_view(bytes));
  }

  const Delimiters& delimiters() const { return d_; }
  std::string_view bytes() const { return bytes_; }
  // The MSH segment, without its terminator.
  std::string_view msh() const { return segmentAt(msh_); }

  // The n-th (from 1) segment named `name`, without terminator; "" if none.
  std::string_view segment(std::string_view name, int occurrence = 1) const;

  // MSH fields count as the standard numbers them: MSH-1 is the field
  // separator itself and MSH-2 the encoding characters, so field(…, 2) is
  // never split into components.
  std::string_view get(const Path& p) const;
  // Convenience: get(parsePath(path)); "" when the path is malformed.
  std::string_view get(std::string_view path) const;

  // The same lookup with HL7 escapes decoded (unescape()).
  std::string getDecoded(std::string_view path) const;

 private:
  MessageView(std::string_view bytes, size_t msh, Delimiters d)
      : bytes_(bytes), msh_(msh), d_(d) {}
  std::string_view segmentAt(size_t start) const;

  std::string_view bytes_;
  size_t msh_ = 0;
  Delimiters d_;
};

// Decodes HL7 escape sequences: \F\ \S\ \T\ \R\ \E\ to the delimiters the
// message declared, \Xhh…\ to those bytes, \.br\ to \r (a line break inside
// text). Others (\H\, \N\, \Cxxyy\, \Mxxyyzz\, \Zxx\) are formatting or
// character-set switches that only the SDK can interpret: they are kept
// verbatim. A lone escape character with no closing one is kept as is.
std::string unescape(std::string_view value, const Delimiters& d);

// The reverse, for text we put into a message (e.g. an ACK's MSA-3): each
// delimiter byte becomes its escape sequence, \r and \n become \.br\.
std::string escape(std::string_view text, const Delimiters& d);

}  // namespace ductus::hl7
