// The throwaway PostgreSQL that `ductus dev` runs on: a cluster in a folder
// of its own (kept between runs; --fresh starts over), listening only on a
// Unix socket in that folder, run as the postgres OS user when we are root
// (initdb refuses root). Blocking by design: it runs before the engine's
// loop starts and after it ends.
#pragma once

#include <filesystem>
#include <string>

#include "common/result.h"

namespace ductus::supervisor {

class DevPostgres {
 public:
  // Starts (initdb first if the folder is new, or everything anew with
  // fresh). Returns the connection string.
  static Result<DevPostgres> start(const std::filesystem::path& dir, bool fresh);
  DevPostgres(DevPostgres&& o) noexcept;
  DevPostgres& operator=(DevPostgres&&) = delete;
  ~DevPostgres();  // stops the server, keeps the data

  const std::string& url() const { return url_; }

 private:
  DevPostgres() = default;
  std::filesystem::path dir_;
  std::string url_;
  bool running_ = false;
};

}  // namespace ductus::supervisor
