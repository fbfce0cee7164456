#include "worker/v8_platform.h"

#include <libplatform/libplatform.h>
#include <v8.h>

#include <memory>
#include <mutex>

namespace ductus::worker {

Status initV8(const char* argv0) {
  static std::once_flag once;
  static std::unique_ptr<v8::Platform> platform;
  static Status result;
  std::call_once(once, [&] {
    // ICU's data is built into Debian's libnode; no file to find.
    v8::V8::InitializeICUDefaultLocation(argv0);
    // One background thread: a worker runs one interface call at a time, and
    // the machine's cores belong to the pool of workers, not to one of them.
    platform = v8::platform::NewDefaultPlatform(1);
    v8::V8::InitializePlatform(platform.get());
    if (!v8::V8::Initialize()) result = Error{"v8::V8::Initialize() failed"};
  });
  return result;
}

}  // namespace ductus::worker
