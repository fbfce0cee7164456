// PgCluster: a throwaway PostgreSQL cluster of one test's own, driven with
// scripts/pg.sh, for tests that stop and start the server under a running
// engine (the shared test cluster must never be stopped). Removed, stopped
// first, when the object goes.
#pragma once

#include <libpq-fe.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ductus::test {

class PgCluster {
 public:
  PgCluster();  // a fresh folder in /tmp; nothing started yet
  // The cluster in `dir` (not there yet, or empty), e.g. on a small tmpfs
  // the test mounted; its path must be short (the Unix socket is in it).
  explicit PgCluster(std::filesystem::path dir);
  ~PgCluster();
  PgCluster(const PgCluster&) = delete;
  PgCluster& operator=(const PgCluster&) = delete;

  // initdb (the first time) and start; false (ADD_FAILURE with why) if not.
  // tcpPort: listen on 127.0.0.1:tcpPort too (the Unix socket stays).
  bool start(uint16_t tcpPort = 0);
  // Stops the server (pg_ctl -m fast: sessions are terminated), keeping
  // the data for the next start().
  bool stop();
  // Ends the server as a crash would, keeping the data: `immediate` is
  // pg_ctl -m immediate (no checkpoint, unflushed WAL lost), `kill` is
  // kill -9 of the postmaster and its backends. start() then recovers.
  bool crash(const std::string& how);
  const std::string& url() const { return url_; }
  // After start(tcpPort): ssl=on with this certificate chain and key (copied
  // into the data folder, as the server's user, the key 0600), and waits
  // until a TLS connection on 127.0.0.1:tcpPort is taken; false
  // (ADD_FAILURE) if not.
  bool serveTls(const std::filesystem::path& chain, const std::filesystem::path& key,
                uint16_t tcpPort);
  const std::filesystem::path& dir() const { return dir_; }

  // Blocking query on a fresh connection: the first column of each row.
  // ADD_FAILURE()s on an error.
  std::vector<std::string> column(const std::string& sql,
                                  const std::vector<std::string>& params = {});
  std::string value(const std::string& sql, const std::vector<std::string>& params = {});

 private:
  bool pgsh(const std::vector<std::string>& args, std::string* out = nullptr);
  std::filesystem::path dir_;
  std::string url_;
};

}  // namespace ductus::test
