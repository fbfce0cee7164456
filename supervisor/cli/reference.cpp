#include "supervisor/cli/reference.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <system_error>
#include <vector>

#include "api/audit/actions.h"
#include "api/metrics.h"
#include "api/routes.h"
#include "common/command_line.h"
#include "common/config/format.h"
#include "common/config/json_schema.h"
#include "ctl/program.h"
#include "supervisor/cli/program.h"

namespace ductus::supervisor::reference {
namespace {

constexpr std::string_view kWritten =
    "Written by `ductus reference docs` from the binary itself; do not edit. CI runs\n"
    "`ductus reference docs --check docs/reference`.\n";

// ---- the command lines ----------------------------------------------------

struct Program {
  std::unique_ptr<CLI::App> app;
  int exitCode = 0;
};

// Both programs' parsers, as their main()s build them. The control
// socket's default depends on who runs and where (ctl::defaultControlPath):
// the reference says the one under systemd, the packaged engine's, so the
// files are the same whoever writes them.
std::vector<std::unique_ptr<Program>> programs() {
  setenv("RUNTIME_DIRECTORY", "/run/ductus", 1);
  std::vector<std::unique_ptr<Program>> out;
  auto ductus = std::make_unique<Program>();
  ductus->app = makeDuctusProgram(ductus->exitCode);
  out.push_back(std::move(ductus));
  auto ctl = std::make_unique<Program>();
  ctl->app = ctl::makeCtlProgram(ctl->exitCode);
  out.push_back(std::move(ctl));
  return out;
}

std::vector<const CLI::App*> commandsOf(const CLI::App& app) {
  std::vector<const CLI::App*> out;
  for (const CLI::App* c : app.get_subcommands([](const CLI::App*) { return true; }))
    if (!c->get_group().empty()) out.push_back(c);  // an empty group is hidden
  return out;
}

// The program and every command under it, depth first, in the order --help
// lists them.
void walk(const CLI::App& app, std::vector<const CLI::App*>& out) {
  out.push_back(&app);
  for (const CLI::App* c : commandsOf(app)) walk(*c, out);
}

std::string firstLine(std::string_view text) {
  return std::string(text.substr(0, text.find('\n')));
}

// "ductus secret set" → "ductus-secret-set"
std::string pageName(const CLI::App& app) {
  std::string name = helpPath(app);
  std::replace(name.begin(), name.end(), ' ', '-');
  return name;
}

std::string anchor(const std::string& heading) {
  std::string a;
  for (char c : heading) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_')
      a += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else if (c == ' ')
      a += '-';
  }
  return a;
}

std::string cliMarkdown() {
  auto all = programs();
  std::ostringstream md;
  md << "# Command line reference\n\n" << kWritten << "\n";
  md << "Each section is what `COMMAND --help` prints; `man ductus-COMMAND` has the same.\n\n";
  for (auto& p : all) {
    std::vector<const CLI::App*> commands;
    walk(*p->app, commands);
    for (const CLI::App* c : commands) {
      std::string path = helpPath(*c);
      std::string indent(2 * (std::count(path.begin(), path.end(), ' ')), ' ');
      md << indent << "- [`" << path << "`](#" << anchor(path) << ")";
      if (c != p->app.get() && !c->get_description().empty())
        md << ": " << firstLine(c->get_description());
      md << "\n";
    }
  }
  for (auto& p : all) {
    std::vector<const CLI::App*> commands;
    walk(*p->app, commands);
    for (const CLI::App* c : commands) {
      std::string path = helpPath(*c);
      md << "\n" << (c == p->app.get() ? "## " : "### ") << path << "\n\n```text\n";
      std::string help = helpOf(*c);
      while (!help.empty() && help.back() == '\n') help.pop_back();
      md << help << "\n```\n";
    }
  }
  return md.str();
}

// ---- man pages ------------------------------------------------------------

// Text for roff: backslashes escaped, a line that would start with a
// control character protected.
std::string roff(std::string_view text) {
  std::string out;
  bool lineStart = true;
  for (char c : text) {
    if (lineStart && (c == '.' || c == '\'')) out += "\\&";
    if (c == '\\')
      out += "\\e";
    else
      out += c;
    lineStart = c == '\n';
  }
  return out;
}

// Option and command names: their hyphens are minus signs.
std::string roffName(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (c == '-')
      out += "\\-";
    else if (c == '\\')
      out += "\\e";
    else
      out += c;
  }
  return out;
}

// A paragraph per blank-line-separated block; each line of a block kept
// as written (footers are laid out by hand).
std::string roffParagraphs(std::string_view text) {
  std::string out;
  std::istringstream in{std::string(text)};
  std::string line;
  bool open = false;
  while (std::getline(in, line)) {
    if (line.empty()) {
      open = false;
      continue;
    }
    if (!open)
      out += ".PP\n";
    else
      out += ".br\n";
    open = true;
    out += roff(line) + "\n";
  }
  return out;
}

std::string optionNames(const CLI::Option& o) {
  if (o.get_positional()) return o.get_name(true);
  std::string names;
  for (auto& s : o.get_snames()) names += (names.empty() ? "-" : ", -") + s;
  for (auto& l : o.get_lnames()) names += (names.empty() ? "--" : ", --") + l;
  return names;
}

std::string usageOf(const CLI::App& app) {
  std::string help = helpOf(app);
  std::istringstream in(help);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("Usage: ", 0) == 0) return line.substr(7);
  return helpPath(app);
}

std::string manPage(const CLI::App& app, const CLI::App& program) {
  std::string name = pageName(app);
  std::string upper = name;
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  std::string description = app.get_description();
  if (&app == &program && description.empty()) description = program.get_name();
  std::ostringstream m;
  m << ".\\\" Written by `ductus reference man` from the program's parser; do not edit.\n";
  m << ".TH " << roffName(upper) << " 1 \"\" \"Ductus\" \"Ductus manual\"\n";
  m << ".SH NAME\n" << roffName(name) << " \\- " << roff(firstLine(description)) << "\n";
  m << ".SH SYNOPSIS\n.nf\n" << roff(usageOf(app)) << "\n.fi\n";
  m << ".SH DESCRIPTION\n" << roffParagraphs(description);
  if (!app.get_footer().empty()) m << roffParagraphs(app.get_footer());

  auto options = app.get_options([](const CLI::Option* o) { return !o->get_group().empty(); });
  std::vector<const CLI::Option*> positionals, flags;
  for (const CLI::Option* o : options) (o->get_positional() ? positionals : flags).push_back(o);
  auto item = [&m](const CLI::Option& o) {
    m << ".TP\n.B " << roffName(optionNames(o));
    if (!o.get_positional() && !o.get_type_name().empty() && o.get_expected_max() != 0)
      m << " \\fI" << roff(o.get_type_name()) << "\\fR";
    m << "\n" << roff(o.get_description());
    std::string extra;
    if (!o.get_default_str().empty()) extra += "default: " + o.get_default_str();
    if (!o.get_envname().empty())
      extra +=
          (extra.empty() ? "" : "; ") + std::string("from $") + o.get_envname() + " when not given";
    if (!extra.empty()) m << " (" << roff(extra) << ")";
    m << "\n";
  };
  if (!positionals.empty()) {
    m << ".SH ARGUMENTS\n";
    for (auto* o : positionals) item(*o);
  }
  if (!flags.empty()) {
    m << ".SH OPTIONS\n";
    for (auto* o : flags) item(*o);
  }
  auto commands = commandsOf(app);
  if (!commands.empty()) {
    m << ".SH COMMANDS\n";
    for (const CLI::App* c : commands) {
      m << ".TP\n.B " << roffName(c->get_name()) << "\n"
        << roff(firstLine(c->get_description())) << " (\\fB" << roffName(pageName(*c))
        << "\\fR(1))\n";
    }
  }
  m << ".SH SEE ALSO\n";
  std::vector<std::string> see;
  if (const CLI::App* parent = app.get_parent()) see.push_back(pageName(*parent));
  if (&app == &program) see.push_back(program.get_name() == "ductus" ? "ductusctl" : "ductus");
  std::string line;
  for (auto& s : see) line += (line.empty() ? "" : ",\n") + ("\\fB" + roffName(s) + "\\fR(1)");
  m << line << "\n";
  return m.str();
}

// Text for a Markdown table cell or line: `|` and `<` would be read as
// markup ("destinations.<name>" as an HTML tag).
std::string cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|')
      out += "\\|";
    else if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '\n')
      out += ' ';
    else
      out += c;
  }
  return out;
}

// ---- the REST API ---------------------------------------------------------

std::string whoMayCall(const api::Requirement& r) {
  if (r.anonymous) return "anyone (no credentials)";
  std::string who = std::string(api::roleName(r.role));
  if (r.role != api::Role::Admin) who += " or higher";
  if (r.permissions & api::kPayloads) who += ", with the payloads permission";
  if (r.permissions & api::kAudit) who += ", with the audit permission";
  return who;
}

// "an object: a, b, c" from a schema's JSON text.
std::string schemaSummary(const std::string& text) {
  if (text.empty()) return "";
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return "";
  auto fields = [](const nlohmann::json& o) {
    std::string out;
    if (o.contains("properties") && o["properties"].is_object())
      for (auto& [k, v] : o["properties"].items()) out += (out.empty() ? "`" : ", `") + k + "`";
    return out;
  };
  std::string type = j.value("type", "");
  if (type == "array" && j.contains("items")) {
    std::string f = fields(j["items"]);
    return f.empty() ? "a list" : "a list of objects: " + f;
  }
  std::string f = fields(j);
  if (!f.empty()) return "an object: " + f;
  return type.empty() ? "" : "a " + type;
}

std::string apiMarkdown() {
  std::vector<api::Route> routes = api::allRoutes({});
  std::ostringstream md;
  md << "# REST API reference\n\n" << kWritten << "\n";
  md << "Every operation the API answers, from the route table the server serves\n"
        "(`GET /api/v1/openapi.json` has the full schemas). An operation that changes\n"
        "something writes an audit row ([audit.md](audit.md)); a browser session must send\n"
        "`X-Ductus: 1` with it.\n\n";
  md << "| method | path | who may call | what it does |\n| --- | --- | --- | --- |\n";
  for (auto& r : routes)
    md << "| " << r.method << " | [`" << r.path << "`](#" << anchor(r.operationId) << ") | "
       << whoMayCall(r.requirement) << " | " << cell(r.summary) << " |\n";
  for (auto& r : routes) {
    md << "\n### " << r.operationId << "\n\n`" << r.method << " " << r.path
       << "`: " << cell(r.summary) << "\n\n";
    md << "- who may call: " << whoMayCall(r.requirement)
       << (r.requirement.changes ? "; changes something" : "") << "\n";
    std::vector<std::string> pathParams;
    for (size_t at = r.path.find('{'); at != std::string::npos; at = r.path.find('{', at + 1))
      pathParams.push_back(r.path.substr(at + 1, r.path.find('}', at) - at - 1));
    for (auto& p : pathParams) md << "- path parameter `" << p << "`\n";
    for (auto& [name, what] : r.queryParams)
      md << "- query parameter `" << name << "`: " << cell(what) << "\n";
    if (auto body = schemaSummary(r.requestSchema); !body.empty())
      md << "- request body: " << body << "\n";
    std::string answer =
        std::to_string(r.successStatus) + " " +
        (r.responseContentType.empty() ? "application/json" : r.responseContentType);
    if (auto s = schemaSummary(r.responseSchema); !s.empty()) answer += ", " + s;
    md << "- answers: " << answer << "\n";
  }
  return md.str();
}

// ---- the project's files --------------------------------------------------

std::string typeOf(const config::Key& k) {
  using config::ValueKind;
  std::string t(config::kindName(k.kind));
  if (k.kind == ValueKind::Choice) t = config::choicesText(k);
  if (k.kind == ValueKind::Section || k.kind == ValueKind::Named ||
      k.kind == ValueKind::SectionList) {
    std::string target = "[" + std::string(config::sectionName(k.section)) + "](#" +
                         anchor(std::string(config::sectionName(k.section))) + ")";
    t += " (" + target + ")";
    if (k.orScalar != ValueKind::Section)
      t = std::string(config::kindName(k.orScalar)) + ", or a " + t;
  }
  if (!k.choices.empty() && k.kind != ValueKind::Choice) t += ": " + config::choicesText(k);
  return t;
}

std::string configurationMarkdown() {
  using config::SectionId;
  std::ostringstream md;
  md << "# Project files reference\n\n" << kWritten << "\n";
  md << "Every key of `ductus.yaml`, `resources.yaml` and `interfaces/<name>/interface.yaml`,\n"
        "from the table the loader checks each mapping against (`common/config/format.cpp`):\n"
        "a key not listed here is refused by `ductus validate`, as by the JSON Schemas\n"
        "`ductus types --out DIR` writes. Durations are written with their unit (`250ms`,\n"
        "`5s`, `10m`, `1h`, `2d`), sizes too (`512KB`, `64MB`). `${env:NAME}` and\n"
        "`${secret:NAME}` are allowed only where a key says so.\n";
  for (const auto& file : config::projectFiles()) {
    md << "\n## " << file.file << "\n\n" << cell(file.title) << ".\n";
    // The file's sections, in the table's order.
    for (const auto& s : config::allSections()) {
      bool inFile = std::string_view(s.file).find(file.file) != std::string_view::npos;
      if (!inFile) continue;
      // A section shared by two files is described once, under the first.
      if (s.file.find(',') != std::string_view::npos &&
          s.file.substr(0, s.file.find(',')) != file.file)
        continue;
      md << "\n### " << config::sectionName(s.id) << "\n\n";
      if (s.path.empty())
        md << "The whole file: " << cell(s.meaning) << "\n";
      else
        md << "At `" << s.path << "` (" << s.file << "): " << cell(s.meaning) << "\n";
      if (!s.exactlyOne.empty()) {
        md << "\nExactly one of:";
        for (auto k : s.exactlyOne) md << " `" << k << "`";
        md << ".\n";
      }
      if (!s.keys.empty()) {
        md << "\n| key | type | default | bounds | meaning |\n| --- | --- | --- | --- | --- |\n";
        for (const auto& k : s.keys) {
          md << "| `" << k.name << "`" << (k.required ? " (required)" : "") << " | "
             << cell(typeOf(k)) << " | " << cell(k.defaultText) << " | "
             << cell(config::boundText(k)) << " | " << cell(k.meaning)
             << (k.substituted ? "; `${...}` allowed" : "") << " |\n";
        }
      }
      if (!s.unsupported.empty()) {
        md << "\nNot supported yet (refused):";
        for (auto& u : s.unsupported) md << " `" << u.key << "` (" << u.what << ")";
        md << ".\n";
      }
    }
  }
  md << "\n## Editors\n\n"
        "`ductus types --out DIR` writes `ductus.schema.json`, `resources.schema.json` and\n"
        "`interface.schema.json` (JSON Schema draft-07, from the same table). With VS Code's\n"
        "YAML extension, a file's first line names its schema:\n\n"
        "```yaml\n# yaml-language-server: $schema=../../schemas/interface.schema.json\n```\n\n"
        "(a path relative to the file), or map them once in the settings:\n"
        "`\"yaml.schemas\": { \"schemas/interface.schema.json\": \"interfaces/*/interface.yaml\" "
        "}`.\n";
  return md.str();
}

std::string metricsMarkdown() {
  std::ostringstream md;
  md << "# Metrics reference\n\n" << kWritten << "\n";
  md << "The families `GET /api/v1/metrics` serves (Prometheus text format 0.0.4, for a\n"
        "viewer), from the table it renders from. A histogram's buckets are in seconds.\n\n";
  md << "| family | type | labels | meaning |\n| --- | --- | --- | --- |\n";
  for (const auto& f : api::metricFamilies()) {
    std::string labels;
    for (auto l : f.labels) labels += (labels.empty() ? "`" : ", `") + std::string(l) + "`";
    md << "| `" << f.name << "` | " << f.type << " | " << labels << " | " << cell(f.help) << " |\n";
  }
  return md.str();
}

std::string auditMarkdown() {
  std::ostringstream md;
  md << "# Audit log reference\n\n" << kWritten << "\n";
  md << "Every action the audit log records (`GET /api/v1/audit`), from the table the\n"
        "code that writes the rows names them from (`api/audit/actions.h`). A row also has\n"
        "who (actor and kind), how (session, token, control, cli, engine), from which\n"
        "address, when, and an outcome: ok, denied or failed.\n\n";
  md << "| action | target | meaning |\n| --- | --- | --- |\n";
  for (const auto& a : api::kAuditActions)
    md << "| `" << a.name << "` | " << a.target << " | " << cell(a.meaning) << " |\n";
  return md.str();
}

bool sameContent(const std::filesystem::path& file, const std::string& want) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return false;
  std::ostringstream have;
  have << in.rdbuf();
  return have.str() == want;
}

}  // namespace

Files docs() {
  return {{"cli.md", cliMarkdown()},
          {"api.md", apiMarkdown()},
          {"configuration.md", configurationMarkdown()},
          {"metrics.md", metricsMarkdown()},
          {"audit.md", auditMarkdown()}};
}

Files manPages() {
  Files out;
  auto all = programs();
  for (auto& p : all) {
    std::vector<const CLI::App*> commands;
    walk(*p->app, commands);
    for (const CLI::App* c : commands) out[pageName(*c) + ".1"] = manPage(*c, *p->app);
  }
  return out;
}

Files schemas() {
  Files out;
  for (const auto& f : config::projectFiles())
    out[std::string(f.schemaName) + ".schema.json"] = config::jsonSchema(f);
  return out;
}

int writeOrCheck(const Files& files, const std::filesystem::path& dir, bool check,
                 std::string_view hint) {
  namespace fs = std::filesystem;
  if (check) {
    int differ = 0;
    for (auto& [name, content] : files) {
      fs::path file = dir / name;
      if (!sameContent(file, content)) {
        std::fprintf(stderr, "%s: %s\n", file.string().c_str(),
                     fs::exists(file) ? "differs from what the binary writes" : "missing");
        ++differ;
      }
    }
    if (differ) {
      std::fprintf(stderr, "%d file(s) out of date: run `%.*s`\n", differ,
                   static_cast<int>(hint.size()), hint.data());
      return 1;
    }
    return 0;
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    std::fprintf(stderr, "ductus: cannot make %s: %s\n", dir.string().c_str(),
                 ec.message().c_str());
    return 1;
  }
  for (auto& [name, content] : files) {
    fs::path file = dir / name;
    if (sameContent(file, content)) continue;  // unchanged files keep their times
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << content;
    out.close();
    if (!out) {
      std::fprintf(stderr, "ductus: cannot write %s\n", file.string().c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace ductus::supervisor::reference
