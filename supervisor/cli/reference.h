// The references written from the binary itself (`ductus reference`,
// `ductus types`): the command lines from both programs' parsers, the REST
// API from its route table, the project's keys from the format table the
// loader checks against, the metric families GET /metrics renders from and
// the audit log's actions. Nothing here is kept by hand beside the code
// it describes, so `--check` fails whenever one of them changed and the
// committed files (docs/reference/) were not written again.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>

namespace ductus::supervisor::reference {

// File name → content; deterministic (no dates, versions or commits).
using Files = std::map<std::string, std::string>;

// cli.md, api.md, configuration.md, metrics.md, audit.md.
Files docs();
// ductus.1, ductus-run.1, ..., ductusctl.1, ductusctl-status.1, ...: a
// page per program and per command (roff).
Files manPages();
// interface.schema.json, ductus.schema.json, resources.schema.json.
Files schemas();

// Writes `files` into `dir` (made when missing). With `check`, writes
// nothing: prints a line naming each file of `dir` that differs from what
// it should be (or is missing), then `hint` when any did, and returns 1;
// 0 when all are the same. 1 too when `dir` can't be written or read.
int writeOrCheck(const Files& files, const std::filesystem::path& dir, bool check,
                 std::string_view hint);

}  // namespace ductus::supervisor::reference
