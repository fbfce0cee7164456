# The supervisor <-> worker protocol. One Unix socketpair per worker process;
# each direction is a stream of standard Cap'n Proto framed messages
# (capnp::writeMessage), read on the supervisor side by proto/frame.h.
#
# The worker is untrusted: a malformed or oversized frame from it kills that
# worker, never the supervisor. The supervisor sends no file descriptors and
# takes none.
@0x9a64c2d303451d0f;

# The generated C++ is the codec's alone (proto/worker_codec.cpp); everything
# else speaks proto/worker_messages.h.
$import "/capnp/c++.capnp".namespace("ductus::proto::wire");

# ---- supervisor -> worker -------------------------------------------------

struct ModuleSource {
  specifier @0 :Text;    # "interfaces/adt-feed/transform.js", "lib/util.js"
  source @1 :Text;
}

struct LoadInterface {
  interfaceId @0 :UInt32;
  name @1 :Text;
  entry @2 :Text;                 # specifier of the entry module
  modules @3 :List(ModuleSource); # every module it may import, read by the supervisor
  functions @4 :List(FunctionBinding);
  timeoutMs @5 :UInt32;
}

struct FunctionBinding {
  functionId @0 :UInt32;   # chosen by the supervisor, unique per worker
  exportName @1 :Text;     # "transform"
  inputFormat @2 :Text;    # hl7v2 | json | text | csv | xml | http
  outputFormat @3 :Text;
  destination @4 :Text;
  charset @5 :Text;        # auto | utf-8 | iso-8859-1 (interface.yaml `charset:`); empty = auto
}

struct Meta {
  messageId @0 :Int64;
  receivedAtMs @1 :Int64;
  destination @2 :Text;
  originId @3 :Int64;      # 0 = not routed
}

struct Invoke {
  callId @0 :UInt64;
  functionId @1 :UInt32;
  payload @2 :Data;        # bytes as stored: no decoding at intake
  meta @3 :Meta;
}

struct ServiceReply {
  requestId @0 :UInt64;
  union {
    ok @1 :Data;           # JSON text of the result
    error @2 :Text;        # message; transient if it carries transientMarker
  }
}

struct ToWorker {
  union {
    load @0 :LoadInterface;
    invoke @1 :Invoke;
    serviceReply @2 :ServiceReply;
    shutdown @3 :Void;
    ping @4 :UInt64;
    runTests @5 :RunTests;   # `ductus test`: run the loaded interface's tests
  }
}

struct RunTests {
  callId @0 :UInt64;       # the outcome's callId; output = results as JSON
  interfaceId @1 :UInt32;
}

# ---- worker -> supervisor -------------------------------------------------

# What a call came to. The SDK's native done() takes the same numbers: the
# worker hands them to the SDK, so they are written only here.
enum OutcomeKind {
  output @0;          # data: the output bytes
  filtered @1;        # data: the reason (may be empty)
  quarantine @2;      # data: the reason, with the script's stack (file:line)
  transient @3;       # data: why; the message waits and is retried
  runawayTimeout @4;  # the script ran past its timeout and was stopped
  runawayHeap @5;     # the script filled its heap
}

# In an error's text (a script's thrown Error, a service's refusal) this
# marks the failure transient. The SDK reads it from the worker's bridge.
const transientMarker :Text = "[ductus:transient]";

struct Outcome {
  callId @0 :UInt64;
  kind @1 :OutcomeKind;
  data @2 :Data;          # bytes for output, UTF-8 text otherwise
}

struct Loaded {
  interfaceId @0 :UInt32;
  union {
    ok @1 :Void;
    error @2 :Text;        # "interfaces/x/transform.js:3:7: SyntaxError: ..."
  }
}

struct ServiceRequest {
  requestId @0 :UInt64;
  callId @1 :UInt64;       # the call that asked
  union {
    dbQuery @2 :DbRequest;
    dbExecute @3 :DbRequest;
    fetch @4 :FetchRequest;
    env @5 :Text;
    secret @6 :Text;
  }
  # What is left of the asking call's timeout when it asked (0: no call):
  # the supervisor gives the service no longer than that, since the worker
  # settles the call as transient at its deadline anyway, and a statement
  # still running then would only hold a connection.
  timeLeftMs @7 :UInt32;
}

struct DbRequest {
  resource @0 :Text;
  sql @1 :Text;
  paramsJson @2 :Text;
}

struct FetchRequest {
  url @0 :Text;
  api @1 :Text;            # resources.yaml api name, or empty for a plain url
  initJson @2 :Text;       # method, headers, body
}

struct LogLine {
  callId @0 :UInt64;
  level @1 :Text;
  text @2 :Text;
}

struct FromWorker {
  union {
    ready @0 :Void;        # isolate made and the process confined
    loaded @1 :Loaded;
    outcome @2 :Outcome;
    service @3 :ServiceRequest;
    log @4 :LogLine;
    pong @5 :UInt64;
  }
}
