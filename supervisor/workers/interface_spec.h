// An interface's code as its workers get it: what interface.yaml says of it
// (InterfaceSpec), the module sources read from the project folder
// (ModuleSet), and the load message made of both. The engine, `ductus
// validate`, `try` and `test` all go through this, so they agree on what
// the code is given.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <uv.h>

#include "common/config/model.h"
#include "common/result.h"
#include "proto/worker_messages.h"

namespace ductus::supervisor {

struct InterfaceSpec {
  std::string name;
  std::filesystem::path dir;         // interfaces/<name>
  std::filesystem::path projectLib;  // <project>/lib; may not exist
  std::string entryFile = "transform.js";
  // The respond function, or one per destination, in destination order
  // (their functionIds are chosen when loaded).
  std::vector<proto::FunctionDef> functions;
  std::chrono::milliseconds timeout{5000};
  bool dedicated = false;
  int workers = 1;  // dedicated only
};

// The module sources of an interface, as the worker receives them:
// "interfaces/<name>/<file>" and "lib/<file>" -> text.
struct ModuleSet {
  std::string entry;
  std::map<std::string, std::string> modules;
};

// Reads every .js/.mjs file of the interface folder and of lib/ (blocking:
// call it at startup or on libuv's thread pool, never on the loop).
// includeTests: also *.test.js (for `ductus test`).
Result<ModuleSet> readInterfaceModules(const InterfaceSpec& spec, bool includeTests = false);

// readInterfaceModules on libuv's thread pool; `done` runs on the loop
// (the engine's start reads 1,001 interfaces' files this way, the loop
// free meanwhile for the database's steps).
void readModulesOffLoop(uv_loop_t* loop, InterfaceSpec spec,
                        std::function<void(Result<ModuleSet>)> done);

// The interface as its workers run it: the module, the functions
// interface.yaml names and the input format each is handed.
InterfaceSpec interfaceSpecOf(const config::Project& project, const config::InterfaceConfig& c);

// The load message for an interface: its modules and one binding per
// function, with the ids the caller chose (parallel to spec.functions).
proto::Load loadOf(uint32_t interfaceId, const InterfaceSpec& spec, ModuleSet modules,
                   const std::vector<uint32_t>& functionIds);

// A worker's load error names modules as the worker knows them
// ("interfaces/x/transform.js:3:9: ..."); this places it in the project
// folder, as config errors are, so an editor opens the right file.
std::string placeLoadError(const std::filesystem::path& projectRoot, const std::string& error);

}  // namespace ductus::supervisor
