// Bytes from other systems as text for JSON and PostgreSQL.
#include "common/text.h"

#include <gtest/gtest.h>

#include "common/sha256.h"

namespace ductus {
namespace {

TEST(Text, Utf8IsRecognizedAndEverythingElseIsNot) {
  EXPECT_TRUE(isUtf8("plain"));
  EXPECT_TRUE(isUtf8("M\xc3\xbcller \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_FALSE(isUtf8("M\xfcller"));         // ISO-8859-1
  EXPECT_FALSE(isUtf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(isUtf8("\xed\xa0\x80"));      // a surrogate
  EXPECT_FALSE(isUtf8("\xf4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(isUtf8("\xe2\x82"));          // cut short
}

TEST(Text, IsoLatin1BecomesTheSameCharactersAndUtf8StaysAsItIs) {
  EXPECT_EQ(asText("M\xfcller"), "M\xc3\xbcller");
  EXPECT_EQ(asText("M\xc3\xbcller"), "M\xc3\xbcller");
}

TEST(Text, DatabaseTextHasNoNul) {
  EXPECT_EQ(asDatabaseText(std::string("a\0b\xe9", 4)), "a\\X00\\b\xc3\xa9");
  EXPECT_EQ(asDatabaseText("none"), "none");
}

TEST(Text, AsciiLowerLowersOnlyAsciiLetters) {
  EXPECT_EQ(asciiLower("Content-Type: Application/JSON"), "content-type: application/json");
  EXPECT_EQ(asciiLower("M\xdcLLER"), "m\xdcller");  // ISO-8859-1 \xdc stays as it is
}

TEST(Text, PercentEncodeKeepsOnlyTheUnreservedCharacters) {
  EXPECT_EQ(percentEncode("AZaz09-._~"), "AZaz09-._~");
  EXPECT_EQ(percentEncode("ann@ward 3/4?&=#%"), "ann%40ward%203%2F4%3F%26%3D%23%25");
  EXPECT_EQ(percentEncode(std::string("\x00\xff\xc3\xa9", 4)), "%00%FF%C3%A9");
  EXPECT_EQ(percentEncode(""), "");
}

TEST(Sha256, MatchesThePublishedVector) {
  EXPECT_EQ(sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace ductus
