// The worker protocol as plain C++: every message either side of a worker
// socket sends, with no Cap'n Proto type in sight. proto/worker_codec.h turns
// them into frames and back (worker.capnp is the wire format and the one
// place the numbers are written); nothing else reads or builds a frame.
//
// Lifetimes: what a call sends per message (Invoke's payload, an Outcome's
// data, a ServiceRequest's and a Log's text, a ServiceReply's body) is a
// std::string_view. Encoding reads the caller's bytes; decoding yields views
// into the frame, valid until the frame reader is next fed or asked for a
// frame. A Load and a Loaded own their strings (they are rare and kept).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/call_meta.h"

namespace ductus::proto {

// What a call came to; worker.capnp's OutcomeKind, number for number (the
// codec checks), which the SDK's native done() takes too. A decoded kind may
// be a number this build does not know: callers treat that as the worker's
// mistake.
enum class OutcomeKind : uint16_t {
  Output = 0,          // data: the output bytes
  Filtered = 1,        // data: the reason (may be empty)
  Quarantine = 2,      // data: the reason, with the script's stack
  Transient = 3,       // data: why; the message waits and is retried
  RunawayTimeout = 4,  // the script ran past its timeout and was stopped
  RunawayHeap = 5,     // the script filled its heap
};

// One function of an interface's code, as interface.yaml names it (the
// supervisor fills it from the config) and as a worker binds it (with the id
// the supervisor chose, unique per worker; 0 until chosen).
struct FunctionDef {
  std::string exportName = "transform";
  std::string inputFormat = "hl7v2";  // hl7v2 | json | text | csv | csv-record | xml | http
  std::string outputFormat = "hl7v2";
  std::string destination;
  std::string charset = "auto";  // auto | utf-8 | iso-8859-1: how the SDK reads the bytes
  uint32_t functionId = 0;
};

// ---- supervisor -> worker ---------------------------------------------------

// A load's timeout (and each call's) when none is given; 0 on the wire
// means this too.
inline constexpr std::chrono::milliseconds kDefaultLoadTimeout{5000};

// Load an interface: its entry module, the source of every module it may
// import ("interfaces/<name>/<file>", "lib/<file>"), its functions.
struct Load {
  uint32_t interfaceId = 0;
  std::string name;
  std::string entry;
  std::map<std::string, std::string> modules;  // specifier -> source
  std::vector<FunctionDef> functions;
  std::chrono::milliseconds timeout = kDefaultLoadTimeout;
};

// Run one function on one payload (the bytes as stored).
struct Invoke {
  uint64_t callId = 0;
  uint32_t functionId = 0;
  std::string_view payload;
  CallMeta meta;
};

// The answer to a ServiceRequest: JSON text when ok, else the error's text
// (transient if it carries the transient marker).
struct ServiceReply {
  uint64_t requestId = 0;
  bool ok = false;
  std::string_view text;
};

// `ductus test`: run the loaded interface's tests; the outcome (callId) is
// the results as JSON.
struct RunTests {
  uint64_t callId = 0;
  uint32_t interfaceId = 0;
};

struct Ping {
  uint64_t value = 0;
};

struct Shutdown {};

using WorkerCommand = std::variant<Load, Invoke, ServiceReply, RunTests, Ping, Shutdown>;

// ---- worker -> supervisor ---------------------------------------------------

// The isolate is made and the process confined.
struct Ready {};

// An interface's load: no error, or where and why it failed
// ("interfaces/x/transform.js:3:7: SyntaxError: ...").
struct Loaded {
  uint32_t interfaceId = 0;
  std::optional<std::string> error;
};

struct Outcome {
  uint64_t callId = 0;
  OutcomeKind kind = OutcomeKind::Output;
  std::string_view data;  // bytes for Output, UTF-8 text otherwise
};

// A script's request for something outside its worker.
struct DbQuery {
  std::string_view resource, sql, paramsJson;
};
struct DbExecute {
  std::string_view resource, sql, paramsJson;
};
struct Fetch {
  std::string_view url;
  std::string_view api;  // resources.yaml api name, or empty for a plain url
  std::string_view initJson;
};
struct Env {
  std::string_view name;
};
struct Secret {
  std::string_view name;
};
using Service = std::variant<DbQuery, DbExecute, Fetch, Env, Secret>;

struct ServiceRequest {
  uint64_t requestId = 0;
  uint64_t callId = 0;  // the call that asked
  Service what;
  // What was left of the asking call's timeout when it asked (0: no call).
  uint32_t timeLeftMs = 0;
};

// A script's log line. Level and text end at their first NUL, as C strings.
struct Log {
  uint64_t callId = 0;
  std::string_view level;
  std::string_view text;
};

struct Pong {
  uint64_t value = 0;
};

using WorkerEvent = std::variant<Ready, Loaded, Outcome, ServiceRequest, Log, Pong>;

}  // namespace ductus::proto
