#include <gtest/gtest.h>

#include "common/hl7/ack.h"
#include "common/hl7/message.h"
#include "common/hl7/mllp.h"

namespace ductus::hl7 {
namespace {

const std::string kAdt =
    "MSH|^~\\&|SENDAPP|SENDFAC|RECVAPP|RECVFAC|20260101120000||ADT^A01^ADT_A01|MSG00001|T|2.5.1\r"
    "EVN|A01|20260101120000\r"
    "PID|1||12345^^^HOSP^MR~67890^^^OTHER^MR||DOE^JOHN^Q||19700101|M\r"
    "PID|2||second\r";

TEST(Hl7Message, FindsMshOnlyAtTheStartOfASegment) {
  EXPECT_EQ(findMsh("MSH|^~\\&"), 0u);
  EXPECT_EQ(findMsh("\x0bMSH|^~\\&"), 1u);
  EXPECT_EQ(findMsh("xxMSH|\rMSH|^~\\&"), 7u);
  EXPECT_EQ(findMsh("PID|MSH|\nMSH|"), 9u);
  EXPECT_EQ(findMsh("PID|1|MSH"), std::string_view::npos);
}

TEST(Hl7Message, ReadsFieldsComponentsAndRepetitionsByPath) {
  auto m = MessageView::parse(kAdt);
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->get("MSH.1"), "|");
  EXPECT_EQ(m->get("MSH.2"), "^~\\&");
  EXPECT_EQ(m->get("MSH.9"), "ADT^A01^ADT_A01");
  EXPECT_EQ(m->get("MSH-9.2"), "A01");
  EXPECT_EQ(m->get("MSH.10"), "MSG00001");
  EXPECT_EQ(m->get("PID.3.1"), "12345");
  EXPECT_EQ(m->get("PID.3[2].4"), "OTHER");
  EXPECT_EQ(m->get("PID.5.2"), "JOHN");
  EXPECT_EQ(m->get("PID(2).3"), "second");
  EXPECT_EQ(m->get("PID.30"), "");
  EXPECT_EQ(m->get("OBX.1"), "");
  EXPECT_EQ(m->get("nonsense"), "");
}

TEST(Hl7Message, CustomDelimitersAreReadFromMsh1AndMsh2) {
  std::string msg = "MSH#@!*&#A#B#C#D#2026##ORU@R01#ID7#P#2.3\rPID#1##99@x&y\r";
  auto m = MessageView::parse(msg);
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->delimiters().field, '#');
  EXPECT_EQ(m->delimiters().component, '@');
  EXPECT_EQ(m->delimiters().repetition, '!');
  EXPECT_EQ(m->delimiters().escape, '*');
  EXPECT_EQ(m->delimiters().subcomponent, '&');
  EXPECT_EQ(m->get("MSH.10"), "ID7");
  EXPECT_EQ(m->get("MSH.9.2"), "R01");
  EXPECT_EQ(m->get("PID.3.2.2"), "y");
}

// hl7apy's test of custom encoding characters (its to_er7 test's msh_custom):
// '!' fields, '$' components, 'r' repetitions, '?' escape, '@' subcomponents.
// A letter is refused only as the field separator.
const std::string kHl7apyCustom =
    "MSH!$r?@!LIP!LIP!LB!LB!20111207121030!!RSP^SLI^RSP_K11!430102!D!2.5!!!!!IT!!EN\r"
    "PID!1!!566-554$$$GHH$MRr777$$$GHH@X$MR!!SURNAME$NAME?R?\r";

TEST(Hl7Message, ALetterIsAValidRepetitionSeparatorAsHl7apyWritesIt) {
  auto m = MessageView::parse(kHl7apyCustom);
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->delimiters().field, '!');
  EXPECT_EQ(m->delimiters().component, '$');
  EXPECT_EQ(m->delimiters().repetition, 'r');
  EXPECT_EQ(m->delimiters().escape, '?');
  EXPECT_EQ(m->delimiters().subcomponent, '@');
  EXPECT_EQ(m->get("MSH.2"), "$r?@");
  EXPECT_EQ(m->get("MSH.9"), "RSP^SLI^RSP_K11");  // one component: '^' is no delimiter here
  EXPECT_EQ(m->get("MSH.10"), "430102");
  EXPECT_EQ(m->get("MSH.18"), "");
  EXPECT_EQ(m->get("MSH.19"), "EN");
  EXPECT_EQ(m->get("PID.3.1"), "566-554");
  EXPECT_EQ(m->get("PID.3[2].1"), "777");
  EXPECT_EQ(m->get("PID.3[2].4.2"), "X");
  EXPECT_EQ(m->getDecoded("PID.5.2"), "NAMEr");
}

TEST(Hl7Ack, AnArForAnUnusableMsh2StillEchoesMsh10) {
  AckOptions opt{"ACK9", std::chrono::system_clock::now()};
  // MSH-2 declares '^' twice: parse() refuses it, MSH-1 still reads.
  auto ack = buildAckFor("MSH|^^\\&|A|B|C|D|||ADT^A01|CTRL-7|P|2.5\rPID|1\r", AckCode::Reject,
                         "bad MSH-2", opt);
  auto a = MessageView::parse(ack);
  ASSERT_TRUE(a) << ack;
  EXPECT_EQ(a->get("MSA.1"), "AR");
  EXPECT_EQ(a->get("MSA.2"), "CTRL-7") << ack;
  EXPECT_EQ(a->get("MSA.3"), "bad MSH-2");
  // MSH-10 with the standard delimiters in it is escaped, not split.
  ack = buildAckFor("MSH#^^#A#B#C#D###X#a|b^c#P", AckCode::Reject, "", opt);
  a = MessageView::parse(ack);
  ASSERT_TRUE(a) << ack;
  EXPECT_EQ(a->getDecoded("MSA.2"), "a|b^c") << ack;
  // A letter as the field separator can't be read: nothing to echo.
  ack = buildAckFor("MSHX^~\\&XAXBXCXDXXXADT^A01XCTRL-8XP", AckCode::Reject, "", opt);
  a = MessageView::parse(ack);
  ASSERT_TRUE(a) << ack;
  EXPECT_EQ(a->get("MSA.1"), "AR");
  EXPECT_EQ(a->get("MSA.2"), "") << ack;
  // Readable bytes get the ordinary ACK.
  ack = buildAckFor(kAdt, AckCode::Accept, "", opt);
  EXPECT_NE(ack.find("\rMSA|AA|MSG00001"), std::string::npos) << ack;
}

TEST(Hl7Mllp, AFramingByteAnywhereInAMessageIsRefusedWithWhereItIs) {
  EXPECT_TRUE(mllp::refuseFramingBytes(kAdt));
  EXPECT_TRUE(mllp::refuseFramingBytes(""));
  auto s = mllp::refuseFramingBytes("MSH|^~\\&|A\r\x1c\r\x0bMSH|^~\\&|EVIL\r");
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message,
            "message contains MLLP framing bytes (0x1C, end block at byte 11): framing bytes "
            "are never part of an HL7 message");
  s = mllp::refuseFramingBytes("MSH|^~\\&|\x0b", "output");
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().message.rfind("output contains MLLP framing bytes (0x0B, start block at "
                                    "byte 9)",
                                    0),
            0u)
      << s.error().message;
}

TEST(Hl7Message, AcceptsNewlineAndCrLfSegmentTerminators) {
  std::string msg = "MSH|^~\\&|A|B|C|D|||ADT^A08|X1|P|2.5\r\nPID|1||777\nPV1|1|I\n";
  auto m = MessageView::parse(msg);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->get("MSH.10"), "X1");
  EXPECT_EQ(m->get("PID.3"), "777");
  EXPECT_EQ(m->get("PV1.2"), "I");
}

TEST(Hl7Message, RefusesDuplicateOrMissingDelimiters) {
  EXPECT_FALSE(MessageView::parse("MSH||~\\&|A"));
  EXPECT_FALSE(MessageView::parse("MSH|^~\r"));
  EXPECT_FALSE(MessageView::parse("PID|1|2"));
}

TEST(Hl7Message, ReadingFieldsOnlyNeedsJustMsh1AndSplitsNothingInsideAField) {
  // MSH-2 "^~&", its escape character lost to a C string's "\&": parse()
  // refuses it, but the MSA is plain to read.
  const char* ack = "MSH|^~&|R|F|S|F|1||ACK|1|P|2.5\rMSA|AE|X1|bad~text^here\\F\\\r";
  EXPECT_FALSE(MessageView::parse(ack));
  auto m = MessageView::parseFieldsOnly(ack);
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->get("MSA.1"), "AE");
  EXPECT_EQ(m->get("MSA.3"), "bad~text^here\\F\\");
  EXPECT_EQ(m->getDecoded("MSA.3"), "bad~text^here\\F\\");
  EXPECT_EQ(m->get("MSA.3.2"), "");
  EXPECT_EQ(m->get("MSH.2"), "^~&");
  EXPECT_EQ(m->get("MSH.10"), "1");

  auto custom = MessageView::parseFieldsOnly("\r\nMSH#^~\\&#R\nMSA#AA#7|8");
  ASSERT_TRUE(custom);
  EXPECT_EQ(custom->get("MSA.2"), "7|8");

  EXPECT_FALSE(MessageView::parseFieldsOnly("MSH\rMSA|AA|1"));
  EXPECT_FALSE(MessageView::parseFieldsOnly("MSH"));
  EXPECT_FALSE(MessageView::parseFieldsOnly("hello"));
}

TEST(Hl7Message, UnescapeDecodesOnlyWhenAsked) {
  std::string msg = "MSH|^~\\&|A|B|C|D|||ADT^A01|X|P|2.5\rNTE|1||a\\F\\b\\S\\c\\T\\d\\R\\e\\E\\f\\X41C3A9\\g\\H\\h\r";
  auto m = MessageView::parse(msg);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->get("NTE.3"), "a\\F\\b\\S\\c\\T\\d\\R\\e\\E\\f\\X41C3A9\\g\\H\\h");
  EXPECT_EQ(m->getDecoded("NTE.3"), "a|b^c&d~e\\fA\xC3\xA9g\\H\\h");
}

TEST(Hl7Message, EscapeRoundTripsThroughUnescape) {
  Delimiters d;
  std::string text = "size|limit^x&y~z\\w\r\nnext";
  std::string e = escape(text, d);
  EXPECT_EQ(e.find_first_of("|^&~\r\n"), std::string::npos);
  EXPECT_EQ(unescape(e, d), "size|limit^x&y~z\\w\rnext");
}

TEST(Hl7Ack, SwapsApplicationsAndEchoesControlIdInTheSendersDelimiters) {
  auto m = MessageView::parse(kAdt);
  ASSERT_TRUE(m);
  AckOptions o;
  o.controlId = "ACK1";
  std::string ack = buildAck(*m, AckCode::Accept, "", o);
  auto a = MessageView::parse(ack);
  ASSERT_TRUE(a) << ack;
  EXPECT_EQ(a->get("MSH.3"), "RECVAPP");
  EXPECT_EQ(a->get("MSH.4"), "RECVFAC");
  EXPECT_EQ(a->get("MSH.5"), "SENDAPP");
  EXPECT_EQ(a->get("MSH.6"), "SENDFAC");
  EXPECT_EQ(a->get("MSH.9"), "ACK^A01^ACK");
  EXPECT_EQ(a->get("MSH.10"), "ACK1");
  EXPECT_EQ(a->get("MSH.11"), "T");
  EXPECT_EQ(a->get("MSH.12"), "2.5.1");
  EXPECT_EQ(a->get("MSA.1"), "AA");
  EXPECT_EQ(a->get("MSA.2"), "MSG00001");
  EXPECT_EQ(ack.back(), '\r');
  EXPECT_EQ(ack.find('\n'), std::string::npos);
  EXPECT_EQ(a->get("MSH.7").size(), 19u);  // YYYYMMDDHHMMSS+ZZZZ
}

TEST(Hl7Ack, UsesCustomDelimitersAndEscapesTheText) {
  std::string msg = "MSH#@!*&#A#B#C#D#2026##ORU@R01#ID7##2.3\r";
  auto m = MessageView::parse(msg);
  ASSERT_TRUE(m);
  std::string ack = buildAck(*m, AckCode::Error, "db down#retry", {});
  EXPECT_EQ(ack.rfind("MSH#@!*&#C#D#A#B#", 0), 0u) << ack;
  EXPECT_NE(ack.find("#ACK@R01@ACK#"), std::string::npos) << ack;
  EXPECT_NE(ack.find("#P#2.3\r"), std::string::npos) << ack;  // no MSH-11: P
  EXPECT_NE(ack.find("\rMSA#AE#ID7#db down*F*retry\r"), std::string::npos) << ack;
}

TEST(Hl7Ack, EnhancedModeAnswersWithCommitCodes) {
  std::string msg = "MSH|^~\\&|A|B|C|D|||ADT^A01|X9|P|2.5|||AL|NE\r";
  auto m = MessageView::parse(msg);
  ASSERT_TRUE(m);
  std::string accept = buildAck(*m, AckCode::Accept, "", {});
  std::string reject = buildAck(*m, AckCode::Reject, "", {});
  EXPECT_EQ(MessageView::parse(accept)->get("MSA.1"), "CA");
  EXPECT_EQ(MessageView::parse(reject)->get("MSA.1"), "CR");
}

TEST(Hl7Ack, AnswerWithoutMessageIsAReadableAr) {
  std::string ack = buildAckWithoutMessage(AckCode::Reject, "no MSH segment", {});
  auto a = MessageView::parse(ack);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->get("MSA.1"), "AR");
  EXPECT_EQ(a->get("MSA.2"), "");
  EXPECT_EQ(a->get("MSA.3"), "no MSH segment");
}

TEST(Hl7Ack, ControlIdsAreUniqueAndFitMsh10) {
  std::string a = newControlId(), b = newControlId();
  EXPECT_NE(a, b);
  EXPECT_LE(a.size(), 20u);
}

}  // namespace
}  // namespace ductus::hl7

// Found by fuzzing (tests/fuzz/regressions/hl7): each ACK must parse back,
// with the fields it was built with.
namespace ductus::hl7 {
namespace {

TEST(Hl7AckFromFuzzing, FramingBytesInTheTextAreEscapedSoTheAckEndsWhereItShould) {
  auto m = MessageView::parse("MSH|^~\\&|A|B|C|D|||ADT^A01|42|P|2.5\r");
  ASSERT_TRUE(m);
  std::string text = std::string("bad\x1c") + "x\x0b" + "y";
  std::string ack = buildAck(*m, AckCode::Error, text);
  EXPECT_EQ(ack.find('\x1c'), std::string::npos) << ack;
  EXPECT_EQ(ack.find('\x0b'), std::string::npos) << ack;
  auto back = MessageView::parse(ack);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->get("MSA.3"), "bad\\X1C\\x\\X0B\\y");  // HL7's hex escapes
  EXPECT_EQ(buildAckWithoutMessage(AckCode::Reject, "\x1c").find('\x1c'), std::string::npos);
}

TEST(Hl7AckFromFuzzing, ALetterOrDigitFieldSeparatorOrAFramingByteIsNoDelimiter) {
  for (std::string msh : {std::string("MSHM^~\\&Mx\r"), std::string("MSH1^~\\&1x\r"),
                          std::string("MSH|^~\\\x1c|x\r"), std::string("MSH|^\x0b\\&|x\r")}) {
    auto m = MessageView::parse(msh);
    EXPECT_FALSE(m) << msh;
  }
  // As the other four, a letter or digit splits only inside fields: legal.
  auto m = MessageView::parse("MSH|^~\\S|x\r");
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->delimiters().subcomponent, 'S');
}

TEST(Hl7AckFromFuzzing, ATimestampSignThatIsTheSendersDelimiterIsEscaped) {
  auto m = MessageView::parse("MSH+^~\\&+A+B+C+D+++ADT^A01+42+P+2.5\r");
  ASSERT_TRUE(m);
  std::string ack = buildAck(*m, AckCode::Accept, "", {"ACK1", std::chrono::system_clock::now()});
  auto back = MessageView::parse(ack);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->get("MSH.10"), "ACK1") << ack;
  EXPECT_EQ(back->get("MSA.2"), "42") << ack;
}

}  // namespace
}  // namespace ductus::hl7
