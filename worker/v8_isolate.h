// One V8 isolate with a heap limit, owned RAII-style. The isolate is
// disposed (with its ArrayBuffer allocator) when the object goes.
#pragma once

#include <v8.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "common/result.h"

namespace ductus::worker {

class Isolate {
 public:
  // heapBytes: the old+young generation limit (isolates.heap_mb).
  static Result<std::unique_ptr<Isolate>> create(size_t heapBytes);
  ~Isolate();
  Isolate(const Isolate&) = delete;
  Isolate& operator=(const Isolate&) = delete;

  v8::Isolate* get() const { return isolate_; }

  // Compiles and runs a classic script in a fresh context; the result is
  // converted with String(). Errors carry the script's file:line:column.
  Result<std::string> evaluate(std::string_view source, std::string_view name = "<eval>");

 private:
  Isolate() = default;
  std::unique_ptr<v8::ArrayBuffer::Allocator> allocator_;
  v8::Isolate* isolate_ = nullptr;
};

// "file:line:column: message" for a caught exception.
std::string describeException(v8::Isolate* isolate, const v8::TryCatch& tc);

}  // namespace ductus::worker
