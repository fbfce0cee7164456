// `ductus worker ...`: the worker process's entry point.
#pragma once

namespace ductus::worker {

// argv[0] is the binary, argv[1] is "worker".
int workerMain(int argc, char** argv);

}  // namespace ductus::worker
