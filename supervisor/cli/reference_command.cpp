#include "supervisor/cli/reference_command.h"

#include <memory>
#include <string>

#include "supervisor/cli/reference.h"

namespace ductus::supervisor {
namespace {

struct Args {
  std::string dir;
  bool check = false;
};

// One command that writes (or, with --check, compares) a set of files.
void addWriter(CLI::App& parent, const char* name, const char* description, const char* footer,
               bool dirAsOption, reference::Files (*make)(), std::string hintCommand,
               int& exitCode) {
  auto args = std::make_shared<Args>();
  auto* cmd = parent.add_subcommand(name, description);
  cmd->footer(footer);
  if (dirAsOption)
    cmd->add_option("--out", args->dir, "the folder written (made when missing)")
        ->type_name("DIR")
        ->required();
  else
    cmd->add_option("DIR", args->dir, "the folder written (made when missing)")
        ->type_name("")
        ->required();
  cmd->add_flag("--check", args->check,
                "write nothing: exit 1 naming each file of DIR that differs from what this "
                "binary writes");
  cmd->callback([args, make, hintCommand, &exitCode] {
    exitCode = reference::writeOrCheck(make(), args->dir, args->check, hintCommand + args->dir);
  });
}

}  // namespace

void addReferenceCommands(CLI::App& ductus, int& exitCode) {
  auto* ref = ductus.add_subcommand(
      "reference", "write the references (docs, man pages) from this binary's own tables");
  ref->require_subcommand(1);
  addWriter(*ref, "docs", "write cli.md, api.md, configuration.md, metrics.md and audit.md",
            "From the parsers of ductus and ductusctl, the REST API's route table, the\n"
            "project format's table the loader checks keys against, the metric families\n"
            "and the audit log's actions. The committed copies are docs/reference/.",
            false, reference::docs, "ductus reference docs ", exitCode);
  addWriter(*ref, "man", "write the man pages of ductus, ductusctl and each of their commands",
            "A page per program and per command (ductus-run.1, ductusctl-status.1, ...),\n"
            "from the same parsers as --help. The .deb installs them, gzipped.",
            false, reference::manPages, "ductus reference man ", exitCode);
  addWriter(ductus, "types", "write JSON Schemas of ductus.yaml, resources.yaml and interface.yaml",
            "interface.schema.json, ductus.schema.json and resources.schema.json, from the\n"
            "table the loader checks keys against: a key validate refuses, the schema\n"
            "refuses too. For an editor (VS Code's YAML extension), a file's first line:\n"
            "  # yaml-language-server: $schema=PATH/interface.schema.json",
            true, reference::schemas, "ductus types --out ", exitCode);
}

}  // namespace ductus::supervisor
