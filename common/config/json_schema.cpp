#include "common/config/json_schema.h"

#include <nlohmann/json.hpp>
#include <set>

namespace ductus::config {
namespace {

using Json = nlohmann::ordered_json;

std::string definitionRef(SectionId id) { return "#/definitions/" + std::string(sectionName(id)); }

// What an editor shows beside a key: its meaning, words, bounds, default.
std::string describe(const Key& k) {
  std::string d(k.meaning);
  if (auto words = choicesText(k); !words.empty() && k.kind == ValueKind::Choice)
    d += " (" + words + ")";
  if (auto bound = boundText(k); !bound.empty()) d += "; " + bound;
  if (!k.defaultText.empty()) d += "; default: " + std::string(k.defaultText);
  if (k.substituted) d += "; ${env:NAME} and ${secret:NAME} allowed";
  if (k.required) d += "; required";
  return d;
}

Json wholeSchema(const Key& k) {
  return Json{{"type", "integer"}, {"minimum", k.min}, {"maximum", k.max}};
}

Json textSchema(const Key& k) {
  if (!k.choices.empty()) return Json{{"enum", Json(k.choices)}};
  return Json{{"type", "string"}};
}

// A value of `kind` as written in YAML.
Json valueSchema(const Key& k, ValueKind kind) {
  switch (kind) {
    case ValueKind::Text:
    case ValueKind::Host:
      return Json{{"type", "string"}};
    case ValueKind::Whole:
      return wholeSchema(k);
    case ValueKind::Flag:
      return Json{{"type", "boolean"}};
    case ValueKind::Duration:
      return Json{{"type", "string"}, {"pattern", "^[0-9]{1,12}(ms|s|m|h|d)$"}};
    case ValueKind::Period:
      return Json{{"type", "string"}, {"pattern", "^([0-9]{1,12}(ms|s|m|h|d)|[0-9]{1,3}y)$"}};
    case ValueKind::Size:
      return Json{{"type", "string"}, {"pattern", "^[0-9]{1,12}(B|KB|MB|GB)$"}};
    case ValueKind::Address: {
      Json hostPort{{"type", "string"}, {"pattern", "^.+:[0-9]{1,5}$"}};
      if (k.choices.empty()) return hostPort;
      return Json{{"anyOf", Json::array({hostPort, Json{{"enum", Json(k.choices)}}})}};
    }
    case ValueKind::Choice:
      return Json{{"enum", Json(k.choices)}};
    case ValueKind::Section:
      return Json{{"$ref", definitionRef(k.section)}};
    case ValueKind::Named:
      return Json{{"type", "object"},
                  {"additionalProperties", Json{{"$ref", definitionRef(k.section)}}}};
    case ValueKind::SectionList:
      return Json{{"type", "array"}, {"items", Json{{"$ref", definitionRef(k.section)}}}};
    case ValueKind::TextList:
      return Json{{"type", "array"}, {"items", textSchema(k)}};
    case ValueKind::TextOrList:
      return Json{{"anyOf", Json::array({textSchema(k),
                                         Json{{"type", "array"}, {"items", textSchema(k)}}})}};
    case ValueKind::WholeList:
      return Json{{"type", "array"}, {"minItems", 1}, {"items", wholeSchema(k)}};
    case ValueKind::TextMap:
      return Json{{"type", "object"}, {"additionalProperties", textSchema(k)}};
    case ValueKind::WholeMap:
      return Json{{"type", "object"}, {"additionalProperties", wholeSchema(k)}};
  }
  return Json::object();
}

Json keySchema(const Key& k) {
  Json value = valueSchema(k, k.kind);
  if (k.kind == ValueKind::Section && k.orScalar != ValueKind::Section) {
    Json scalar = valueSchema(k, k.orScalar);
    value = Json{{"anyOf", Json::array({value, scalar})}};
  }
  Json out{{"description", describe(k)}};
  for (auto& [name, v] : value.items()) out[name] = v;
  return out;
}

Json sectionSchema(const Section& s) {
  Json props = Json::object();
  Json required = Json::array();
  for (const auto& k : s.keys) {
    props[std::string(k.name)] = keySchema(k);
    if (k.required) required.push_back(std::string(k.name));
  }
  // `internal:` (nothing after it) is an empty mapping to the loader.
  Json out{{"description", std::string(s.meaning)}};
  if (required.empty())
    out["type"] = Json::array({"object", "null"});
  else
    out["type"] = "object";
  out["properties"] = props;
  out["additionalProperties"] = false;
  if (!required.empty()) out["required"] = required;
  if (!s.exactlyOne.empty()) {
    Json one = Json::array();
    for (auto name : s.exactlyOne) one.push_back(Json{{"required", Json::array({name})}});
    out["oneOf"] = one;
  }
  return out;
}

// The sections reachable from `root`, in table order.
void reach(SectionId id, std::set<SectionId>& seen) {
  if (!seen.insert(id).second) return;
  for (const auto& k : section(id).keys)
    if (k.section != SectionId::Count) reach(k.section, seen);
}

}  // namespace

std::string jsonSchema(const FileFormat& file) {
  std::set<SectionId> used;
  reach(file.root, used);
  Json defs = Json::object();
  for (SectionId id : used)
    if (id != file.root) defs[std::string(sectionName(id))] = sectionSchema(section(id));
  Json root = sectionSchema(section(file.root));
  Json out{{"$schema", "http://json-schema.org/draft-07/schema#"},
           {"title", std::string(file.title)}};
  for (auto& [name, v] : root.items()) out[name] = v;
  out["definitions"] = defs;
  return out.dump(2) + "\n";
}

}  // namespace ductus::config
