// The project most end-to-end tests run: one interface with an MLLP source
// on 127.0.0.1, HL7 v2, and its destination(s). The knobs are what the tests
// vary; everything else is the same for all of them. Write it with
// TempProject(MllpProject{.port = port}) (tests/support/engine_process.h),
// or take files() to add interfaces of its own.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "tests/support/e2e.h"  // engineYaml(), kPassThrough

namespace ductus::test {

// `destination:` sending to an MLLP receiver on 127.0.0.1.
inline std::string mllpDestination(uint16_t port) {
  return "destination:\n  mllp: { host: 127.0.0.1, port: " + std::to_string(port) + " }\n";
}

struct MllpProject {
  uint16_t port = 0;  // the MLLP source listens on 127.0.0.1:port
  // interface.yaml's lines between `format: hl7v2` and the destination:
  // "ordering: { key: PID.3.1 }\n", "durability: strict\n", ...
  std::string settings = "";
  // The destination block, `destination:` or `destinations:` and what is
  // under it; a folder out/ in the project unless said.
  std::string destination = "destination:\n  file: { path: out/ }\n";
  std::string transform = kPassThrough;  // transform.js
  std::string name = "adt";              // interfaces/<name>/
  std::string engine = engineYaml();     // ductus.yaml

  std::string interfaceYaml() const {
    return "source:\n  mllp: { listen: 127.0.0.1:" + std::to_string(port) +
           " }\nformat: hl7v2\n" + settings + destination;
  }
  std::string interfacePath() const { return "interfaces/" + name + "/interface.yaml"; }
  // path -> text, for TempProject.
  std::map<std::string, std::string> files() const {
    return {{"ductus.yaml", engine},
            {interfacePath(), interfaceYaml()},
            {"interfaces/" + name + "/transform.js", transform}};
  }
};

}  // namespace ductus::test
