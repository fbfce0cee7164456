#include "intake/message_keys.h"

#include <nlohmann/json.hpp>

#include "common/hl7/message.h"
#include "common/partition.h"
#include "common/sha256.h"
#include "common/text.h"

namespace ductus::intake {
namespace {

std::string jsonValueAt(std::string_view payload, std::string_view path) {
  // ISO-8859-1 read as its characters, as the HTTP body check and the SDK
  // read it: nlohmann refuses it as it is, which lost the keys (a duplicate
  // stored, a patient's messages in two lanes).
  std::string text;
  if (!isUtf8(payload)) {
    text = asText(payload);
    payload = text;
  }
  auto doc = nlohmann::json::parse(payload.begin(), payload.end(), nullptr, false);
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

}  // namespace

std::string valueAt(config::Format format, std::string_view payload, std::string_view path) {
  switch (format) {
    case config::Format::Hl7v2: {
      auto msg = hl7::MessageView::parse(payload);
      if (!msg) return "";
      return std::string(msg->get(path));
    }
    case config::Format::Json:
      return jsonValueAt(payload, path);
    default:
      return "";
  }
}

std::string storableKey(std::string_view raw) {
  std::string text = asDatabaseText(raw);
  if (text.size() > kMaxStoredKeyBytes) return "sha256:" + sha256Hex(text);
  return text;
}

MessageKeys keysOf(const KeySpec& spec, std::string_view payload) {
  MessageKeys k;
  if (spec.orderingKey && spec.partitions > 1) {
    k.lane = static_cast<int32_t>(
        partition_of(valueAt(spec.format, payload, *spec.orderingKey), spec.partitions));
  }
  if (spec.dedupeKey) {
    std::string v = valueAt(spec.format, payload, *spec.dedupeKey);
    if (!v.empty()) k.dedupe = storableKey(v);
  }
  return k;
}

}  // namespace ductus::intake
