#include "intake/message_keys.h"

#include <nlohmann/json.hpp>

#include <optional>

#include "common/hl7/message.h"
#include "common/partition.h"
#include "common/sha256.h"
#include "common/text.h"

namespace ductus::intake {
namespace {

// The value at a JSON path ("a.b", "$.a.b", "ids[0]") in a parsed document.
std::string jsonAt(const nlohmann::json& doc, std::string_view path) {
  if (doc.is_discarded()) return "";
  if (path.rfind("$.", 0) == 0) path.remove_prefix(2);
  const nlohmann::json* at = &doc;
  size_t i = 0;
  while (i < path.size() && at) {
    if (path[i] == '.') {
      ++i;
      continue;
    }
    if (path[i] == '[') {
      size_t close = path.find(']', i);
      if (close == std::string_view::npos || !at->is_array()) return "";
      size_t idx = std::strtoul(std::string(path.substr(i + 1, close - i - 1)).c_str(), nullptr, 10);
      at = idx < at->size() ? &(*at)[idx] : nullptr;
      i = close + 1;
      continue;
    }
    size_t end = path.find_first_of(".[", i);
    if (end == std::string_view::npos) end = path.size();
    std::string key(path.substr(i, end - i));
    if (!at->is_object() || !at->contains(key)) return "";
    at = &(*at)[key];
    i = end;
  }
  if (!at || at->is_null()) return "";
  if (at->is_string()) return at->get<std::string>();
  return at->dump();
}

// A message read once for all the keys asked of it (the ordering key and
// the dedupe key used to parse it a time each).
class KeyReader {
 public:
  KeyReader(config::Format format, std::string_view payload) : format_(format) {
    if (format == config::Format::Hl7v2) {
      if (auto m = hl7::MessageView::parse(payload)) hl7_.emplace(std::move(*m));
    } else if (format == config::Format::Json) {
      // ISO-8859-1 read as its characters, as the HTTP body check and the
      // SDK read it: nlohmann refuses it as it is, which lost the keys (a
      // duplicate stored, a patient's messages in two lanes).
      if (isUtf8(payload)) {
        json_ = nlohmann::json::parse(payload.begin(), payload.end(), nullptr, false);
      } else {
        json_ = nlohmann::json::parse(asText(payload), nullptr, false);
      }
    }
  }

  std::string at(std::string_view path) const {
    switch (format_) {
      case config::Format::Hl7v2:
        return hl7_ ? std::string(hl7_->get(path)) : "";
      case config::Format::Json:
        return jsonAt(json_, path);
      default:
        return "";
    }
  }

 private:
  config::Format format_;
  std::optional<hl7::MessageView> hl7_;
  nlohmann::json json_;
};

}  // namespace

std::string valueAt(config::Format format, std::string_view payload, std::string_view path) {
  return KeyReader(format, payload).at(path);
}

std::string storableKey(std::string_view raw) {
  std::string text = asDatabaseText(raw);
  if (text.size() > kMaxStoredKeyBytes) return "sha256:" + sha256Hex(text);
  return text;
}

MessageKeys keysOf(const KeySpec& spec, std::string_view payload) {
  MessageKeys k;
  bool ordered = spec.orderingKey && spec.partitions > 1;
  if (!ordered && !spec.dedupeKey) return k;
  KeyReader message(spec.format, payload);
  if (ordered)
    k.lane = static_cast<int32_t>(partition_of(message.at(*spec.orderingKey), spec.partitions));
  if (spec.dedupeKey) {
    std::string v = message.at(*spec.dedupeKey);
    if (!v.empty()) k.dedupe = storableKey(v);
  }
  return k;
}

}  // namespace ductus::intake
