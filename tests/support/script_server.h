// A server the tests did not write (a Python script: tls_mllp_receiver.py,
// https_receiver.py) run as a child process: it binds an ephemeral port,
// prints it on its first line, and runs until this object kills it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ductus::test {

class ScriptServer {
 public:
  // Runs argv and waits (up to 10 s) for the port on its first line;
  // port() is 0 when none came (the child's stderr says why, in the test's).
  explicit ScriptServer(const std::vector<std::string>& argv);
  ~ScriptServer();
  ScriptServer(const ScriptServer&) = delete;
  ScriptServer& operator=(const ScriptServer&) = delete;

  uint16_t port() const { return port_; }

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
};

// The path of a script in tests/support/.
std::string supportScript(const std::string& name);

}  // namespace ductus::test
