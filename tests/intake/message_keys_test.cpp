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

TEST(KeysOf, AnEmptyControlIdMeansNoDedupeKey) {
  EXPECT_FALSE(keysOf(dedupeOnControlId(), adt("")).dedupe.has_value());
}

}  // namespace
}  // namespace ductus::intake
