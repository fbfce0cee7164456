// RecordSplitter: cuts a file read in chunks into records (the file
// source's `split: records`), without ever holding more than the record in
// progress and one chunk. Each record carries the file offset just after it,
// so a reader that saved that offset with the record's commit can resume
// there and get exactly the records that follow (a crash neither loses nor
// repeats a record of a file whose size and time are unchanged).
//
// * Hl7: a record starts at "MSH" at the start of a line (\r, \n or \r\n
//   endings, or an MLLP start block; the file's start counts as a line
//   start). MLLP framing bytes (0x0B, 0x1C) between records are stripped with
//   the trailing blank lines, which are cut to the last segment's own
//   terminator. A framing byte inside a record (before its last segment
//   ends) stays in its bytes, and the record carries the refusal
//   (hl7::mllp::refuseFramingBytes): it is quarantined at intake, never
//   delivered. Batch envelope segments (FHS, BHS, BTS, FTS)
//   end a record and are skipped, as is anything before the first MSH.
//   A record's end offset is the start of the line that ends it.
// * Csv: RFC 4180 records (a quoted field may hold newlines and ""); the
//   first record of the file is the header and is prepended, with its own
//   line ending, to every record. Records are emitted without their line
//   ending; blank lines are skipped.
// * Lines: one record per line, without its ending; blank lines skipped.
//
// Bytes are never decoded: records are the file's bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ductus::intake {

enum class SplitFormat { Hl7, Csv, Lines };

struct SplitRecord {
  std::string bytes;
  uint64_t endOffset = 0;  // file offset just past this record
  // Why the record must not be delivered (an MLLP framing byte inside an
  // HL7 record); nullopt when it may.
  std::optional<std::string> refusal;
};

class RecordSplitter {
 public:
  // startOffset: the file offset of the first byte that will be fed (a
  // saved endOffset when resuming, else 0). A CSV resumed past 0 needs the
  // header read from the file's start (readCsvHeader); without it records
  // come without a header.
  explicit RecordSplitter(SplitFormat format, uint64_t startOffset = 0,
                          std::optional<std::string> csvHeader = std::nullopt);

  // Appends the records completed by this chunk to out.
  void feed(std::string_view chunk, std::vector<SplitRecord>& out);
  // End of file: appends the last record, if any.
  void finish(std::vector<SplitRecord>& out);

  // The CSV header including its line ending, once read.
  const std::optional<std::string>& csvHeader() const { return header_; }
  // Bytes held for the record in progress (for a caller's size cap).
  size_t buffered() const { return buf_.size(); }
  // HL7: bytes in no message and no batch envelope (text before the first
  // MSH, a file that is not HL7 at all), blank lines and framing aside.
  // They are not stored; the caller says so.
  uint64_t skippedBytes() const { return skipped_; }

  // The header (with its line ending) of a CSV file whose first bytes are
  // fileStart; nullopt when they don't hold a complete first record yet.
  static std::optional<std::string> readCsvHeader(std::string_view fileStart);

 private:
  void scanHl7(bool final, std::vector<SplitRecord>& out);
  void scanDelimited(bool final, std::vector<SplitRecord>& out);
  void emitHl7(size_t end, std::vector<SplitRecord>& out);
  void compact();

  SplitFormat format_;
  std::string buf_;        // unconsumed bytes
  uint64_t bufStart_;      // file offset of buf_[0]
  size_t scan_ = 0;        // buf_ is scanned up to here
  size_t recStart_ = 0;    // where the record in progress starts in buf_
  char prev_ = '\n';       // the byte before buf_[0] ('\n' at the file's start)
  bool inRecord_ = false;  // Hl7: between an MSH and the next boundary
  bool inEnvelope_ = false;  // Hl7: in an FHS/BHS/BTS/FTS segment
  bool bomChecked_ = false;  // Hl7: the file's start was looked at for a BOM
  uint64_t skipped_ = 0;
  bool inQuotes_ = false;  // Csv
  bool wantHeader_ = false;
  std::optional<std::string> header_;
};

}  // namespace ductus::intake
