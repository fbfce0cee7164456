// What intake refuses for a format, with where: the check the HTTP source,
// the API's edit and its dry run share (intake/payload_check.h).
#include "intake/payload_check.h"

#include <gtest/gtest.h>

namespace ductus::intake {
namespace {

using config::Format;
using Kind = PayloadProblem::Kind;

TEST(PayloadCheck, HL7WithoutAnMshIsRefusedAtLineOne) {
  auto p = checkPayload(Format::Hl7v2, "PID|1||M1\rPV1|1\r");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->kind, Kind::NotHl7);
  EXPECT_EQ(p->text, "no MSH segment");
  EXPECT_EQ(p->line, 1);
  EXPECT_EQ(p->field, "");
}

TEST(PayloadCheck, AnMshWhoseDelimitersCantBeReadNamesItsLineAndField) {
  auto p = checkPayload(Format::Hl7v2, "\r\nMSH|^~\r");  // MSH-2 too short, line 2
  ASSERT_TRUE(p);
  EXPECT_EQ(p->kind, Kind::NotHl7);
  EXPECT_EQ(p->line, 2);
  EXPECT_EQ(p->segment, "MSH");
  EXPECT_EQ(p->field, "MSH.2");
  p = checkPayload(Format::Hl7v2, "MSHA^~\\&|x\r");  // a letter as the field separator
  ASSERT_TRUE(p);
  EXPECT_EQ(p->field, "MSH.1");
  p = checkPayload(Format::Hl7v2, "MSH|^^\\&|A\r");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->field, "MSH.2");
  EXPECT_NE(p->text.find("twice"), std::string::npos) << p->text;
}

TEST(PayloadCheck, AFramingByteIsNamedByItsSegment) {
  auto p = checkPayload(Format::Hl7v2,
                        "MSH|^~\\&|A\rPID|1||M\x0b"
                        "1\rPV1|1\r");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->kind, Kind::Framing);
  EXPECT_EQ(p->line, 2);
  EXPECT_EQ(p->segment, "PID");
  EXPECT_EQ(p->column, 9);
}

TEST(PayloadCheck, WhatIntakeTakesPasses) {
  EXPECT_FALSE(checkPayload(Format::Hl7v2, "MSH|^~\\&|A|B|C|D|1||ADT^A01|C1|P|2.5\rPID|1||M1\r"));
  EXPECT_FALSE(checkPayload(Format::Json, "{\"a\": [1, 2]}"));
  EXPECT_FALSE(checkPayload(Format::Csv, "anything,at,all\n"));
  // A bad segment after a readable MSH is the transform's to judge, as at
  // intake (the MLLP listener answers AA to it).
  EXPECT_FALSE(checkPayload(Format::Hl7v2, "MSH|^~\\&|A\rxx\r"));
}

TEST(PayloadCheck, JsonThatIsNotJsonSaysTheLineAndColumnNlohmannSays) {
  auto p = checkPayload(Format::Json, "{\n  \"a\": 1,\n  \"b\": nope\n}");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->kind, Kind::NotJson);
  EXPECT_EQ(p->line, 3);
  EXPECT_NE(p->text.find("line 3, column " + std::to_string(p->column)), std::string::npos)
      << p->text << " column " << p->column;
}

TEST(PayloadCheck, TheSizeIsCheckedWhenGiven) {
  std::string msg = "MSH|^~\\&|A\r" + std::string(100, 'x');
  auto p = checkPayload(Format::Hl7v2, msg, 50);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->kind, Kind::TooLarge);
  EXPECT_NE(p->text.find("max_message_size"), std::string::npos);
  EXPECT_FALSE(checkPayload(Format::Hl7v2, msg, 0));
  EXPECT_FALSE(checkPayload(Format::Hl7v2, msg, msg.size()));
}

}  // namespace
}  // namespace ductus::intake
