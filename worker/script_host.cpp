#include "worker/script_host.h"

#include <algorithm>
#include <cstring>
#include <iterator>

#include "common/text.h"
#include "proto/contract.h"
#include "worker/sdk_source.h"
#include "worker/v8_isolate.h"

namespace ductus::worker {
namespace {

constexpr std::string_view kSdkSpecifier = "ductus";
constexpr std::string_view kLibPrefix = "lib/";
// What a terminated call's neighbours are told: not their fault, retry.
constexpr std::string_view kNeighbourStopped =
    "another script on this worker ran away and was stopped";

v8::Local<v8::String> str(v8::Isolate* iso, std::string_view s) {
  return v8::String::NewFromUtf8(iso, s.data(), v8::NewStringType::kNormal,
                                 static_cast<int>(s.size()))
      .ToLocalChecked();
}

std::string utf8(v8::Isolate* iso, v8::Local<v8::Value> v) {
  v8::String::Utf8Value u(iso, v);
  return *u ? std::string(*u, u.length()) : std::string();
}

ScriptHost* hostOf(v8::Isolate* iso) { return static_cast<ScriptHost*>(iso->GetData(0)); }

// "a/b/../c/./d.js" -> "a/c/d.js"; an error when ".." climbs above the root.
Result<std::string> normalizePath(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    std::string_view p = path.substr(i, j - i);
    if (p == "..") {
      if (parts.empty()) return Error{"climbs above the project folder"};
      parts.pop_back();
    } else if (!p.empty() && p != ".") {
      parts.push_back(p);
    }
    i = j + 1;
  }
  std::string out;
  for (auto p : parts) {
    if (!out.empty()) out += '/';
    out += p;
  }
  return out;
}

}  // namespace

std::string stringBytes(v8::Isolate* isolate, v8::Local<v8::String> s, bool asUtf8) {
  std::string out;
  if (asUtf8) {
    out.resize(s->Utf8Length(isolate));
    s->WriteUtf8(isolate, out.data(), static_cast<int>(out.size()), nullptr,
                 v8::String::NO_NULL_TERMINATION | v8::String::REPLACE_INVALID_UTF8);
    return out;
  }
  int n = s->Length();
  out.resize(n);
  if (s->ContainsOnlyOneByte()) {
    s->WriteOneByte(isolate, reinterpret_cast<uint8_t*>(out.data()), 0, n,
                    v8::String::NO_NULL_TERMINATION);
    return out;
  }
  // Characters latin1 cannot hold become '?', as an encoder would write them.
  std::vector<uint16_t> wide(n);
  s->Write(isolate, wide.data(), 0, n, v8::String::NO_NULL_TERMINATION);
  for (int i = 0; i < n; ++i) out[i] = wide[i] <= 0xff ? static_cast<char>(wide[i]) : '?';
  return out;
}

int byteClass(std::string_view bytes) {
  // Eight bytes at a time: most payloads are ASCII, and this runs on each.
  const char* p = bytes.data();
  size_t n = bytes.size(), i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    if (w & 0x8080808080808080ull) break;
  }
  for (; i < n; ++i)
    if (static_cast<unsigned char>(p[i]) >= 0x80) return isUtf8(bytes) ? 1 : 2;
  return 0;
}

ScriptHost::ScriptHost(v8::Isolate* isolate, HostOutput& out) : isolate_(isolate), out_(out) {}

ScriptHost::~ScriptHost() {
  watchdog_.reset();
  isolate_->RemoveNearHeapLimitCallback(&ScriptHost::nearHeapLimit, 0);
  isolate_->SetData(0, nullptr);
}

Result<std::unique_ptr<ScriptHost>> ScriptHost::create(v8::Isolate* isolate, HostOutput& out) {
  std::unique_ptr<ScriptHost> host(new ScriptHost(isolate, out));  // private constructor
  if (auto s = host->init(); !s) return s.error();
  return host;
}

Status ScriptHost::init() {
  isolate_->SetData(0, this);
  // Continuations run when the worker says so (after each frame), under the
  // watchdog, never in the middle of a native call.
  isolate_->SetMicrotasksPolicy(v8::MicrotasksPolicy::kExplicit);
  isolate_->AddNearHeapLimitCallback(&ScriptHost::nearHeapLimit, this);
  watchdog_ = std::make_unique<Watchdog>(isolate_);

  v8::Isolate::Scope isolateScope(isolate_);
  v8::HandleScope hs(isolate_);
  v8::Local<v8::Context> ctx = v8::Context::New(isolate_);
  context_.Reset(isolate_, ctx);
  v8::Context::Scope cs(ctx);

  // The bridge the SDK captures (and deletes from globalThis) when it runs.
  v8::Local<v8::Object> native = v8::Object::New(isolate_);
  auto fn = [&](const char* name, v8::FunctionCallback cb) {
    native->Set(ctx, str(isolate_, name), v8::Function::New(ctx, cb).ToLocalChecked()).Check();
  };
  fn("done", &ScriptHost::nativeDone);
  fn("request", &ScriptHost::nativeRequest);
  fn("log", &ScriptHost::nativeLog);
  fn("utf8", &ScriptHost::nativeUtf8);
  fn("register", &ScriptHost::nativeRegister);
  // The contract's constants, so the SDK never spells them itself.
  auto kinds = v8::Object::New(isolate_);
  auto kind = [&](const char* name, OutcomeKind k) {
    kinds->Set(ctx, str(isolate_, name), v8::Integer::New(isolate_, static_cast<int>(k))).Check();
  };
  kind("output", OutcomeKind::Output);
  kind("filtered", OutcomeKind::Filtered);
  kind("quarantine", OutcomeKind::Quarantine);
  kind("transient", OutcomeKind::Transient);
  native->Set(ctx, str(isolate_, "outcomeKinds"), kinds).Check();
  native->Set(ctx, str(isolate_, "transientMarker"), str(isolate_, proto::transientMarker()))
      .Check();
  ctx->Global()->Set(ctx, str(isolate_, "__ductus_native"), native).Check();

  v8::TryCatch tc(isolate_);
  auto sdk = compileModule(std::string(kSdkSpecifier), std::string(kSdkSource));
  if (!sdk) return Error{"the SDK does not compile: " + sdk.error().message};
  v8::Local<v8::Module> m = *sdk;
  if (!m->InstantiateModule(ctx, &ScriptHost::resolveCallback).FromMaybe(false) ||
      m->Evaluate(ctx).IsEmpty()) {
    return Error{"the SDK does not load: " + describeException(isolate_, tc)};
  }
  isolate_->PerformMicrotaskCheckpoint();
  if (m->GetStatus() != v8::Module::kEvaluated)
    return Error{"the SDK does not evaluate: " + utf8(isolate_, m->GetException())};
  sdk_.Reset(isolate_, m);
  if (run_.IsEmpty() || runTests_.IsEmpty())
    return Error{"the SDK did not register its entry points"};
  return {};
}

// ---- modules ----------------------------------------------------------------

Result<v8::Local<v8::Module>> ScriptHost::compileModule(const std::string& specifier,
                                                        const std::string& source) {
  v8::EscapableHandleScope hs(isolate_);
  v8::TryCatch tc(isolate_);
  v8::ScriptOrigin origin(isolate_, str(isolate_, specifier), 0, 0, false, -1,
                          v8::Local<v8::Value>(), false, false, /*is_module=*/true);
  v8::ScriptCompiler::Source src(str(isolate_, source), origin);
  v8::Local<v8::Module> m;
  if (!v8::ScriptCompiler::CompileModule(isolate_, &src).ToLocal(&m))
    return Error{describeException(isolate_, tc)};
  modules_[specifier].Reset(isolate_, m);
  moduleNames_.emplace(m->GetIdentityHash(), specifier);
  return hs.Escape(m);
}

Result<std::string> ScriptHost::resolveSpecifier(const std::string& referrer,
                                                 const std::string& spec) const {
  if (spec == kSdkSpecifier) return spec;
  bool relative = spec.starts_with("./") || spec.starts_with("../");
  if (!relative) {
    if (spec.starts_with("/") || spec.find(':') != std::string::npos)
      return Error{"remote and absolute imports are refused; import \"ductus\" or a relative path "
                   "inside the interface folder or lib/"};
    return Error{"unknown module; only \"ductus\" and relative paths (./, ../) may be imported"};
  }
  std::string dir = referrer.substr(0, referrer.rfind('/') + 1);
  auto path = normalizePath(dir + spec);
  if (!path) return Error{path.error().message};
  std::string ownFolder = "interfaces/" + (loading_ ? loading_->name : std::string()) + "/";
  if (!path->starts_with(ownFolder) && !path->starts_with(kLibPrefix))
    return Error{"resolves to " + *path + ", outside the interface folder and lib/"};
  return *path;
}

v8::MaybeLocal<v8::Module> ScriptHost::resolveCallback(v8::Local<v8::Context> context,
                                                       v8::Local<v8::String> specifier,
                                                       v8::Local<v8::FixedArray>,
                                                       v8::Local<v8::Module> referrer) {
  v8::Isolate* iso = context->GetIsolate();
  ScriptHost* self = hostOf(iso);
  std::string spec = utf8(iso, specifier);
  std::string from = "<unknown>";
  auto range = self->moduleNames_.equal_range(referrer->GetIdentityHash());
  for (auto it = range.first; it != range.second; ++it) {
    if (self->modules_.count(it->second) &&
        self->modules_[it->second].Get(iso) == referrer) {
      from = it->second;
      break;
    }
  }
  auto fail = [&](const std::string& why) -> v8::MaybeLocal<v8::Module> {
    if (self->resolveError_.empty()) self->resolveError_ = why;
    iso->ThrowException(v8::Exception::Error(str(iso, why)));
    return {};
  };
  // Where the import is written, so an editor can jump to it.
  std::string at = from;
  auto requests = referrer->GetModuleRequests();
  for (int i = 0; i < requests->Length(); ++i) {
    auto req = requests->Get(context, i).As<v8::ModuleRequest>();
    if (utf8(iso, req->GetSpecifier()) != spec) continue;
    auto loc = referrer->SourceOffsetToLocation(req->GetSourceOffset());
    at += ":" + std::to_string(loc.GetLineNumber() + 1) + ":" + std::to_string(loc.GetColumnNumber() + 1);
    break;
  }
  auto target = self->resolveSpecifier(from, spec);
  if (!target) return fail(at + ": cannot import \"" + spec + "\": " + target.error().message);
  if (auto it = self->modules_.find(*target); it != self->modules_.end()) return it->second.Get(iso);
  const std::map<std::string, std::string>* sources =
      self->loading_ ? &self->loading_->modules : nullptr;
  auto src = sources ? sources->find(*target) : decltype(sources->end()){};
  if (!sources || src == sources->end())
    return fail(at + ": cannot import \"" + spec + "\": " + *target + " does not exist");
  auto m = self->compileModule(*target, src->second);
  if (!m) return fail(m.error().message);
  return *m;
}

Status ScriptHost::loadModules(const InterfaceDef& def, v8::Local<v8::Module>& entry) {
  v8::Local<v8::Context> ctx = context_.Get(isolate_);
  v8::TryCatch tc(isolate_);
  resolveError_.clear();
  loading_ = &def;
  struct Reset {
    ScriptHost* h;
    ~Reset() { h->loading_ = nullptr; }
  } reset{this};

  if (auto it = modules_.find(def.entry); it != modules_.end()) {
    entry = it->second.Get(isolate_);
  } else {
    auto src = def.modules.find(def.entry);
    if (src == def.modules.end()) return Error{def.entry + " does not exist"};
    auto m = compileModule(def.entry, src->second);
    if (!m) return m.error();
    entry = *m;
  }
  if (entry->GetStatus() == v8::Module::kEvaluated) return {};
  if (!entry->InstantiateModule(ctx, &ScriptHost::resolveCallback).FromMaybe(false)) {
    return Error{!resolveError_.empty() ? resolveError_ : describeException(isolate_, tc)};
  }
  // Top-level code runs under the watchdog with the interface's timeout.
  v8::Local<v8::Value> promise;
  watchdog_->arm(Clock::now() + def.timeout);
  bool evaluated = entry->Evaluate(ctx).ToLocal(&promise);
  if (evaluated) isolate_->PerformMicrotaskCheckpoint();
  watchdog_->disarm();
  if (isolate_->IsExecutionTerminating() || tc.HasTerminated()) {
    isolate_->CancelTerminateExecution();
    if (heapHit_) {
      mustExit_ = true;
      return Error{def.entry + ": loading used more memory than the heap limit allows"};
    }
    return Error{def.entry + ": loading took longer than the timeout of " +
                 std::to_string(def.timeout.count()) + " ms"};
  }
  if (!evaluated) return Error{describeException(isolate_, tc)};
  if (entry->GetStatus() == v8::Module::kErrored) {
    v8::Local<v8::Value> ex = entry->GetException();
    v8::Local<v8::Message> msg = v8::Exception::CreateMessage(isolate_, ex);
    std::string where = utf8(isolate_, msg->GetScriptResourceName()) + ":" +
                        std::to_string(msg->GetLineNumber(ctx).FromMaybe(0)) + ":" +
                        std::to_string(msg->GetStartColumn(ctx).FromMaybe(0) + 1) + ": ";
    return Error{where + utf8(isolate_, ex)};
  }
  if (entry->GetStatus() != v8::Module::kEvaluated)
    return Error{def.entry + ": top-level await did not finish while loading"};
  return {};
}

Status ScriptHost::load(const InterfaceDef& def) {
  v8::Isolate::Scope is(isolate_);
  v8::HandleScope hs(isolate_);
  v8::Local<v8::Context> ctx = context_.Get(isolate_);
  v8::Context::Scope cs(ctx);

  auto report = [&](Status s) {
    out_.loaded(def.interfaceId, s);
    return s;
  };
  v8::Local<v8::Module> entry;
  if (auto s = loadModules(def, entry); !s) return report(s);
  auto ns = entry->GetModuleNamespace().As<v8::Object>();
  std::vector<std::pair<uint32_t, Function>> found;
  for (const auto& f : def.functions) {
    v8::Local<v8::Value> v;
    if (!ns->Get(ctx, str(isolate_, f.exportName)).ToLocal(&v) || !v->IsFunction()) {
      // What it does export: the usual mistake is a misspelt name.
      std::string have;
      v8::Local<v8::Array> names;
      if (ns->GetOwnPropertyNames(ctx).ToLocal(&names)) {
        for (uint32_t i = 0; i < names->Length(); ++i) {
          v8::Local<v8::Value> name, value;
          if (!names->Get(ctx, i).ToLocal(&name) || !ns->Get(ctx, name).ToLocal(&value) ||
              !value->IsFunction())
            continue;
          have += (have.empty() ? "" : ", ") + utf8(isolate_, name);
        }
      }
      return report(Error{def.entry + " does not export a function named \"" + f.exportName +
                          "\" (" +
                          (have.empty() ? "it exports no functions" : "it exports " + have) +
                          ")"});
    }
    Function fn{def.interfaceId, {}, {}, {}, {}, def.timeout};
    fn.fn.Reset(isolate_, v.As<v8::Function>());
    fn.inputFormat.Reset(isolate_, str(isolate_, f.inputFormat));
    fn.outputFormat.Reset(isolate_, str(isolate_, f.outputFormat));
    fn.charset.Reset(isolate_, str(isolate_, f.charset.empty() ? "auto" : f.charset));
    found.emplace_back(f.functionId, std::move(fn));
  }
  for (auto& [id, fn] : found) functions_[id] = std::move(fn);
  interfaceTimeouts_[def.interfaceId] = def.timeout;
  logLinesOutsideCalls_ = 0;
  return report({});
}

// ---- calls ------------------------------------------------------------------

template <typename F>
void ScriptHost::runGuarded(uint64_t callId, Clock::time_point deadline, F&& body) {
  v8::TryCatch tc(isolate_);
  currentCall_ = callId;
  watchdog_->arm(deadline);
  body();
  bool terminated = tc.HasTerminated() || isolate_->IsExecutionTerminating();
  if (!terminated) {
    isolate_->PerformMicrotaskCheckpoint();
    terminated = isolate_->IsExecutionTerminating() || tc.HasTerminated();
    watchdog_->disarm();
    // A termination during the microtask checkpoint drops every queued
    // continuation, whoever's they were.
    if (terminated) afterTermination(true);
    return;
  }
  watchdog_->disarm();
  afterTermination(heapHit_);
}

void ScriptHost::afterTermination(bool wholeQueueLost) {
  isolate_->CancelTerminateExecution();
  OutcomeKind kind = heapHit_ ? OutcomeKind::RunawayHeap : OutcomeKind::RunawayTimeout;
  uint64_t culprit = currentCall_;
  if (calls_.count(culprit)) {
    settle(culprit, kind,
           heapHit_ ? "the script used more memory than the heap limit allows"
                    : "the script ran past its timeout and was stopped");
  }
  if (wholeQueueLost || heapHit_) {
    std::vector<uint64_t> others;
    for (auto& [id, c] : calls_) others.push_back(id);
    for (uint64_t id : others) settle(id, OutcomeKind::Transient, proto::transientText(kNeighbourStopped));
    requests_.clear();
  }
  if (heapHit_) mustExit_ = true;
}

void ScriptHost::settle(uint64_t callId, OutcomeKind kind, std::string_view data) {
  if (calls_.erase(callId) == 0) return;  // already settled (expired, stopped)
  out_.outcome(callId, kind, data);
}

void ScriptHost::invoke(uint64_t callId, uint32_t functionId, std::string_view payload,
                        const CallMeta& meta) {
  auto fit = functions_.find(functionId);
  if (fit == functions_.end()) {
    out_.outcome(callId, OutcomeKind::Transient,
                 proto::transientText("function " + std::to_string(functionId) +
                                      " is not loaded in this worker"));
    return;
  }
  Function& f = fit->second;
  v8::Isolate::Scope is(isolate_);
  v8::HandleScope hs(isolate_);
  v8::Local<v8::Context> ctx = context_.Get(isolate_);
  v8::Context::Scope cs(ctx);

  Clock::time_point deadline = Clock::now() + f.timeout;
  calls_[callId] = Call{deadline, 0};

  // Every format arrives as latin1, one character per byte, with what the
  // bytes are (byteClass): the SDK applies the charset rule (MSH-18, the
  // interface's `charset:`, the bytes) and re-decodes as UTF-8 only when the
  // rule says so. ASCII, most messages, is never decoded twice, and an
  // unchanged message goes back byte for byte.
  v8::Local<v8::String> text =
      v8::String::NewFromOneByte(isolate_, reinterpret_cast<const uint8_t*>(payload.data()),
                                 v8::NewStringType::kNormal, static_cast<int>(payload.size()))
          .ToLocalChecked();
  // The meta object is made in JavaScript, where its shape is cached.
  v8::Local<v8::Value> args[] = {f.fn.Get(isolate_),
                                 f.inputFormat.Get(isolate_),
                                 f.outputFormat.Get(isolate_),
                                 text,
                                 f.charset.Get(isolate_),
                                 v8::Integer::New(isolate_, byteClass(payload)),
                                 v8::Number::New(isolate_, static_cast<double>(callId)),
                                 v8::Number::New(isolate_, static_cast<double>(meta.messageId)),
                                 v8::Number::New(isolate_, static_cast<double>(meta.receivedAtMs)),
                                 str(isolate_, meta.destination),
                                 v8::Number::New(isolate_, static_cast<double>(meta.originId))};
  runGuarded(callId, deadline, [&] {
    v8::MaybeLocal<v8::Value> r =
        run_.Get(isolate_)->Call(ctx, v8::Undefined(isolate_), static_cast<int>(std::size(args)), args);
    (void)r;  // runCall reports through native.done; an exception here is a termination
  });
}

void ScriptHost::runTests(uint64_t callId, uint32_t interfaceId) {
  v8::Isolate::Scope is(isolate_);
  v8::HandleScope hs(isolate_);
  v8::Local<v8::Context> ctx = context_.Get(isolate_);
  v8::Context::Scope cs(ctx);
  auto t = interfaceTimeouts_.find(interfaceId);
  auto timeout = t == interfaceTimeouts_.end() ? std::chrono::milliseconds(60000) : t->second;
  Clock::time_point deadline = Clock::now() + timeout;
  calls_[callId] = Call{deadline, 0};
  runGuarded(callId, deadline, [&] {
    v8::Local<v8::Value> p;
    if (!runTests_.Get(isolate_)->Call(ctx, v8::Undefined(isolate_), 0, nullptr).ToLocal(&p)) return;
    // Settles through a native function once the promise does.
    auto onDone = [](const v8::FunctionCallbackInfo<v8::Value>& info) {
      ScriptHost* self = hostOf(info.GetIsolate());
      uint64_t id = static_cast<uint64_t>(info.Data().As<v8::Number>()->Value());
      bool ok = info.Length() > 0 && info[0]->IsString();
      std::string text = info.Length() > 0 ? utf8(info.GetIsolate(), info[0]) : std::string();
      self->settle(id, ok ? OutcomeKind::Output : OutcomeKind::Quarantine, text);
    };
    auto data = v8::Number::New(isolate_, static_cast<double>(callId));
    auto then = v8::Function::New(ctx, onDone, data).ToLocalChecked();
    v8::MaybeLocal<v8::Promise> chained = p.As<v8::Promise>()->Then(ctx, then, then);
    (void)chained;
  });
}

void ScriptHost::serviceReply(uint64_t requestId, bool ok, std::string_view text) {
  auto it = requests_.find(requestId);
  if (it == requests_.end()) return;  // its call was settled meanwhile
  v8::Isolate::Scope is(isolate_);
  v8::HandleScope hs(isolate_);
  v8::Local<v8::Context> ctx = context_.Get(isolate_);
  v8::Context::Scope cs(ctx);
  uint64_t callId = it->second.callId;
  v8::Local<v8::Promise::Resolver> r = it->second.resolver.Get(isolate_);
  requests_.erase(it);
  auto call = calls_.find(callId);
  Clock::time_point deadline = Clock::now() + std::chrono::seconds(5);
  if (call != calls_.end()) {
    call->second.servicesOutstanding--;
    deadline = call->second.deadline;
  }
  runGuarded(callId, deadline, [&] {
    v8::Maybe<bool> done = ok ? r->Resolve(ctx, str(isolate_, text))
                              : r->Reject(ctx, v8::Exception::Error(str(isolate_, text)));
    (void)done;
  });
}

void ScriptHost::expireOverdue(Clock::time_point now) {
  std::vector<std::pair<uint64_t, bool>> overdue;
  for (auto& [id, c] : calls_)
    if (c.deadline <= now) overdue.emplace_back(id, c.servicesOutstanding > 0);
  for (auto [id, waitingForService] : overdue) {
    if (waitingForService)
      settle(id, OutcomeKind::Transient,
             proto::transientText(
                 "a service (db, fetch, api) did not answer within the timeout"));
    else
      settle(id, OutcomeKind::RunawayTimeout,
             "the script did not finish within its timeout (a promise that never settles?)");
  }
  if (!overdue.empty()) {
    for (auto it = requests_.begin(); it != requests_.end();) {
      if (!calls_.count(it->second.callId)) it = requests_.erase(it);
      else ++it;
    }
  }
}

ScriptHost::Clock::time_point ScriptHost::nextDeadline() const {
  auto t = Clock::time_point::max();
  for (auto& [id, c] : calls_) t = std::min(t, c.deadline);
  return t;
}

// ---- the native bridge ------------------------------------------------------

// done(callId, kind, text, encoding): kind one of outcomeKinds (output,
// filtered, quarantine, transient); encoding 0 latin1 (a character past
// U+00FF becomes '?'), 1 UTF-8, 2 latin1 when every character fits, else
// UTF-8 (text read as ISO-8859-1 only because nothing said otherwise:
// better UTF-8 than a lost character).
void ScriptHost::nativeDone(const v8::FunctionCallbackInfo<v8::Value>& info) {
  v8::Isolate* iso = info.GetIsolate();
  ScriptHost* self = hostOf(iso);
  if (info.Length() < 4 || !info[0]->IsNumber() || !info[2]->IsString()) return;
  auto ctx = iso->GetCurrentContext();
  uint64_t callId = static_cast<uint64_t>(info[0].As<v8::Number>()->Value());
  int kind = info[1]->Int32Value(ctx).FromMaybe(2);
  int encoding = info[3]->Int32Value(ctx).FromMaybe(1);
  // Only what a script may end with; anything else is the SDK's bug, and
  // a quarantine shows it to a person.
  if (kind < static_cast<int>(OutcomeKind::Output) || kind > static_cast<int>(OutcomeKind::Transient))
    kind = static_cast<int>(OutcomeKind::Quarantine);
  auto text = info[2].As<v8::String>();
  bool output = kind == static_cast<int>(OutcomeKind::Output);
  if (output && encoding != 1 && text->ContainsOnlyOneByte()) {
    // The common case (HL7 in latin1): the bytes go from V8 straight to
    // where they are sent from, with no string of our own in between.
    if (self->calls_.erase(callId) == 0) return;  // already settled (expired, stopped)
    int n = text->Length();
    self->out_.output(callId, static_cast<size_t>(n), [&](char* to) {
      text->WriteOneByte(iso, reinterpret_cast<uint8_t*>(to), 0, n,
                         v8::String::NO_NULL_TERMINATION);
    });
    return;
  }
  bool asUtf8 = !output || encoding == 1;
  if (output && encoding == 2) {
    // A two-byte string may still hold only latin1 characters.
    int n = text->Length();
    std::vector<uint16_t> wide(n);
    text->Write(iso, wide.data(), 0, n, v8::String::NO_NULL_TERMINATION);
    asUtf8 = std::any_of(wide.begin(), wide.end(), [](uint16_t c) { return c > 0xff; });
  }
  std::string bytes = stringBytes(iso, text, asUtf8);
  self->settle(callId, static_cast<OutcomeKind>(kind), bytes);
}

// request(kind, a, b, c) -> Promise<string> (JSON), answered by a
// ServiceReply from the supervisor.
void ScriptHost::nativeRequest(const v8::FunctionCallbackInfo<v8::Value>& info) {
  v8::Isolate* iso = info.GetIsolate();
  ScriptHost* self = hostOf(iso);
  auto ctx = iso->GetCurrentContext();
  std::string kindName = utf8(iso, info[0]);
  auto arg = [&](int i) {
    return info.Length() > i && !info[i]->IsUndefined() ? utf8(iso, info[i]) : std::string();
  };
  // Db: resource, sql, params JSON. Fetch: url, api name, init JSON.
  // Env/Secret: the name.
  std::string a1 = arg(1), a2 = arg(2), a3 = arg(3);
  proto::ServiceRequest request;
  if (kindName == "dbQuery") request.what = proto::DbQuery{a1, a2, a3};
  else if (kindName == "dbExecute") request.what = proto::DbExecute{a1, a2, a3};
  else if (kindName == "fetch") request.what = proto::Fetch{a1, a2, a3};
  else if (kindName == "env") request.what = proto::Env{a1};
  else if (kindName == "secret") request.what = proto::Secret{a1};
  else {
    iso->ThrowException(v8::Exception::TypeError(str(iso, "unknown service " + kindName)));
    return;
  }
  v8::Local<v8::Promise::Resolver> r = v8::Promise::Resolver::New(ctx).ToLocalChecked();
  uint64_t id = self->nextRequestId_++;
  uint64_t callId = self->currentCall_;
  self->requests_[id] = PendingRequest{callId, v8::Global<v8::Promise::Resolver>(iso, r)};
  uint32_t timeLeftMs = 0;
  if (auto c = self->calls_.find(callId); c != self->calls_.end()) {
    c->second.servicesOutstanding++;
    auto left = std::chrono::ceil<std::chrono::milliseconds>(c->second.deadline - Clock::now());
    timeLeftMs = static_cast<uint32_t>(std::clamp<int64_t>(left.count(), 1, UINT32_MAX));
  }
  request.requestId = id;
  request.callId = callId;
  request.timeLeftMs = timeLeftMs;
  self->out_.service(request);
  info.GetReturnValue().Set(r->GetPromise());
}

void ScriptHost::nativeLog(const v8::FunctionCallbackInfo<v8::Value>& info) {
  v8::Isolate* iso = info.GetIsolate();
  ScriptHost* self = hostOf(iso);
  // Bounded per line and per call: a script logging in a loop cannot
  // flood the supervisor's log.
  constexpr size_t kMaxLine = 16 * 1024;
  constexpr int kMaxLinesPerCall = 1000;
  auto c = self->calls_.find(self->currentCall_);
  int& lines = c != self->calls_.end() ? c->second.logLines : self->logLinesOutsideCalls_;
  if (++lines > kMaxLinesPerCall) {
    if (lines == kMaxLinesPerCall + 1)
      self->out_.log(self->currentCall_, "warn",
                     "more than " + std::to_string(kMaxLinesPerCall) +
                         " log lines from this call; the rest are dropped");
    return;
  }
  std::string text = utf8(iso, info[1]);
  if (text.size() > kMaxLine) text.resize(kMaxLine);
  self->out_.log(self->currentCall_, utf8(iso, info[0]), text);
}

// register(run, runTests): the SDK's entry points, handed over once while
// the SDK evaluates (before any interface code exists).
void ScriptHost::nativeRegister(const v8::FunctionCallbackInfo<v8::Value>& info) {
  v8::Isolate* iso = info.GetIsolate();
  ScriptHost* self = hostOf(iso);
  if (!self->run_.IsEmpty() || info.Length() < 2 || !info[0]->IsFunction() ||
      !info[1]->IsFunction())
    return;
  self->run_.Reset(iso, info[0].As<v8::Function>());
  self->runTests_.Reset(iso, info[1].As<v8::Function>());
}

// utf8(latin1String): reinterprets the bytes as UTF-8.
void ScriptHost::nativeUtf8(const v8::FunctionCallbackInfo<v8::Value>& info) {
  v8::Isolate* iso = info.GetIsolate();
  if (info.Length() < 1 || !info[0]->IsString()) return;
  std::string bytes = stringBytes(iso, info[0].As<v8::String>(), false);
  info.GetReturnValue().Set(str(iso, bytes));
}

size_t ScriptHost::nearHeapLimit(void* data, size_t current, size_t) {
  auto* self = static_cast<ScriptHost*>(data);
  self->heapHit_ = true;
  self->isolate_->TerminateExecution();
  // A little more room so the call can unwind; past a few raises the
  // process dies, which is what the supervisor expects of a heap bomb.
  if (++self->heapRaises_ > 3) return current;
  return current + current / 4;
}

}  // namespace ductus::worker
