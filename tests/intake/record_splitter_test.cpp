#include "intake/record_splitter.h"

#include <gtest/gtest.h>

namespace ductus::intake {
namespace {

// Splits `file` fed in chunks of `chunk` bytes, starting at `offset`.
std::vector<SplitRecord> split(SplitFormat f, std::string_view file, size_t chunk,
                               uint64_t offset = 0,
                               std::optional<std::string> header = std::nullopt) {
  RecordSplitter s(f, offset, std::move(header));
  std::vector<SplitRecord> out;
  std::string_view rest = file.substr(offset);
  for (size_t i = 0; i < rest.size(); i += chunk) s.feed(rest.substr(i, chunk), out);
  s.finish(out);
  return out;
}

std::vector<std::string> bytesOf(const std::vector<SplitRecord>& rs) {
  std::vector<std::string> v;
  for (const auto& r : rs) v.push_back(r.bytes);
  return v;
}

const std::string kHl7File =
    "\xef\xbb\xbfjunk before\r\n"
    "MSH|^~\\&|A|B|C|D|||ADT^A01|M1|P|2.5\rPID|1||one\r\r\n"
    "MSH|^~\\&|A|B|C|D|||ADT^A01|M2|P|2.5\nPID|1||two MSH inside a field\n\n"
    "\x0bMSH|^~\\&|A|B|C|D|||ADT^A01|M3|P|2.5\r\nPID|1||three\r\n\x1c\r"
    "MSH|^~\\&|A|B|C|D|||ADT^A01|M4|P|2.5\rPID|1||four";

const std::vector<std::string> kHl7Records = {
    "MSH|^~\\&|A|B|C|D|||ADT^A01|M1|P|2.5\rPID|1||one\r",
    "MSH|^~\\&|A|B|C|D|||ADT^A01|M2|P|2.5\nPID|1||two MSH inside a field\n",
    "MSH|^~\\&|A|B|C|D|||ADT^A01|M3|P|2.5\r\nPID|1||three\r\n",
    "MSH|^~\\&|A|B|C|D|||ADT^A01|M4|P|2.5\rPID|1||four",
};

TEST(RecordSplitter, Hl7SplitsPerMshWithMixedLineEndingsInAnyChunking) {
  for (size_t chunk : {size_t{1}, size_t{2}, size_t{3}, size_t{7}, size_t{64}, size_t{1} << 20}) {
    auto rs = split(SplitFormat::Hl7, kHl7File, chunk);
    EXPECT_EQ(bytesOf(rs), kHl7Records) << "chunk " << chunk;
    ASSERT_EQ(rs.size(), 4u);
    EXPECT_EQ(rs.back().endOffset, kHl7File.size());
    // Each record ends where the next one's MSH starts.
    for (size_t k = 0; k + 1 < rs.size(); ++k)
      EXPECT_EQ(kHl7File.substr(rs[k].endOffset, 3), "MSH") << "record " << k;
  }
}

TEST(RecordSplitter, Hl7CountsTheBytesOutsideAnyMessage) {
  for (size_t chunk : {size_t{1}, size_t{2}, size_t{64}}) {
    RecordSplitter s(SplitFormat::Hl7);
    std::vector<SplitRecord> out;
    for (size_t i = 0; i < kHl7File.size(); i += chunk)
      s.feed(std::string_view(kHl7File).substr(i, chunk), out);
    s.finish(out);
    EXPECT_EQ(s.skippedBytes(), 11u) << "chunk " << chunk;  // "junk before"; not the BOM
  }
  // A file that is not HL7 at all: every byte of it, and no record.
  RecordSplitter garbage(SplitFormat::Hl7);
  std::vector<SplitRecord> out;
  garbage.feed("PK\x03\x04 a zip file\r\n", out);
  garbage.finish(out);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(garbage.skippedBytes(), 15u);
}

TEST(RecordSplitter, Hl7AByteOrderMarkRightBeforeTheFirstMshLosesNothing) {
  // Windows tools write one; the MSH after it starts no line of its own.
  const std::string file = "\xef\xbb\xbfMSH|^~\\&|A|B|C|D|||ADT^A01|M1|P|2.5\rPID|1\r"
                           "MSH|^~\\&|A|B|C|D|||ADT^A01|M2|P|2.5\rPID|2\r";
  for (size_t chunk : {size_t{1}, size_t{2}, size_t{4}, size_t{1} << 20}) {
    RecordSplitter s(SplitFormat::Hl7);
    std::vector<SplitRecord> out;
    for (size_t i = 0; i < file.size(); i += chunk) s.feed(std::string_view(file).substr(i, chunk), out);
    s.finish(out);
    ASSERT_EQ(out.size(), 2u) << "chunk " << chunk;
    EXPECT_EQ(out[0].bytes, "MSH|^~\\&|A|B|C|D|||ADT^A01|M1|P|2.5\rPID|1\r");
    EXPECT_EQ(file.substr(out[0].endOffset, 3), "MSH");
    EXPECT_EQ(out[1].endOffset, file.size());
    EXPECT_EQ(s.skippedBytes(), 0u);
  }
}

TEST(RecordSplitter, Hl7BatchEnvelopeSegmentsAreNotPartOfAMessage) {
  std::string file =
      "FHS|^~\\&\rBHS|^~\\&\rMSH|^~\\&|A|B|C|D|||ADT^A01|M1|P|2.5\rPID|1\r"
      "MSH|^~\\&|A|B|C|D|||ADT^A01|M2|P|2.5\rPID|2\rBTS|2\rFTS|1\r";
  auto rs = split(SplitFormat::Hl7, file, 5);
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0].bytes, "MSH|^~\\&|A|B|C|D|||ADT^A01|M1|P|2.5\rPID|1\r");
  EXPECT_EQ(rs[1].bytes, "MSH|^~\\&|A|B|C|D|||ADT^A01|M2|P|2.5\rPID|2\r");
  RecordSplitter s(SplitFormat::Hl7);
  std::vector<SplitRecord> out;
  s.feed(file, out);
  s.finish(out);
  EXPECT_EQ(s.skippedBytes(), 0u);  // the envelope is not lost content
}

TEST(RecordSplitter, Hl7FramingBetweenRecordsIsStrippedButInsideARecordItIsRefused) {
  // Frames as an MLLP capture keeps them: framing between records is not
  // content. Inside a record (a start block in the middle of a segment) it
  // is kept in the bytes and the record is refused, the others not.
  const std::string file =
      "\x0bMSH|^~\\&|A|B|C|D|||ADT^A01|M1|P|2.5\rPID|1||one\x1c\r"
      "\x0bMSH|^~\\&|A|B|C|D|||ADT^A01|M2|P|2.5\rPID|1||t\x0bwo\r\x1c\r"
      "\x0bMSH|^~\\&|A|B|C|D|||ADT^A01|M3|P|2.5\rPID|1||three\r\x1c\r";
  for (size_t chunk : {size_t{1}, size_t{3}, size_t{1} << 20}) {
    auto rs = split(SplitFormat::Hl7, file, chunk);
    ASSERT_EQ(rs.size(), 3u) << "chunk " << chunk;
    EXPECT_EQ(rs[0].bytes, "MSH|^~\\&|A|B|C|D|||ADT^A01|M1|P|2.5\rPID|1||one\r");
    EXPECT_FALSE(rs[0].refusal);
    EXPECT_EQ(rs[1].bytes, "MSH|^~\\&|A|B|C|D|||ADT^A01|M2|P|2.5\rPID|1||t\x0bwo\r");
    ASSERT_TRUE(rs[1].refusal) << "chunk " << chunk;
    EXPECT_NE(rs[1].refusal->find("record contains MLLP framing bytes (0x0B"), std::string::npos)
        << *rs[1].refusal;
    EXPECT_EQ(rs[2].bytes, "MSH|^~\\&|A|B|C|D|||ADT^A01|M3|P|2.5\rPID|1||three\r");
    EXPECT_FALSE(rs[2].refusal);
    EXPECT_EQ(rs[2].endOffset, file.size());
  }
  // An end block followed by more segments: a second message hidden in one.
  auto rs = split(SplitFormat::Hl7,
                  "MSH|^~\\&|A|B|C|D|||ADT^A01|M1|P|2.5\rPID|1\r\x1c\rEVN|A01\rPID|2\r", 4);
  ASSERT_EQ(rs.size(), 1u);
  EXPECT_TRUE(rs[0].refusal);
}

const std::string kCsvFile =
    "id,name,note\r\n"
    "1,Alice,plain\r\n"
    "\r\n"
    "2,\"Bob \"\"the builder\"\"\",\"line one\nline two\r\nline three\"\r\n"
    "3,Carol,\"comma, inside\"\n"
    "4,Dan,last without newline";

TEST(RecordSplitter, CsvKeepsQuotedNewlinesAndPrependsTheHeader) {
  const std::vector<std::string> expected = {
      "id,name,note\r\n1,Alice,plain",
      "id,name,note\r\n2,\"Bob \"\"the builder\"\"\",\"line one\nline two\r\nline three\"",
      "id,name,note\r\n3,Carol,\"comma, inside\"",
      "id,name,note\r\n4,Dan,last without newline",
  };
  for (size_t chunk : {size_t{1}, size_t{2}, size_t{5}, size_t{4096}}) {
    auto rs = split(SplitFormat::Csv, kCsvFile, chunk);
    EXPECT_EQ(bytesOf(rs), expected) << "chunk " << chunk;
    ASSERT_EQ(rs.size(), 4u);
    EXPECT_EQ(rs.back().endOffset, kCsvFile.size());
  }
  EXPECT_EQ(RecordSplitter::readCsvHeader(kCsvFile).value_or(""), "id,name,note\r\n");
  EXPECT_FALSE(RecordSplitter::readCsvHeader("id,na"));
}

TEST(RecordSplitter, LinesAreSplitOnAnyLineEndingSkippingBlankLines) {
  std::string file = "first\nsecond\r\n\r\nthird\rfourth";
  auto rs = split(SplitFormat::Lines, file, 3);
  EXPECT_EQ(bytesOf(rs), (std::vector<std::string>{"first", "second", "third", "fourth"}));
  EXPECT_EQ(rs[0].endOffset, 6u);
  EXPECT_EQ(rs[1].endOffset, 14u);
}

// Resuming at any record's saved offset gives exactly the records after it.
void expectResumeYieldsTheRest(SplitFormat f, const std::string& file) {
  auto all = split(f, file, 4096);
  ASSERT_FALSE(all.empty());
  std::optional<std::string> header;
  if (f == SplitFormat::Csv) header = RecordSplitter::readCsvHeader(file);
  for (size_t k = 0; k < all.size(); ++k) {
    for (size_t chunk : {size_t{1}, size_t{3}, size_t{4096}}) {
      auto rest = split(f, file, chunk, all[k].endOffset, header);
      std::vector<SplitRecord> expected(all.begin() + static_cast<long>(k) + 1, all.end());
      EXPECT_EQ(bytesOf(rest), bytesOf(expected)) << "resumed after record " << k;
      for (size_t j = 0; j < rest.size() && j < expected.size(); ++j)
        EXPECT_EQ(rest[j].endOffset, expected[j].endOffset);
    }
  }
}

TEST(RecordSplitter, ResumingAtASavedOffsetYieldsExactlyTheRemainingRecords) {
  expectResumeYieldsTheRest(SplitFormat::Hl7, kHl7File);
  expectResumeYieldsTheRest(SplitFormat::Csv, kCsvFile);
  expectResumeYieldsTheRest(SplitFormat::Lines, "a\nb\r\n\nc\rd\n");
}

TEST(RecordSplitter, ABigCsvSplitsIntoEveryRecordInOrder) {
  std::string file = "n,text\n";
  for (int i = 0; i < 20000; ++i)
    file += std::to_string(i) + ",\"row " + std::to_string(i) + "\nsecond line\"\n";
  RecordSplitter s(SplitFormat::Csv);
  std::vector<SplitRecord> out;
  for (size_t i = 0; i < file.size(); i += 65536) s.feed(std::string_view(file).substr(i, 65536), out);
  s.finish(out);
  ASSERT_EQ(out.size(), 20000u);
  EXPECT_EQ(out[12345].bytes, "n,text\n12345,\"row 12345\nsecond line\"");
  EXPECT_LT(s.buffered(), 1u);
}

}  // namespace
}  // namespace ductus::intake
