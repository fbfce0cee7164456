// ScriptHost: the interfaces loaded in one worker's isolate, and the calls
// running in it. It knows nothing of sockets: what it has to say (a load's
// result, a call's outcome, a service request, a log line) goes to a
// HostOutput, which the worker loop turns into frames and the in-process
// benchmark simply counts.
//
// Modules are ES modules. "ductus" is the SDK; relative specifiers resolve
// inside the interface's folder ("interfaces/<name>/") or the project's
// "lib/"; anything else (URLs, absolute paths, node:, bare names) is refused.
// A module is compiled once per worker and reused by every interface that
// imports it.
#pragma once

#include <v8.h>

#include <kj/function.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/result.h"
#include "common/call_meta.h"
#include "proto/worker_messages.h"
#include "worker/watchdog.h"

namespace ductus::worker {

// What a call came to: the protocol's own enum (proto/worker_messages.h).
using OutcomeKind = proto::OutcomeKind;

class HostOutput {
 public:
  virtual ~HostOutput() = default;
  virtual void loaded(uint32_t interfaceId, const Status& result) = 0;
  // data: the output bytes, or the reason.
  virtual void outcome(uint64_t callId, OutcomeKind kind, std::string_view data) = 0;
  // An output of `size` bytes that `write` puts where it is told: the
  // worker has it written straight into the frame that carries it.
  virtual void output(uint64_t callId, size_t size, kj::FunctionParam<void(char*)> write) {
    std::string bytes(size, '\0');
    write(bytes.data());
    outcome(callId, OutcomeKind::Output, bytes);
  }
  // A script asks for a service (its views valid during the call only).
  virtual void service(const proto::ServiceRequest& request) = 0;
  virtual void log(uint64_t callId, std::string_view level, std::string_view text) = 0;
};

// An interface as the host loads it: the protocol's load message.
using InterfaceDef = proto::Load;

class ScriptHost {
 public:
  using Clock = std::chrono::steady_clock;

  // The isolate must outlive the host; one host per isolate.
  static Result<std::unique_ptr<ScriptHost>> create(v8::Isolate* isolate, HostOutput& out);
  ~ScriptHost();

  // Compiles, links and evaluates the interface's modules; reports through
  // HostOutput::loaded and returns the same result.
  Status load(const InterfaceDef& def);

  void invoke(uint64_t callId, uint32_t functionId, std::string_view payload, const CallMeta& meta);
  void serviceReply(uint64_t requestId, bool ok, std::string_view text);

  // Runs the tests registered by the interface's *.test.js (`ductus test`);
  // the outcome is the results as JSON.
  void runTests(uint64_t callId, uint32_t interfaceId);

  // Calls still waiting (for services) past their deadline are settled:
  // transient if a service request was outstanding, runaway otherwise.
  void expireOverdue(Clock::time_point now);
  // The earliest deadline of a waiting call; time_point::max() when none.
  Clock::time_point nextDeadline() const;

  size_t callsInFlight() const { return calls_.size(); }
  // Set after a heap overflow: report, then let the process go.
  bool mustExit() const { return mustExit_; }

 private:
  struct Function {
    uint32_t interfaceId;
    v8::Global<v8::Function> fn;
    v8::Global<v8::String> inputFormat, outputFormat, charset;
    std::chrono::milliseconds timeout;
  };
  struct Call {
    Clock::time_point deadline;
    int servicesOutstanding = 0;
    int logLines = 0;
  };
  struct PendingRequest {
    uint64_t callId;
    v8::Global<v8::Promise::Resolver> resolver;
  };

  ScriptHost(v8::Isolate* isolate, HostOutput& out);
  Status init();
  Result<v8::Local<v8::Module>> compileModule(const std::string& specifier, const std::string& source);
  Result<std::string> resolveSpecifier(const std::string& referrer, const std::string& specifier) const;
  static v8::MaybeLocal<v8::Module> resolveCallback(v8::Local<v8::Context> context,
                                                    v8::Local<v8::String> specifier,
                                                    v8::Local<v8::FixedArray> assertions,
                                                    v8::Local<v8::Module> referrer);
  Status loadModules(const InterfaceDef& def, v8::Local<v8::Module>& entry);

  // Runs JavaScript for callId under the watchdog; afterwards runs pending
  // microtasks. Handles a termination (timeout or heap) if one happened.
  template <typename F>
  void runGuarded(uint64_t callId, Clock::time_point deadline, F&& body);
  void drainMicrotasks(Clock::time_point deadline);
  void afterTermination(bool wholeQueueLost);
  void settle(uint64_t callId, OutcomeKind kind, std::string_view data);

  static void nativeDone(const v8::FunctionCallbackInfo<v8::Value>& info);
  static void nativeRequest(const v8::FunctionCallbackInfo<v8::Value>& info);
  static void nativeLog(const v8::FunctionCallbackInfo<v8::Value>& info);
  static void nativeUtf8(const v8::FunctionCallbackInfo<v8::Value>& info);
  static void nativeRegister(const v8::FunctionCallbackInfo<v8::Value>& info);
  static size_t nearHeapLimit(void* data, size_t current, size_t initial);

  v8::Isolate* isolate_;
  HostOutput& out_;
  v8::Global<v8::Context> context_;
  v8::Global<v8::Module> sdk_;
  v8::Global<v8::Function> run_, runTests_;
  std::unique_ptr<Watchdog> watchdog_;

  std::unordered_map<std::string, v8::Global<v8::Module>> modules_;  // by specifier
  std::unordered_multimap<int, std::string> moduleNames_;            // identity hash -> specifier
  const InterfaceDef* loading_ = nullptr;  // the load a resolve callback serves
  std::string resolveError_;

  std::unordered_map<uint32_t, Function> functions_;
  std::unordered_map<uint32_t, std::chrono::milliseconds> interfaceTimeouts_;
  std::unordered_map<uint64_t, Call> calls_;
  std::unordered_map<uint64_t, PendingRequest> requests_;
  uint64_t nextRequestId_ = 1;
  uint64_t currentCall_ = 0;  // whose code runs now (best effort after an await)
  int logLinesOutsideCalls_ = 0;
  bool heapHit_ = false;
  int heapRaises_ = 0;
  bool mustExit_ = false;
};

// The latin1 bytes of a one-byte string, or UTF-8 of any string.
std::string stringBytes(v8::Isolate* isolate, v8::Local<v8::String> s, bool utf8);

// What the SDK's charset rule needs to know of a payload's bytes, found
// where scanning bytes is cheap: 0 ASCII only, 1 well-formed UTF-8 with at
// least one multi-byte sequence, 2 anything else.
int byteClass(std::string_view bytes);

}  // namespace ductus::worker
