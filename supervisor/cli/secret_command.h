// `ductus secret set NAME | list | rm NAME [--env ENV] [--project DIR]`:
// edits secrets/<env>.json (see common/config/secrets.h). `set` reads the
// value from stdin, so it never sits in shell history or a process list;
// nothing prints a value.
#pragma once

namespace ductus::supervisor {

int secretCommand(int argc, char** argv);

}  // namespace ductus::supervisor
