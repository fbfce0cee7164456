#include "intake/message_keys.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <vector>

#include "common/hl7/message.h"
#include "common/partition.h"
#include "common/text.h"

namespace ductus::intake {
namespace {

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// A JSON path ("a.b", "$.a.b", "ids[0]", "a.list[2].id") as its steps: an
// object member by name or an array element by index. A path that can't
// be read ("a[x]", "a[") has no steps and finds nothing.
struct JsonStep {
  std::string key;
  std::optional<size_t> index;
  bool operator==(const JsonStep&) const = default;
};

std::vector<JsonStep> jsonPath(std::string_view path) {
  if (path.rfind("$.", 0) == 0) path.remove_prefix(2);
  std::vector<JsonStep> steps;
  size_t i = 0;
  while (i < path.size()) {
    if (path[i] == '.') {
      ++i;
      continue;
    }
    if (path[i] == '[') {
      size_t close = path.find(']', i);
      if (close == std::string_view::npos || close == i + 1) return {};
      size_t idx = 0;
      for (char c : path.substr(i + 1, close - i - 1)) {
        if (c < '0' || c > '9' || idx > (SIZE_MAX - 9) / 10) return {};
        idx = idx * 10 + static_cast<size_t>(c - '0');
      }
      steps.push_back({{}, idx});
      i = close + 1;
      continue;
    }
    size_t end = path.find_first_of(".[", i);
    if (end == std::string_view::npos) end = path.size();
    steps.push_back({std::string(path.substr(i, end - i)), std::nullopt});
    i = end;
  }
  return steps;
}

// Reads the values at a few JSON paths in one pass over the text, keeping
// only the path walked so far (nlohmann's SAX interface): intake runs on
// the supervisor's loop, and a body may be 64 MB, which a DOM would hold
// several times over. It stops once every path has its value. A value is
// written as it always was (a string as itself, anything else as compact
// JSON, null as ""); an object or array at a path is rare enough to be
// read again as a DOM of that part alone (`wantsTree`).
class JsonPathReader : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit JsonPathReader(std::vector<std::vector<JsonStep>> paths)
      : paths_(std::move(paths)), found_(paths_.size()) {}

  struct Found {
    bool done = false;
    std::string value;
  };
  const std::vector<Found>& found() const { return found_; }

  bool null() override { return scalar(nlohmann::json(nullptr)); }
  bool boolean(bool v) override { return scalar(nlohmann::json(v)); }
  bool number_integer(number_integer_t v) override { return scalar(nlohmann::json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return scalar(nlohmann::json(v)); }
  bool number_float(number_float_t v, const string_t&) override {
    return scalar(nlohmann::json(v));
  }
  bool string(string_t& v) override { return scalar(nlohmann::json(std::move(v))); }
  bool binary(binary_t&) override { return scalar(nlohmann::json(nullptr)); }

  bool start_object(std::size_t) override { return open(Frame{true, {}, 0}); }
  bool key(string_t& k) override {
    if (!building_.empty()) return building_.key(k);
    stack_.back().key = std::move(k);
    return true;
  }
  bool end_object() override { return close(true); }
  bool start_array(std::size_t) override { return open(Frame{false, {}, 0}); }
  bool end_array() override { return close(false); }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    failed_ = true;
    return false;
  }
  bool failed() const { return failed_ && !allFound(); }

 private:
  struct Frame {
    bool object;
    std::string key;   // the member being read, in an object
    size_t index = 0;  // the element being read, in an array
  };

  // A container that is itself a path's value, built as a DOM of that part
  // alone by nlohmann's own DOM builder, fed the same events, so it is
  // written as it always was (members sorted, the last of a repeated one).
  struct Subtree {
    std::optional<nlohmann::json> doc;
    std::optional<nlohmann::detail::json_sax_dom_parser<nlohmann::json>> builder;
    size_t depth = 0;
    size_t path = 0;
    bool empty() const { return !builder.has_value(); }
    bool key(std::string& k) { return builder->key(k); }
  };

  // Whether the value about to be read sits at path p.
  bool at(const std::vector<JsonStep>& p) const {
    if (p.empty() || p.size() != stack_.size()) return false;
    for (size_t d = 0; d < p.size(); ++d) {
      const Frame& f = stack_[d];
      if (f.object ? (p[d].index || p[d].key != f.key) : (!p[d].index || *p[d].index != f.index))
        return false;
    }
    return true;
  }

  // Which path, not yet found, the value about to be read is the value of.
  std::optional<size_t> wanted() const {
    for (size_t i = 0; i < paths_.size(); ++i)
      if (!found_[i].done && at(paths_[i])) return i;
    return std::nullopt;
  }

  // After a value: the next array element.
  void advance() {
    if (!stack_.empty() && !stack_.back().object) ++stack_.back().index;
  }

  bool scalar(nlohmann::json v) {
    if (!building_.empty()) return feed(std::move(v));
    if (wanted()) {
      std::string value = v.is_null() ? "" : v.is_string() ? v.get<std::string>() : v.dump();
      for (size_t i = 0; i < paths_.size(); ++i)
        if (!found_[i].done && at(paths_[i])) found_[i] = {true, value};
    }
    advance();
    return !allFound();
  }

  bool feed(nlohmann::json v) {
    auto& b = *building_.builder;
    if (v.is_null()) return b.null();
    if (v.is_boolean()) return b.boolean(v.get<bool>());
    if (v.is_number_integer() && !v.is_number_unsigned())
      return b.number_integer(v.get<nlohmann::json::number_integer_t>());
    if (v.is_number_unsigned())
      return b.number_unsigned(v.get<nlohmann::json::number_unsigned_t>());
    if (v.is_number_float()) return b.number_float(v.get<double>(), "");
    auto s = v.get<std::string>();
    return b.string(s);
  }

  bool open(Frame f) {
    if (!building_.empty()) {
      ++building_.depth;
      return f.object ? building_.builder->start_object(static_cast<size_t>(-1))
                      : building_.builder->start_array(static_cast<size_t>(-1));
    }
    if (auto i = wanted()) {
      building_.doc.emplace();
      building_.builder.emplace(*building_.doc, false);
      building_.depth = 1;
      building_.path = *i;
      return f.object ? building_.builder->start_object(static_cast<size_t>(-1))
                      : building_.builder->start_array(static_cast<size_t>(-1));
    }
    if (stack_.size() >= kMaxDepth) {  // nlohmann has no depth limit of its own
      failed_ = true;
      return false;
    }
    stack_.push_back(std::move(f));
    return true;
  }

  bool close(bool object) {
    if (!building_.empty()) {
      --building_.depth;
      bool ok = object ? building_.builder->end_object() : building_.builder->end_array();
      if (building_.depth == 0) {
        std::string value = building_.doc->dump();
        for (size_t i = 0; i < paths_.size(); ++i)
          if (!found_[i].done && paths_[i] == paths_[building_.path]) found_[i] = {true, value};
        building_.builder.reset();
        building_.doc.reset();
        advance();
        return ok && !allFound();
      }
      return ok;
    }
    if (!stack_.empty()) stack_.pop_back();
    advance();
    return true;
  }

  bool allFound() const {
    for (auto& f : found_)
      if (!f.done) return false;
    return true;
  }

  static constexpr size_t kMaxDepth = 512;
  std::vector<std::vector<JsonStep>> paths_;
  std::vector<Found> found_;
  std::vector<Frame> stack_;
  Subtree building_;
  bool failed_ = false;
};

// What an HL7 message's header says, for the browser's columns.
struct Hl7Header {
  std::string type;       // MSH-9, components joined by '^'
  std::string controlId;  // MSH-10
  bool latin1 = false;    // read as ISO-8859-1 (forced, or MSH-18)
};

// The values at `paths` in one message, read in one pass ("" for a path
// that is absent or a message that can't be read); with `header`, an HL7
// message's MSH-9, MSH-10 and charset too.
std::vector<std::string> valuesAt(config::Format format, std::string_view payload,
                                  const std::vector<std::string_view>& paths,
                                  config::Charset charset, Hl7Header* header = nullptr) {
  std::vector<std::string> values(paths.size());
  if (format == config::Format::Hl7v2) {
    if (header) header->latin1 = charset == config::Charset::Latin1;
    auto m = hl7::MessageView::parse(payload);
    if (!m) return values;
    bool latin1 = charset == config::Charset::Latin1;
    if (charset == config::Charset::Auto) {
      std::string_view declared = trimmed(m->get("MSH.18"));
      latin1 = !declared.empty() && !namesUtf8(declared);
    }
    // Bytes that are not UTF-8 are read as ISO-8859-1 whatever is declared,
    // as the SDK does (nothing replaced, the same bytes the same text).
    auto text = [latin1](std::string_view raw) { return latin1 ? latin1AsUtf8(raw) : asText(raw); };
    for (size_t i = 0; i < paths.size(); ++i) values[i] = text(m->get(paths[i]));
    if (header) {
      // One spelling of the type whatever the sender's delimiters, so a
      // search for ADT^A01 finds a "MSH#@!*&" sender's ADT@A01 too.
      std::string type(m->get("MSH.9"));
      char component = m->delimiters().component;
      if (component != '^')
        for (char& c : type)
          if (c == component) c = '^';
      header->type = text(type);
      header->controlId = text(m->get("MSH.10"));
      header->latin1 = latin1;
    }
  } else if (format == config::Format::Json) {
    std::vector<std::vector<JsonStep>> steps;
    for (auto p : paths) steps.push_back(jsonPath(p));
    JsonPathReader reader(std::move(steps));
    // ISO-8859-1 read as its characters, as the HTTP body check and the
    // SDK read it: nlohmann refuses it as it is, which lost the keys (a
    // duplicate stored, a patient's messages in two lanes).
    if (charset != config::Charset::Latin1 && isUtf8(payload)) {
      nlohmann::json::sax_parse(payload.begin(), payload.end(), &reader);
    } else {
      std::string text = latin1AsUtf8(payload);
      nlohmann::json::sax_parse(text.begin(), text.end(), &reader);
    }
    if (!reader.failed())
      for (size_t i = 0; i < paths.size(); ++i) values[i] = reader.found()[i].value;
  }
  return values;
}

}  // namespace

std::string valueAt(config::Format format, std::string_view payload, std::string_view path,
                    config::Charset charset) {
  return valuesAt(format, payload, {path}, charset).front();
}

bool namesUtf8(std::string_view msh18) {
  std::string cs = asciiLower(trimmed(msh18));
  return cs == "unicode utf-8" || cs == "unicode utf8" || cs == "utf-8" || cs == "utf8";
}

std::string storableKey(std::string_view raw) { return store::searchableText(raw); }

MessageKeys keysOf(const KeySpec& spec, std::string_view payload) {
  MessageKeys k;
  bool hl7 = spec.format == config::Format::Hl7v2;
  if (spec.charset == config::Charset::Latin1) k.columns.charset = "iso-8859-1";
  // Without keys only HL7 has something to read (its header); other
  // formats read nothing at all, as before the browser's columns.
  if (!spec.orderingKey && !spec.dedupeKey && !hl7) return k;
  std::vector<std::string_view> paths;
  if (spec.orderingKey) paths.push_back(*spec.orderingKey);
  if (spec.dedupeKey) paths.push_back(*spec.dedupeKey);
  Hl7Header header;
  auto values = valuesAt(spec.format, payload, paths, spec.charset, hl7 ? &header : nullptr);
  auto column = [](const std::string& v) {
    return v.empty() ? std::nullopt : std::optional<std::string>(store::searchableText(v));
  };
  if (spec.orderingKey) {
    if (spec.partitions > 1)
      k.lane = static_cast<int32_t>(partition_of(values.front(), spec.partitions));
    k.columns.keyValue = column(values.front());
  }
  if (spec.dedupeKey && !values.back().empty()) k.dedupe = storableKey(values.back());
  if (hl7) {
    k.columns.type = column(header.type);
    k.columns.controlId = column(header.controlId);
    if (header.latin1) k.columns.charset = "iso-8859-1";
  }
  return k;
}

}  // namespace ductus::intake
