// The keys intake reads from a message before storing it: the ordering key
// (-> its lane, common/partition.h) and the dedupe key. HL7 v2 paths
// ("PID.3.1") are read from the raw bytes (common/hl7); JSON paths
// ("patient.mrn", "$.patient.mrn", "ids[0]") in one streaming pass that
// holds only the path walked so far and stops once every key is found
// (intake runs on the supervisor's loop; a body may be 64 MB).
// Other formats have no keys: one lane, no dedupe.
//
// The same pass reads what the API's message browser searches by
// (store::MessageColumns): for HL7 MSH-9 and MSH-10, and for every format the
// ordering key's value and the charset its text was read in.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/config/model.h"
#include "schema/store_types.h"

namespace ductus::intake {

struct KeySpec {
  config::Format format = config::Format::Hl7v2;
  // How the payload's bytes become the keys' text, as the SDK reads them
  // (sdk/ductus.js, "charsets"): forced by the interface, else MSH-18 for
  // HL7 when set, else UTF-8 when the bytes are UTF-8 and ISO-8859-1 when
  // not. So a patient's MRN is one key whichever charset a sender used.
  config::Charset charset = config::Charset::Auto;
  std::optional<std::string> orderingKey;
  uint32_t partitions = 1;
  std::optional<std::string> dedupeKey;
};

struct MessageKeys {
  int32_t lane = 0;
  std::optional<std::string> dedupe;  // nullopt: no key, or empty in the message
  // Each nullopt when empty in the message. keyValue is read whenever an
  // ordering key is configured (one lane too): the browser finds a
  // patient's messages by it.
  store::MessageColumns columns;
};

MessageKeys keysOf(const KeySpec& spec, std::string_view payload);

// A dedupe key as the store keeps it (a text column under a unique index):
// a key the database would refuse would answer AE to that message forever,
// so ISO-8859-1 bytes become UTF-8, NUL becomes \X00\, and a key longer
// than kMaxStoredKeyBytes becomes "sha256:<hex>" (the index's rows have a
// size limit). Keys that differ only in how they spell a character
// (ISO-8859-1 or UTF-8, NUL or \X00\) become equal; others stay apart.
// store::searchableText, which the browser's columns and searches use too.
constexpr size_t kMaxStoredKeyBytes = store::kMaxSearchableBytes;
std::string storableKey(std::string_view raw);

// The value at `path` in a message of `format`, as UTF-8 text read with the
// charset rule above ("" when absent or the message can't be read).
std::string valueAt(config::Format format, std::string_view payload, std::string_view path,
                    config::Charset charset = config::Charset::Auto);

// Whether an HL7 MSH-18 value names UTF-8 ("UNICODE UTF-8", "UTF-8", "UTF8";
// anything else set names ISO-8859-1 or a charset read as it).
bool namesUtf8(std::string_view msh18);

}  // namespace ductus::intake
