#include "common/config/model.h"

namespace ductus::config {

std::string Diagnostic::toString() const {
  std::string s = file;
  if (line > 0) {
    s.append(":").append(std::to_string(line));
    if (column > 0) s.append(":").append(std::to_string(column));
  }
  s += ": ";
  if (!keyPath.empty()) s += keyPath + ": ";
  return s + message;
}

const char* formatName(Format f) {
  switch (f) {
    case Format::Hl7v2: return "hl7v2";
    case Format::Json: return "json";
    case Format::Text: return "text";
    case Format::Csv: return "csv";
    case Format::Xml: return "xml";
  }
  return "?";
}

const char* retentionName(Retention r) {
  switch (r) {
    case Retention::OneWeek: return "1w";
    case Retention::ThreeWeeks: return "3w";
    case Retention::SevenWeeks: return "7w";
  }
  return "?";
}

const char* sourceKind(const Source& s) {
  constexpr const char* kNames[] = {"mllp", "http", "file", "sftp", "schedule", "internal"};
  return kNames[s.index()];
}

const char* targetKind(const Target& t) {
  constexpr const char* kNames[] = {"mllp", "http", "file", "sftp", "interface"};
  return kNames[t.index()];
}

const InterfaceConfig* Project::find(std::string_view name) const {
  for (auto& i : interfaces)
    if (i.name == name) return &i;
  return nullptr;
}

}  // namespace ductus::config
