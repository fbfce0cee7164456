#include "worker/v8_isolate.h"

namespace ductus::worker {

Result<std::unique_ptr<Isolate>> Isolate::create(size_t heapBytes) {
  std::unique_ptr<Isolate> self(new Isolate());  // private constructor
  self->allocator_.reset(v8::ArrayBuffer::Allocator::NewDefaultAllocator());
  v8::Isolate::CreateParams params;
  params.array_buffer_allocator = self->allocator_.get();
  params.constraints.ConfigureDefaultsFromHeapSize(0, heapBytes);
  self->isolate_ = v8::Isolate::New(params);
  if (!self->isolate_) return Error{"v8::Isolate::New failed"};
  return self;
}

Isolate::~Isolate() {
  if (isolate_) isolate_->Dispose();
}

std::string describeException(v8::Isolate* isolate, const v8::TryCatch& tc) {
  v8::HandleScope scope(isolate);
  auto context = isolate->GetCurrentContext();
  std::string out;
  v8::Local<v8::Message> msg = tc.Message();
  if (!msg.IsEmpty()) {
    v8::String::Utf8Value file(isolate, msg->GetScriptResourceName());
    out += *file ? *file : "<unknown>";
    out += ":" + std::to_string(msg->GetLineNumber(context).FromMaybe(0));
    out += ":" + std::to_string(msg->GetStartColumn(context).FromMaybe(0) + 1);
    out += ": ";
  }
  if (tc.HasTerminated()) return out + "terminated";
  v8::String::Utf8Value text(isolate, tc.Exception());
  out += *text ? *text : "<exception>";
  return out;
}

Result<std::string> Isolate::evaluate(std::string_view source, std::string_view name) {
  v8::Isolate::Scope isolateScope(isolate_);
  v8::HandleScope handleScope(isolate_);
  v8::Local<v8::Context> context = v8::Context::New(isolate_);
  v8::Context::Scope contextScope(context);
  v8::TryCatch tc(isolate_);

  auto toV8 = [&](std::string_view s) {
    return v8::String::NewFromUtf8(isolate_, s.data(), v8::NewStringType::kNormal,
                                   static_cast<int>(s.size()))
        .ToLocalChecked();
  };
  v8::ScriptOrigin origin(isolate_, toV8(name));
  v8::Local<v8::Script> script;
  if (!v8::Script::Compile(context, toV8(source), &origin).ToLocal(&script))
    return Error{describeException(isolate_, tc)};
  v8::Local<v8::Value> value;
  if (!script->Run(context).ToLocal(&value)) return Error{describeException(isolate_, tc)};
  v8::String::Utf8Value text(isolate_, value);
  return std::string(*text ? *text : "", text.length());
}

}  // namespace ductus::worker
