// PgCluster: a throwaway PostgreSQL cluster of one test's own, driven with
// scripts/pg.sh, for tests that stop and start the server under a running
// engine (the shared test cluster must never be stopped), or fail over from
// it to a standby that is another PgCluster. Removed, stopped first, when
// the object goes.
#pragma once

#include <libpq-fe.h>

#include <chrono>
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

  // Replication (a primary and its standbys, each a PgCluster of its own).
  // Instead of start(): a streaming standby of `primary` (running) in this
  // cluster's folder, copied with pg_basebackup -R -X stream over the
  // primary's socket and started (tcpPort as in start()). Its walreceiver
  // connects as application_name `name`. It copies the primary's
  // settings: set synchronous_standby_names only after, or the promoted
  // standby waits for a standby of its own on every commit.
  bool startStandbyOf(const PgCluster& primary, const std::string& name, uint16_t tcpPort = 0);
  // On the primary: synchronous_standby_names = 'names' ("" makes every
  // standby asynchronous), reloaded and seen in SHOW.
  bool setSynchronousStandbys(const std::string& names);
  // On the primary: waits until the standby `name` streams with this
  // sync_state ("sync", "async"); false (ADD_FAILURE) after the timeout.
  bool waitForStandby(const std::string& name, const std::string& syncState,
                      std::chrono::seconds timeout = std::chrono::seconds(60));
  // On a standby: pg_ctl promote, waiting until it takes writes.
  bool promote();

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
