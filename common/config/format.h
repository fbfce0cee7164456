// The project format written once: every mapping of ductus.yaml,
// resources.yaml and interface.yaml (a Section), each key it may hold (a
// Key: its shape, bounds, default and meaning), and the keys this version
// refuses as not supported yet. The loader checks every mapping's keys
// against its Section (YamlReader::map) and takes each bounded value's
// limits from its Key; `ductus types` writes the JSON Schemas and
// `ductus reference docs` configuration.md from the same table, so an
// editor's schema, the reference and `validate` can't disagree about
// which keys exist.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ductus::config {

// The shape of a key's value.
enum class ValueKind {
  Text,         // a string
  Whole,        // a whole number from min to max
  Flag,         // true or false
  Duration,     // 250ms, 5s, 10m, 1h, 2d; min and max in milliseconds
  Period,       // a Duration, or whole years: 6y (min and max in milliseconds)
  Size,         // 512KB, 64MB, 1GB; min and max in bytes
  Address,      // host:port (and the words in `choices`, e.g. off)
  Host,         // a host name or an IP address
  Choice,       // one of `choices`
  Section,      // a mapping: `section`'s keys
  Named,        // a mapping of names (letters, digits, _ and -) to `section`s
  SectionList,  // a list of `section`s
  TextList,     // a list of strings
  TextOrList,   // a string, or a list of strings
  WholeList,    // a list of whole numbers from min to max
  TextMap,      // a mapping of names to strings (headers)
  WholeMap,     // a mapping of names to whole numbers from min to max
};

enum class SectionId {
  // ductus.yaml
  Engine,
  Database,
  Api,
  ListenerTls,
  ClientCertificates,
  Auth,
  Ldap,
  LdapBind,
  LdapUsers,
  LdapGroups,
  Oidc,
  Isolates,
  Limits,
  Audit,
  Events,
  Secrets,
  Alerts,
  Smtp,
  Channel,
  Rule,
  Heartbeat,
  QuietHours,
  AlertCertificates,
  // resources.yaml
  Resources,
  DatabaseResource,
  ApiResource,
  Certificate,
  // interface.yaml
  Interface,
  Source,
  MllpSource,
  HttpSource,
  FileSource,
  SftpSource,
  ScheduleSource,
  InternalSource,
  Ordering,
  Dedupe,
  Destination,
  MllpTarget,
  ConnectTls,
  HttpTarget,
  FileTarget,
  SftpTarget,
  Retry,
  RateLimit,
  Monitor,
  DestinationMonitor,
  Behind,
  ActiveWithin,
  ActiveBy,
  Count
};

// A key of the project format this version does not implement yet: refused
// with what it is for, never silently ignored.
struct Unsupported {
  std::string_view key;
  std::string_view what;
};

struct Key {
  std::string_view name;
  ValueKind kind = ValueKind::Text;
  std::string_view meaning;
  std::string_view defaultText = {};  // as a person reads it; "" when none
  bool required = false;
  bool substituted = false;                    // ${env:...} and ${secret:...} allowed
  uint64_t min = 0, max = 0;                   // Whole, WholeList, WholeMap, Duration, Period, Size
  std::vector<std::string_view> choices = {};  // Choice; Address: words besides host:port
  SectionId section = SectionId::Count;        // Section, Named, SectionList
  // A Section key that may also be written as one value of this kind
  // (database: URL, active_within: 30m, tls: true); Section when none.
  ValueKind orScalar = ValueKind::Section;

  // Fluent setters for the table.
  Key req() const;
  Key subst() const;
  Key def(std::string_view text) const;
  Key or_(ValueKind scalar) const;
};

struct Section {
  SectionId id = SectionId::Count;
  std::string_view file;  // "ductus.yaml", "resources.yaml", "interface.yaml"
  std::string_view path;  // where it is in its file: "source.mllp", "destinations.<name>"
  std::string_view meaning;
  std::vector<Key> keys;
  std::vector<Unsupported> unsupported = {};
  // Keys of which exactly one must be given (a source's kind, a
  // destination's); empty: no such rule.
  std::vector<std::string_view> exactlyOne = {};

  // The key named `name`; aborts when the table has none (a loader asking
  // for a key the table doesn't list is a bug found by the first test).
  const Key& key(std::string_view name) const;
  bool has(std::string_view name) const;
};

const Section& section(SectionId id);
// The section's name in the schemas' definitions: "MllpSource".
std::string_view sectionName(SectionId id);
// Every section, in SectionId order.
const std::vector<Section>& allSections();

// The three files and their root sections.
struct FileFormat {
  std::string_view file;        // "interface.yaml"
  std::string_view schemaName;  // "interface": interface.schema.json
  std::string_view title;
  SectionId root;
};
const std::vector<FileFormat>& projectFiles();

// How the reference names a kind: "text", "whole number", "duration", ...
std::string_view kindName(ValueKind kind);
// A key's bounds as people read them: "1 to 65535", "100ms to 1h",
// "1KB to 64MB"; "" when it has none.
std::string boundText(const Key& key);
// Its words: "hl7v2 | json | text"; "" when it has none.
std::string choicesText(const Key& key);

}  // namespace ductus::config
