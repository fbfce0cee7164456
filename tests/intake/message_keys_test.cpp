// The keys intake reads from a message, and the form a dedupe key is stored
// in: whatever bytes a sender puts in MSH-10, the key must be one the
// database accepts, or that message is answered AE on every resend.
#include "intake/message_keys.h"

#include <gtest/gtest.h>

namespace ductus::intake {
namespace {

std::string adt(const std::string& controlId) {
  return "MSH|^~\\&|SEND|FAC|RECV|FAC|20260101120000||ADT^A01|" + controlId +
         "|P|2.5\rPID|1||M1^^^H||Doe^John\r";
}

KeySpec dedupeOnControlId() {
  KeySpec spec;
  spec.dedupeKey = "MSH.10";
  return spec;
}

TEST(StorableKey, UnicodeKeysAreKeptAsTheyAre) {
  EXPECT_EQ(storableKey("ABC-123"), "ABC-123");
  EXPECT_EQ(storableKey("C\xc3\xa9-1"), "C\xc3\xa9-1");  // "Cé-1" in UTF-8
}

TEST(StorableKey, IsoLatin1BytesBecomeTheSameCharactersInUtf8) {
  // 0xE9 is é in ISO-8859-1; alone it is not UTF-8, and PostgreSQL refuses it.
  EXPECT_EQ(storableKey("C\xe9-1"), "C\xc3\xa9-1");
  EXPECT_EQ(storableKey("\xff"), "\xc3\xbf");
}

TEST(StorableKey, NulIsWrittenAsHl7sHexEscape) {
  EXPECT_EQ(storableKey(std::string("A\0B", 3)), "A\\X00\\B");
}

TEST(StorableKey, AKeyTooLongForTheIndexIsStoredAsItsHash) {
  std::string longKey(kMaxStoredKeyBytes + 1, 'x');
  std::string stored = storableKey(longKey);
  EXPECT_EQ(stored.rfind("sha256:", 0), 0u);
  EXPECT_EQ(stored.size(), 7u + 64u);
  EXPECT_EQ(stored, storableKey(longKey));  // the same key, the same hash
  EXPECT_NE(stored, storableKey(std::string(kMaxStoredKeyBytes + 1, 'y')));
  EXPECT_EQ(storableKey(std::string(kMaxStoredKeyBytes, 'x')),
            std::string(kMaxStoredKeyBytes, 'x'));
}

TEST(KeysOf, AnIsoLatin1ControlIdGivesAUtf8DedupeKey) {
  auto k = keysOf(dedupeOnControlId(), adt("C\xe9-7"));
  ASSERT_TRUE(k.dedupe.has_value());
  EXPECT_EQ(*k.dedupe, "C\xc3\xa9-7");
}

TEST(KeysOf, JsonInIsoLatin1StillHasItsKeys) {
  // The HTTP body check and the SDK read it; the keys must too, or a
  // duplicate is stored and a patient's messages split over two lanes.
  KeySpec spec;
  spec.format = config::Format::Json;
  spec.dedupeKey = "id";
  spec.orderingKey = "mrn";
  spec.partitions = 16;
  auto latin1 = keysOf(spec, "{\"id\":\"A\xe9\",\"mrn\":\"M\xfcller\"}");
  auto utf8 = keysOf(spec, "{\"id\":\"A\xc3\xa9\",\"mrn\":\"M\xc3\xbcller\"}");
  ASSERT_TRUE(latin1.dedupe.has_value());
  EXPECT_EQ(*latin1.dedupe, "A\xc3\xa9");
  EXPECT_EQ(latin1.lane, utf8.lane);
  EXPECT_NE(latin1.lane, keysOf(spec, "{\"id\":\"x\"}").lane);  // not the empty key's lane
}

// A message with MSH-18 set to `charset` (empty: not set) and `mrn` in PID-3.
std::string withCharset(const std::string& charset, const std::string& mrn) {
  return "MSH|^~\\&|SEND|FAC|RECV|FAC|20260101120000||ADT^A01|C1|P|2.5||||||" + charset +
         "\rPID|1||" + mrn + "^^^H||Doe^John\r";
}

KeySpec byMrn(config::Charset charset = config::Charset::Auto) {
  KeySpec spec;
  spec.dedupeKey = "PID.3.1";
  spec.orderingKey = "PID.3.1";
  spec.partitions = 64;
  spec.charset = charset;
  return spec;
}

TEST(KeysOf, HL7KeysAreReadInTheCharsetTheMessageDeclares) {
  // "Müller" in UTF-8 (C3 BC) and in ISO-8859-1 (FC), declared or not: one
  // patient, one key, one lane, as the SDK reads it.
  const std::string utf8 = "M\xc3\xbcller", latin1 = "M\xfcller";
  auto a = keysOf(byMrn(), withCharset("UNICODE UTF-8", utf8));
  auto b = keysOf(byMrn(), withCharset("8859/1", latin1));
  auto c = keysOf(byMrn(), withCharset("", utf8));
  auto d = keysOf(byMrn(), withCharset("", latin1));
  for (auto* k : {&a, &b, &c, &d}) {
    ASSERT_TRUE(k->dedupe.has_value());
    EXPECT_EQ(*k->dedupe, utf8);
    EXPECT_EQ(k->lane, a.lane);
  }
  // Declared ISO-8859-1, the bytes C3 BC are two characters, "Ã¼", even
  // though they would also spell ü in UTF-8.
  auto e = keysOf(byMrn(), withCharset("ISO IR100", utf8));
  ASSERT_TRUE(e.dedupe.has_value());
  EXPECT_EQ(*e.dedupe, "M\xc3\x83\xc2\xbcller");
  // The interface may force one over what the message says.
  auto f = keysOf(byMrn(config::Charset::Latin1), withCharset("UNICODE UTF-8", utf8));
  EXPECT_EQ(*f.dedupe, "M\xc3\x83\xc2\xbcller");
  auto g = keysOf(byMrn(config::Charset::Utf8), withCharset("8859/1", utf8));
  EXPECT_EQ(*g.dedupe, utf8);
  // Bytes that are not UTF-8 are never read as UTF-8, whatever is declared.
  auto h = keysOf(byMrn(config::Charset::Utf8), withCharset("UNICODE UTF-8", latin1));
  EXPECT_EQ(*h.dedupe, utf8);
}

TEST(KeysOf, JsonForcedToIsoLatin1IsReadAsIt) {
  KeySpec spec;
  spec.format = config::Format::Json;
  spec.dedupeKey = "id";
  spec.charset = config::Charset::Latin1;
  auto k = keysOf(spec, "{\"id\":\"A\xc3\xa9\"}");
  ASSERT_TRUE(k.dedupe.has_value());
  EXPECT_EQ(*k.dedupe, "A\xc3\x83\xc2\xa9");
}

TEST(KeysOf, AnEmptyControlIdMeansNoDedupeKey) {
  EXPECT_FALSE(keysOf(dedupeOnControlId(), adt("")).dedupe.has_value());
}

std::string jsonValue(std::string_view body, std::string_view path) {
  return valueAt(config::Format::Json, body, path);
}

TEST(JsonKeys, PathsReachMembersAndElementsAtAnyDepth) {
  std::string body = R"({"a":{"b":[{"c":1},{"c":"two","d":[true,null,2.5]}]},"id":"X-1"})";
  EXPECT_EQ(jsonValue(body, "id"), "X-1");
  EXPECT_EQ(jsonValue(body, "$.id"), "X-1");
  EXPECT_EQ(jsonValue(body, "a.b[0].c"), "1");
  EXPECT_EQ(jsonValue(body, "a.b[1].c"), "two");
  EXPECT_EQ(jsonValue(body, "a.b[1].d[0]"), "true");
  EXPECT_EQ(jsonValue(body, "a.b[1].d[1]"), "");  // null: no key
  EXPECT_EQ(jsonValue(body, "a.b[1].d[2]"), "2.5");
  EXPECT_EQ(jsonValue(body, "a.b[2].c"), "");
  EXPECT_EQ(jsonValue(body, "a.c"), "");
  EXPECT_EQ(jsonValue(body, "a[0]"), "");  // an object is not an array
  EXPECT_EQ(jsonValue(body, "a.b[x]"), "");
  EXPECT_EQ(jsonValue(body, "a.b["), "");
}

TEST(JsonKeys, AnObjectOrArrayAtThePathIsItsCompactJsonAsBefore) {
  // Written as the DOM wrote it (members sorted), so a key read by an older
  // engine is the same key now: the dedupe index holds both.
  std::string body = R"({"p":{"z":1,"a":[1,{"y":2,"b":3}]},"q":[3, 4]})";
  EXPECT_EQ(jsonValue(body, "p"), R"({"a":[1,{"b":3,"y":2}],"z":1})");
  EXPECT_EQ(jsonValue(body, "q"), "[3,4]");
}

TEST(JsonKeys, TheSamePathAsOrderingAndDedupeKeyGivesBoth) {
  KeySpec spec;
  spec.format = config::Format::Json;
  spec.dedupeKey = "mrn";
  spec.orderingKey = "mrn";
  spec.partitions = 8;
  auto k = keysOf(spec, R"({"mrn":"M1"})");
  ASSERT_TRUE(k.dedupe.has_value());
  EXPECT_EQ(*k.dedupe, "M1");
  KeySpec objectKey = spec;
  auto o = keysOf(objectKey, R"({"mrn":{"id":"M1"}})");
  ASSERT_TRUE(o.dedupe.has_value());
  EXPECT_EQ(*o.dedupe, R"({"id":"M1"})");
}

TEST(JsonKeys, ABodyThatIsNotJsonHasNoKeys) {
  EXPECT_EQ(jsonValue(R"({"x": nope, "id":"A"})", "id"), "");
  EXPECT_EQ(jsonValue("", "id"), "");
  EXPECT_EQ(jsonValue("[1,2", "[5]"), "");
}

TEST(JsonKeys, ReadingStopsOnceEveryKeyIsFound) {
  // The keys are read on the supervisor's loop: a big body is read only as
  // far as its keys, and never held as a DOM. What follows them is not
  // looked at (the HTTP body check refuses a body that isn't JSON).
  std::string body = R"({"id":"A-1","rest":[)";
  for (int i = 0; i < 200000; ++i) body += R"({"n":12345,"s":"some text"},)";
  body += "this is not JSON";
  EXPECT_EQ(jsonValue(body, "id"), "A-1");
}

TEST(JsonKeys, DeepNestingIsRefusedNotRecursedInto) {
  std::string deep(100000, '[');
  EXPECT_EQ(jsonValue(deep + "1" + std::string(100000, ']'), "id"), "");
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += R"({"a":)";
  EXPECT_EQ(jsonValue(objects, "a.a"), "");
}

// The browser's columns (migration 0006): what the API searches by.
TEST(KeysOf, Hl7GivesTypeAndControlIdWhateverItsDelimiters) {
  KeySpec spec;  // no keys at all: the header is still read
  auto k = keysOf(spec, adt("CTL-1"));
  EXPECT_EQ(k.columns.type, "ADT^A01");
  EXPECT_EQ(k.columns.controlId, "CTL-1");
  EXPECT_FALSE(k.columns.keyValue.has_value());
  EXPECT_FALSE(k.columns.charset.has_value());

  // A sender whose component separator is '@': one spelling of the type.
  spec.orderingKey = "PID.3.1";
  spec.partitions = 8;
  auto custom = keysOf(spec,
                       "MSH#@!*&#SEND#FAC#RECV#FAC#20260101120000##ADT@A01@ADT_A01#C-9#P#2.5\r"
                       "PID#1##M7@@@H##Doe@Jane\r");
  EXPECT_EQ(custom.columns.type, "ADT^A01^ADT_A01");
  EXPECT_EQ(custom.columns.controlId, "C-9");
  EXPECT_EQ(custom.columns.keyValue, "M7");
  // The key value is the lane's input.
  KeySpec plain = spec;
  EXPECT_EQ(custom.lane, keysOf(plain, "MSH|^~\\&|A|B|C|D|1||ADT^A01|X|P|2.5\rPID|1||M7\r").lane);
}

TEST(KeysOf, Hl7apysLetterRepetitionSeparatorGivesItsTypeControlIdAndKeys) {
  // hl7apy's custom encoding characters: '!' '$' 'r' '?' '@'.
  KeySpec spec;
  spec.orderingKey = "PID.3[2].1";
  spec.dedupeKey = "MSH.10";
  spec.partitions = 8;
  auto k = keysOf(spec,
                  "MSH!$r?@!LIP!LIP!LB!LB!20111207121030!!RSP$SLI$RSP_K11!430102!D!2.5!!!!!IT!!EN\r"
                  "PID!1!!566$$$GHH$MRr777$$$GHH$MR!!SURNAME$NAME\r");
  EXPECT_EQ(k.columns.type, "RSP^SLI^RSP_K11");
  EXPECT_EQ(k.columns.controlId, "430102");
  EXPECT_EQ(k.dedupe, "430102");
  EXPECT_EQ(k.columns.keyValue, "777");
}

TEST(KeysOf, TheKeyValueIsKeptWithOneLaneToo) {
  KeySpec spec;
  spec.orderingKey = "PID.3.1";
  spec.partitions = 1;
  auto k = keysOf(spec, adt("C"));
  EXPECT_EQ(k.lane, 0);
  EXPECT_EQ(k.columns.keyValue, "M1");
}

TEST(KeysOf, TheCharsetIsRecordedWhenSomethingSaidIso8859_1) {
  KeySpec spec;
  std::string declared =
      "MSH|^~\\&|A|B|C|D|20260101||ADT^A08|C\xe9|P|2.5||||||8859/1\rPID|1||M\xfc\r";
  auto k = keysOf(spec, declared);
  EXPECT_EQ(k.columns.charset, "iso-8859-1");
  EXPECT_EQ(k.columns.controlId, "C\xc3\xa9");
  // Undeclared: nothing recorded (UTF-8 where the bytes are, else ISO-8859-1).
  EXPECT_FALSE(keysOf(spec, adt("C\xe9")).columns.charset.has_value());
  spec.charset = config::Charset::Latin1;
  EXPECT_EQ(keysOf(spec, adt("C")).columns.charset, "iso-8859-1");
  KeySpec json;
  json.format = config::Format::Json;
  json.charset = config::Charset::Latin1;
  EXPECT_EQ(keysOf(json, "{}").columns.charset, "iso-8859-1");
}

TEST(KeysOf, JsonHasItsKeyValueAndNothingElse) {
  KeySpec spec;
  spec.format = config::Format::Json;
  EXPECT_FALSE(keysOf(spec, R"({"mrn":"M1"})").columns.any());
  spec.orderingKey = "patient.mrn";
  spec.partitions = 4;
  auto k = keysOf(spec, R"({"type":"x","patient":{"mrn":"M\u00fc1"}})");
  EXPECT_EQ(k.columns.keyValue, "M\xc3\xbc" "1");
  EXPECT_FALSE(k.columns.type.has_value());
  EXPECT_FALSE(k.columns.controlId.has_value());
  EXPECT_FALSE(keysOf(spec, R"({"patient":{}})").columns.keyValue.has_value());
}

}  // namespace
}  // namespace ductus::intake
