#include "common/hl7/message.h"

#include <cctype>

#include <charconv>

#include "common/hex.h"
#include "common/hl7/mllp.h"

namespace ductus::hl7 {
namespace {

bool isTerminator(char c) { return c == '\r' || c == '\n'; }

// The idx-th (from 0) piece of `s` split on `sep`; "" when there are fewer.
std::string_view piece(std::string_view s, char sep, int idx) {
  size_t start = 0;
  for (int i = 0; i < idx; ++i) {
    size_t p = s.find(sep, start);
    if (p == std::string_view::npos) return {};
    start = p + 1;
  }
  size_t end = s.find(sep, start);
  return s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
}

bool parseIndex(std::string_view s, int& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && out >= 1;
}

}  // namespace

size_t findMsh(std::string_view bytes) {
  size_t pos = 0;
  while ((pos = bytes.find("MSH", pos)) != std::string_view::npos) {
    if (pos == 0) return 0;
    // A UTF-8 byte order mark (Windows tools write one) is not content.
    if (pos == 3 && bytes.substr(0, 3) == "\xef\xbb\xbf") return pos;
    char before = bytes[pos - 1];
    if (isTerminator(before) || before == mllp::kStartBlock) return pos;
    pos += 1;
  }
  return std::string_view::npos;
}

namespace {

// readDelimiters, naming the field at fault in `field` when it refuses.
Result<Delimiters> delimitersAt(std::string_view bytes, size_t mshAt, const char** field) {
  std::string_view s = bytes.substr(mshAt);
  *field = "MSH.2";
  // "MSH" + MSH-1 (one byte) + MSH-2 (at least four bytes).
  if (s.size() < 8) return Error{"MSH segment too short to declare its delimiters"};
  Delimiters d;
  d.field = s[3];
  d.component = s[4];
  d.repetition = s[5];
  d.escape = s[6];
  d.subcomponent = s[7];
  const char all[] = {d.field, d.component, d.repetition, d.escape, d.subcomponent};
  for (size_t i = 0; i < 5; ++i) {
    if (isTerminator(all[i]) || all[i] == '\0')
      return Error{"MSH-2 is shorter than 4 encoding characters"};
    // MLLP's framing bytes end a segment wherever they stand: never a
    // delimiter the message is read by.
    if (all[i] == mllp::kStartBlock || all[i] == mllp::kEndBlock)
      return Error{"MSH-1/MSH-2 declare an MLLP framing byte as a delimiter"};
    // A letter or digit as the field separator would split "MSH" itself
    // (and every segment name, which the segment lookup reads up to it).
    // The other four only split inside fields, where the sender escapes
    // them: a letter there is legal HL7 (hl7apy writes "MSH!$r?@").
    if (i == 0 && std::isalnum(static_cast<unsigned char>(all[i]))) {
      *field = "MSH.1";
      return Error{std::string("MSH-1 declares the letter or digit '") + all[i] +
                   "' as the field separator"};
    }
    for (size_t j = i + 1; j < 5; ++j)
      if (all[i] == all[j])
        return Error{std::string("MSH-1/MSH-2 declare the delimiter '") + all[i] + "' twice"};
  }
  return d;
}

}  // namespace

Result<Delimiters> readDelimiters(std::string_view bytes, size_t mshAt) {
  const char* field = nullptr;
  return delimitersAt(bytes, mshAt, &field);
}

std::optional<Unreadable> whyUnreadable(std::string_view bytes) {
  size_t msh = findMsh(bytes);
  if (msh == std::string_view::npos) return Unreadable{"no MSH segment", msh, ""};
  const char* field = "";
  auto d = delimitersAt(bytes, msh, &field);
  if (!d) return Unreadable{d.error().message, msh, field};
  return std::nullopt;
}

Result<Path> parsePath(std::string_view path) {
  // Accept "PID.3.1", "PID-3.1" and "PID-3-1": '-' and '.' both separate.
  Path p;
  std::string_view rest = path;
  auto next = [&]() -> std::string_view {
    size_t e = rest.find_first_of(".-");
    std::string_view part = rest.substr(0, e);
    rest = e == std::string_view::npos ? std::string_view{} : rest.substr(e + 1);
    return part;
  };
  auto bad = [&] { return Error{"malformed HL7 path \"" + std::string(path) + "\""}; };

  std::string_view seg = next();
  if (size_t open = seg.find('('); open != std::string_view::npos) {
    if (seg.back() != ')') return bad();
    if (!parseIndex(seg.substr(open + 1, seg.size() - open - 2), p.segmentOccurrence))
      return bad();
    seg = seg.substr(0, open);
  }
  if (seg.size() != 3) return bad();
  p.segment = std::string(seg);

  std::string_view field = next();
  if (size_t open = field.find('['); open != std::string_view::npos) {
    if (field.back() != ']') return bad();
    if (!parseIndex(field.substr(open + 1, field.size() - open - 2), p.repetition))
      return bad();
    field = field.substr(0, open);
  }
  if (!parseIndex(field, p.field)) return bad();
  if (!rest.empty() && !parseIndex(next(), p.component)) return bad();
  if (!rest.empty() && !parseIndex(next(), p.subcomponent)) return bad();
  if (!rest.empty()) return bad();
  return p;
}

Result<MessageView> MessageView::parse(std::string_view bytes) {
  size_t msh = findMsh(bytes);
  if (msh == std::string_view::npos) return Error{"no MSH segment"};
  auto d = readDelimiters(bytes, msh);
  if (!d) return d.error();
  return MessageView(bytes, msh, *d);
}

Result<MessageView> MessageView::parseFieldsOnly(std::string_view bytes) {
  size_t msh = findMsh(bytes);
  if (msh == std::string_view::npos) return Error{"no MSH segment"};
  if (msh + 3 >= bytes.size() || isTerminator(bytes[msh + 3]))
    return Error{"MSH segment declares no field separator"};
  const char field = bytes[msh + 3];
  return MessageView(bytes, msh, Delimiters{field, field, field, field, field});
}

std::string_view MessageView::segmentAt(size_t start) const {
  size_t end = start;
  while (end < bytes_.size() && !isTerminator(bytes_[end]) && bytes_[end] != mllp::kEndBlock) ++end;
  return bytes_.substr(start, end - start);
}

std::string_view MessageView::segment(std::string_view name, int occurrence) const {
  if (name.size() != 3 || occurrence < 1) return {};
  size_t pos = msh_;
  int seen = 0;
  while (pos < bytes_.size()) {
    std::string_view seg = segmentAt(pos);
    if (seg.size() >= 3 && seg.substr(0, 3) == name && (seg.size() == 3 || seg[3] == d_.field)) {
      if (++seen == occurrence) return seg;
    }
    pos += seg.size();
    // Skip the terminator run (\r, \n, \r\n, blank lines).
    while (pos < bytes_.size() && isTerminator(bytes_[pos])) ++pos;
    if (pos < bytes_.size() && bytes_[pos] == mllp::kEndBlock) break;  // end of the frame
  }
  return {};
}

std::string_view MessageView::get(const Path& p) const {
  std::string_view seg = segment(p.segment, p.segmentOccurrence);
  if (seg.empty()) return {};
  std::string_view value;
  if (p.segment == "MSH") {
    if (p.field == 1) return seg.size() > 3 ? seg.substr(3, 1) : std::string_view{};
    // seg split on the field separator: [0]="MSH", [1]=MSH-2, [n-1]=MSH-n.
    value = piece(seg, d_.field, p.field - 1);
    if (p.field == 2) return value;  // the encoding characters, never split
  } else {
    value = piece(seg, d_.field, p.field);
  }
  value = piece(value, d_.repetition, p.repetition - 1);
  if (p.component == 0) return value;
  value = piece(value, d_.component, p.component - 1);
  if (p.subcomponent == 0) return value;
  return piece(value, d_.subcomponent, p.subcomponent - 1);
}

std::string_view MessageView::get(std::string_view path) const {
  auto p = parsePath(path);
  if (!p) return {};
  return get(*p);
}

std::string MessageView::getDecoded(std::string_view path) const {
  return unescape(get(path), d_);
}

std::string unescape(std::string_view v, const Delimiters& d) {
  std::string out;
  out.reserve(v.size());
  size_t i = 0;
  while (i < v.size()) {
    char c = v[i];
    if (c != d.escape) {
      out += c;
      ++i;
      continue;
    }
    size_t close = v.find(d.escape, i + 1);
    if (close == std::string_view::npos) {  // unterminated: keep verbatim
      out.append(v.substr(i));
      break;
    }
    std::string_view seq = v.substr(i + 1, close - i - 1);
    bool known = true;
    if (seq == "F") out += d.field;
    else if (seq == "S") out += d.component;
    else if (seq == "T") out += d.subcomponent;
    else if (seq == "R") out += d.repetition;
    else if (seq == "E") out += d.escape;
    else if (seq == ".br") out += '\r';
    else if (seq.size() >= 3 && seq[0] == 'X' && seq.size() % 2 == 1) {
      std::string bytes;
      for (size_t k = 1; k < seq.size() && known; k += 2) {  // size is odd
        int hi = hexValue(seq[k]), lo = hexValue(seq[k + 1]);
        if (hi < 0 || lo < 0) known = false;
        else bytes += static_cast<char>(hi * 16 + lo);
      }
      if (known) out += bytes;
    } else {
      known = false;
    }
    if (!known) out.append(v.substr(i, close - i + 1));
    i = close + 1;
  }
  return out;
}

std::string escape(std::string_view text, const Delimiters& d) {
  std::string out;
  out.reserve(text.size());
  auto seq = [&](const char* code) {
    out += d.escape;
    out += code;
    out += d.escape;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == d.escape) seq("E");
    else if (c == d.field) seq("F");
    else if (c == d.component) seq("S");
    else if (c == d.subcomponent) seq("T");
    else if (c == d.repetition) seq("R");
    else if (c == '\r' || c == '\n') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      seq(".br");
    } else if (c == mllp::kStartBlock || c == mllp::kEndBlock || c == '\0') {
      // A framing byte would end the segment, or the MLLP frame, early.
      static constexpr char kHex[] = "0123456789ABCDEF";
      char code[4] = {'X', kHex[(static_cast<unsigned char>(c) >> 4) & 0xF],
                      kHex[static_cast<unsigned char>(c) & 0xF], '\0'};
      seq(code);
    } else out += c;
  }
  return out;
}

}  // namespace ductus::hl7
