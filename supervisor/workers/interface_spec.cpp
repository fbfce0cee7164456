#include "supervisor/workers/interface_spec.h"

#include <fstream>
#include <memory>
#include <sstream>
#include <variant>

namespace ductus::supervisor {
namespace {

namespace fs = std::filesystem;

// What a worker process may hand us: bounded so a project folder with a
// stray bundle does not fill every worker's heap.
constexpr uintmax_t kMaxModuleBytes = 4u << 20;
constexpr uintmax_t kMaxModuleSetBytes = 32u << 20;

bool isModuleFile(const fs::path& p, bool includeTests) {
  auto name = p.filename().string();
  bool js = name.ends_with(".js") || name.ends_with(".mjs");
  bool test = name.ends_with(".test.js") || name.ends_with(".test.mjs");
  return js && (includeTests || !test);
}

Status readTree(const fs::path& root, const std::string& prefix, bool includeTests,
                ModuleSet& out, uintmax_t& total) {
  std::error_code ec;
  if (!fs::exists(root, ec)) return {};
  for (fs::recursive_directory_iterator it(root, fs::directory_options::none, ec), end;
       !ec && it != end; it.increment(ec)) {
    if (it->is_directory() && it->path().filename() == "node_modules") {
      it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file() || !isModuleFile(it->path(), includeTests)) continue;
    auto size = it->file_size();
    // The iterator's paths are root/..., so the lexical relation is the
    // real one; fs::relative would resolve every folder above (9 readlinks
    // a file: 9,009 for 1,001 interfaces at start-up).
    std::string spec = prefix + it->path().lexically_relative(root).generic_string();
    if (size > kMaxModuleBytes)
      return Error{spec + " is " + std::to_string(size) + " bytes, over the module limit of " +
                   std::to_string(kMaxModuleBytes)};
    total += size;
    if (total > kMaxModuleSetBytes)
      return Error{"the modules of " + prefix + " and lib/ are over " +
                   std::to_string(kMaxModuleSetBytes) + " bytes together"};
    std::ifstream in(it->path(), std::ios::binary);
    if (!in) return Error::fromErrno("cannot read " + it->path().string());
    std::ostringstream text;
    text << in.rdbuf();
    out.modules[spec] = text.str();
  }
  if (ec) return Error{"cannot list " + root.string() + ": " + ec.message()};
  return {};
}

}  // namespace

Result<ModuleSet> readInterfaceModules(const InterfaceSpec& spec, bool includeTests) {
  ModuleSet set;
  std::string prefix = "interfaces/" + spec.name + "/";
  set.entry = prefix + spec.entryFile;
  uintmax_t total = 0;
  if (auto s = readTree(spec.dir, prefix, includeTests, set, total); !s) return s.error();
  if (!spec.projectLib.empty()) {
    if (auto s = readTree(spec.projectLib, "lib/", includeTests, set, total); !s) return s.error();
  }
  if (!set.modules.count(set.entry))
    return Error{(spec.dir / spec.entryFile).string() + ": no such file"};
  return set;
}

InterfaceSpec interfaceSpecOf(const config::Project& project, const config::InterfaceConfig& c) {
  InterfaceSpec spec;
  spec.name = c.name;
  spec.dir = c.folder;
  spec.projectLib = project.root / "lib";
  spec.entryFile = c.code;
  spec.timeout = c.timeout;
  spec.dedicated = c.isolation == config::Isolation::Dedicated;
  spec.workers = static_cast<int>(c.workers);
  if (c.respondMode()) {
    spec.functions.push_back({c.respond, "http", "http", "", config::charsetName(c.charset)});
  }
  // A schedule's run record is JSON whatever format: says; a CSV split into
  // records reaches the transform as one record keyed by its header.
  const config::FileSelection* files = nullptr;  // a file or SFTP source's
  if (const auto* f = std::get_if<config::FileSource>(&c.source)) files = &f->files;
  if (const auto* f = std::get_if<config::SftpSource>(&c.source)) files = &f->files;
  std::string input =
      std::holds_alternative<config::ScheduleSource>(c.source) ? "json"
      : c.format == config::Format::Csv && files && files->split == config::Split::Records
          ? "csv-record"
          : config::formatName(c.format);
  for (auto& d : c.destinations)
    spec.functions.push_back({d.transform, input, config::formatName(d.output), d.name,
                              config::charsetName(c.charset)});
  return spec;
}

proto::Load loadOf(uint32_t interfaceId, const InterfaceSpec& spec, ModuleSet modules,
                   const std::vector<uint32_t>& functionIds) {
  proto::Load l;
  l.interfaceId = interfaceId;
  l.name = spec.name;
  l.entry = std::move(modules.entry);
  l.modules = std::move(modules.modules);
  l.functions = spec.functions;
  for (size_t k = 0; k < l.functions.size(); ++k) l.functions[k].functionId = functionIds.at(k);
  l.timeout = spec.timeout;
  return l;
}

std::string placeLoadError(const fs::path& projectRoot, const std::string& error) {
  if (!error.starts_with("interfaces/") && !error.starts_with("lib/")) return error;
  return (projectRoot / error).string();
}

namespace {

struct ModuleRead {
  uv_work_t req{};
  InterfaceSpec spec;
  Result<ModuleSet> modules = Error{"not read"};
  std::function<void(Result<ModuleSet>)> done;
};

}  // namespace

void readModulesOffLoop(uv_loop_t* loop, InterfaceSpec spec,
                        std::function<void(Result<ModuleSet>)> done) {
  auto job = std::make_unique<ModuleRead>();
  job->spec = std::move(spec);
  job->done = std::move(done);
  job->req.data = job.get();
  int rc = uv_queue_work(
      loop, &job->req,
      [](uv_work_t* w) {
        auto* j = static_cast<ModuleRead*>(w->data);
        j->modules = readInterfaceModules(j->spec);
      },
      [](uv_work_t* w, int status) {
        std::unique_ptr<ModuleRead> j(static_cast<ModuleRead*>(w->data));
        if (status != 0)
          return j->done(Error{std::string("reading the code: ") + uv_strerror(status)});
        j->done(std::move(j->modules));
      });
  if (rc != 0) return job->done(Error{std::string("reading the code: ") + uv_strerror(rc)});
  (void)job.release();  // after_work frees it
}

}  // namespace ductus::supervisor
