// Encoding and decoding of the worker protocol (proto/worker_messages.h),
// written once for both sides: the supervisor (supervisor/workers/
// worker_process.h) and the worker (worker/worker_loop.cpp) use nothing else.
//
// Encoding appends one framed message behind what `out` already holds, built
// in place (proto::appendFrame), so a call's payload is copied once.
// Decoding reads hostile bytes from a confined process: it returns an Error
// (ErrorKind::Invalid) for anything malformed and never throws; the caller
// drops the peer. The frame's size, nesting and traversal are bounded by the
// FrameReader's limits (proto/frame.h).
#pragma once

#include <kj/function.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/result.h"
#include "proto/frame.h"
#include "proto/worker_messages.h"

namespace ductus::proto {

// supervisor -> worker
void encode(std::string& out, const Load& m);
void encode(std::string& out, const Invoke& m);
void encode(std::string& out, const ServiceReply& m);
void encode(std::string& out, const RunTests& m);
void encode(std::string& out, const Ping& m);
void encode(std::string& out, const Shutdown& m);
void encode(std::string& out, const WorkerCommand& m);

// worker -> supervisor
void encode(std::string& out, const Ready& m);
void encode(std::string& out, const Loaded& m);
void encode(std::string& out, const Outcome& m);
void encode(std::string& out, const ServiceRequest& m);
void encode(std::string& out, const Log& m);
void encode(std::string& out, const Pong& m);
void encode(std::string& out, const WorkerEvent& m);
// An Output outcome of `size` bytes that `write` puts straight into the
// frame that carries it (the worker's script writes its output there).
void encodeOutput(std::string& out, uint64_t callId, size_t size,
                  kj::FunctionParam<void(char*)> write);

Result<WorkerCommand> decodeCommand(Frame& frame);
Result<WorkerEvent> decodeEvent(Frame& frame);

}  // namespace ductus::proto
