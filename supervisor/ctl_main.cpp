// ductusctl: the operator's client over the engine's control socket.
#include <cstdio>
#include <string_view>

#include "common/version.h"

namespace {

void usage(FILE* out) {
  std::fputs(
      "usage: ductusctl <command> [options]\n"
      "\n"
      "The operator's client: talks to a running engine over its control\n"
      "socket ($RUNTIME_DIRECTORY/control).\n"
      "\n"
      "commands:\n"
      "  version    print the version\n"
      "\n"
      "The engine's control socket (status, drain, resume, pause, handover,\n"
      "interfaces, messages, resend) is not built yet; see the operations issue.\n",
      out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  std::string_view cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    usage(stdout);
    return 0;
  }
  if (cmd == "version" || cmd == "--version") {
    std::printf("ductusctl %s\n", ductus::kVersion);
    return 0;
  }
  std::fprintf(stderr, "ductusctl: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
