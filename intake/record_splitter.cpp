#include "intake/record_splitter.h"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "common/hl7/mllp.h"

namespace ductus::intake {
namespace {

using hl7::mllp::kEndBlock;
using hl7::mllp::kStartBlock;

bool isLineStartAfter(char before) {
  return before == '\r' || before == '\n' || before == kStartBlock || before == kEndBlock;
}

// Segments that end an HL7 record: the next message, or a batch envelope.
enum class Boundary { None, Message, Envelope };

Boundary boundaryAt(const std::string& buf, size_t i) {
  if (i + 3 > buf.size()) return Boundary::None;
  const char* p = buf.data() + i;
  if (std::memcmp(p, "MSH", 3) == 0) return Boundary::Message;
  if (std::memcmp(p, "FHS", 3) == 0 || std::memcmp(p, "BHS", 3) == 0 ||
      std::memcmp(p, "BTS", 3) == 0 || std::memcmp(p, "FTS", 3) == 0)
    return Boundary::Envelope;
  return Boundary::None;
}

// Line ends, MLLP framing and a UTF-8 byte order mark at the file's start
// are not content.
bool isFiller(char c, uint64_t fileOffset) {
  static constexpr char kBom[] = "\xef\xbb\xbf";
  if (fileOffset < 3 && c == kBom[fileOffset]) return true;
  return c == '\r' || c == '\n' || c == kStartBlock || c == kEndBlock;
}

}  // namespace

RecordSplitter::RecordSplitter(SplitFormat format, uint64_t startOffset,
                               std::optional<std::string> csvHeader)
    : format_(format), bufStart_(startOffset) {
  if (format_ == SplitFormat::Csv) {
    // At the file's start the first record is the header; resumed, the
    // caller read it (readCsvHeader).
    wantHeader_ = startOffset == 0;
    if (!wantHeader_) header_ = std::move(csvHeader);
  }
}

void RecordSplitter::feed(std::string_view chunk, std::vector<SplitRecord>& out) {
  buf_.append(chunk);
  if (format_ == SplitFormat::Hl7 && !bomChecked_) {
    // A UTF-8 byte order mark right before the first MSH would hide that
    // MSH (it starts no line) and lose the message: dropped here, with the
    // offsets kept true.
    static constexpr std::string_view kBom = "\xef\xbb\xbf";
    if (bufStart_ != 0) {
      bomChecked_ = true;
    } else {
      size_t k = std::min(buf_.size(), kBom.size());
      if (std::string_view(buf_).substr(0, k) != kBom.substr(0, k)) {
        bomChecked_ = true;
      } else if (k == kBom.size()) {
        buf_.erase(0, kBom.size());
        bufStart_ = kBom.size();
        bomChecked_ = true;
      } else {
        return;  // a BOM cut by the chunk: wait for the rest
      }
    }
  }
  if (format_ == SplitFormat::Hl7) scanHl7(false, out);
  else scanDelimited(false, out);
  compact();
}

void RecordSplitter::finish(std::vector<SplitRecord>& out) {
  if (format_ == SplitFormat::Hl7) scanHl7(true, out);
  else scanDelimited(true, out);
  bufStart_ += buf_.size();
  buf_.clear();
  scan_ = recStart_ = 0;
  inRecord_ = false;
}

void RecordSplitter::scanHl7(bool final, std::vector<SplitRecord>& out) {
  size_t i = scan_;
  const size_t n = buf_.size();
  while (i + 3 <= n) {
    char before = i == 0 ? prev_ : buf_[i - 1];
    Boundary b = isLineStartAfter(before) ? boundaryAt(buf_, i) : Boundary::None;
    if (b == Boundary::None) {
      if (!inRecord_ && !inEnvelope_ && !isFiller(buf_[i], bufStart_ + i)) ++skipped_;
      ++i;
      continue;
    }
    if (inRecord_) emitHl7(i, out);
    inRecord_ = b == Boundary::Message;
    inEnvelope_ = b == Boundary::Envelope;
    recStart_ = i;
    i += 3;
  }
  scan_ = i;
  if (final) {
    for (; i < n; ++i)
      if (!inRecord_ && !inEnvelope_ && !isFiller(buf_[i], bufStart_ + i)) ++skipped_;
    scan_ = i;
  }
  if (final && inRecord_) {
    emitHl7(n, out);
    inRecord_ = false;
  }
}

void RecordSplitter::emitHl7(size_t end, std::vector<SplitRecord>& out) {
  SplitRecord r;
  r.endOffset = bufStart_ + end;
  // The record's content ends at its last byte that is neither a line end
  // nor MLLP framing; what follows is the frame's end (0x1C 0x0D), blank
  // lines and the next frame's start (0x0B), not content.
  std::string_view rec(buf_.data() + recStart_, end - recStart_);
  size_t last = rec.find_last_not_of(std::string_view("\r\n\x0b\x1c", 4));
  if (last == std::string_view::npos) return;
  r.bytes.reserve(last + 3);
  r.bytes.append(rec.substr(0, last + 1));
  // Keep the last segment's own terminator, read with the framing taken
  // out ("PID|1\x1c\r" ends in \r), and drop the blank lines after it.
  std::string tail;
  for (char c : rec.substr(last + 1))
    if (c != kStartBlock && c != kEndBlock) tail += c;
  if (!tail.empty()) r.bytes += tail.compare(0, 2, "\r\n") == 0 ? "\r\n" : tail.substr(0, 1);
  // A framing byte left inside the content would end the frame there when
  // the record is sent by MLLP: a second message smuggled in.
  if (auto s = hl7::mllp::refuseFramingBytes(r.bytes, "record"); !s) r.refusal = s.error().message;
  out.push_back(std::move(r));
}

void RecordSplitter::scanDelimited(bool final, std::vector<SplitRecord>& out) {
  const bool csv = format_ == SplitFormat::Csv;
  const size_t n = buf_.size();
  size_t i = scan_;
  auto take = [&](size_t recEnd, size_t next) {
    std::string_view rec(buf_.data() + recStart_, recEnd - recStart_);
    if (!rec.empty()) {
      if (wantHeader_) {
        header_ = std::string(buf_.data() + recStart_, next - recStart_);  // with its ending
        wantHeader_ = false;
      } else {
        SplitRecord r;
        r.endOffset = bufStart_ + next;
        if (header_) {
          r.bytes.reserve(header_->size() + rec.size());
          r.bytes += *header_;
        }
        r.bytes += rec;
        out.push_back(std::move(r));
      }
    }
    recStart_ = next;
  };
  while (i < n) {
    char c = buf_[i];
    if (csv && c == '"') {
      inQuotes_ = !inQuotes_;  // "" inside quotes toggles twice: no change
      ++i;
      continue;
    }
    if (inQuotes_ || (c != '\n' && c != '\r')) {
      ++i;
      continue;
    }
    size_t term = 1;
    if (c == '\r') {
      if (i + 1 < n) term = buf_[i + 1] == '\n' ? 2 : 1;
      else if (!final) break;  // a \r\n may be split across chunks: wait
    }
    take(i, i + term);
    i += term;
  }
  scan_ = i;
  if (final && recStart_ < n) {
    take(n, n);
    scan_ = n;
  }
}

void RecordSplitter::compact() {
  // Everything before the record in progress (or, between HL7 records,
  // everything scanned) is done with.
  size_t drop = format_ == SplitFormat::Hl7 && !inRecord_ ? scan_ : recStart_;
  if (drop == 0) return;
  prev_ = buf_[drop - 1];
  buf_.erase(0, drop);
  bufStart_ += drop;
  scan_ -= drop;
  recStart_ = recStart_ >= drop ? recStart_ - drop : 0;
}

std::optional<std::string> RecordSplitter::readCsvHeader(std::string_view fileStart) {
  RecordSplitter s(SplitFormat::Csv);
  std::vector<SplitRecord> ignored;
  s.feed(fileStart, ignored);
  return s.header_;
}

}  // namespace ductus::intake
