#include "intake/mllp_listener.h"

#include <algorithm>
#include <cstring>

#include "common/config/duration.h"
#include "common/hl7/message.h"
#include "common/hl7/mllp.h"
#include "common/log.h"

namespace ductus::intake {
namespace {

using hl7::mllp::kCarriageReturn;
using hl7::mllp::kEndBlock;
using hl7::mllp::kStartBlock;

// What a connection buffers behind the message being answered before it
// stops reading (TCP then holds the sender back). A sender that waits for
// each ACK, as MLLP asks, never gets near it, so reading is not stopped and
// restarted around every message (two epoll_ctl calls each).
constexpr size_t kPendingLimit = 1 << 20;
// What an oversized frame keeps so its AR can still echo MSH-10: the MSH
// segment is a few hundred bytes in practice.
constexpr size_t kOversizedHead = 64 * 1024;

// The MSH segment of a frame (or of its head), copied so the ACK can be
// built after the message bytes have gone to the handler.
std::string mshSegmentOf(std::string_view frame) {
  size_t at = hl7::findMsh(frame);
  if (at == std::string_view::npos) return {};
  size_t end = frame.find_first_of("\r\n", at);
  return std::string(frame.substr(at, end == std::string_view::npos ? frame.size() - at : end - at));
}

std::string answerFor(std::string_view mshSegment, hl7::AckCode code, std::string_view text) {
  return hl7::buildAckFor(mshSegment, code, text);
}

}  // namespace

struct MllpAnswer::State : net::AnswerSlot {
  std::string msh;  // the message's MSH segment, to build the ACK from
  ~State();         // answers AE if nobody answered
};

// The MLLP framing of one accepted connection.
class MllpConnection final : public net::StreamConnection {
 public:
  explicit MllpConnection(MllpListener* listener)
      : net::StreamConnection(kPendingLimit), listener_(listener), id_(listener->nextConnection_++) {}

  uint64_t id() const { return id_; }

  // The handler's verdict on the message in flight.
  void answer(std::string_view ack) { endRequest(hl7::mllp::frame(ack), true); }

 private:
  enum class Framing { Seeking, InFrame, AfterEnd };

  MllpListener* listener() const { return attached() ? listener_ : nullptr; }
  std::string_view name() const {
    return listener() ? std::string_view(listener()->settings_.name) : std::string_view("mllp");
  }
  size_t maxMessage() const {
    return listener() ? listener()->settings_.maxMessageBytes : size_t{64} << 20;
  }

  void failed(IoStep step, int status) override {
    switch (step) {
      case IoStep::StartRead:
        spdlog::warn("{}: reading from {} failed: {}", name(), peer(), uv_strerror(status));
        break;
      case IoStep::Read:
        spdlog::warn("{}: connection {} from {} failed: {}", name(), id_, peer(),
                     uv_strerror(status));
        break;
      case IoStep::Write:
        spdlog::warn("{}: writing the ACK to {} failed: {}", name(), peer(), uv_strerror(status));
        break;
    }
  }

  void inputEnded() override {
    if (state_ == Framing::InFrame)
      spdlog::info("{}: connection {} from {} closed in the middle of a message", name(), id_,
                   peer());
  }

  void frameExpired(std::chrono::milliseconds age) override {
    spdlog::warn(
        "{}: connection {} from {}: a message begun {} ago is still not complete ({} bytes so "
        "far; limits.frame_deadline is {}); closing the connection",
        name(), id_, peer(), config::formatDuration(age), frame_.size(),
        config::formatDuration(limits().frameDeadline));
    closeNow();
  }

  void ended() override {
    if (uint64_t n = refusals_.flush())
      spdlog::warn(
          "{}: connection {} from {} closed; {} more message(s) refused since the last "
          "line, each answered AR",
          name(), id_, peer(), n);
  }

  // Advances the framing state machine; returns how many bytes it used. It
  // stops right after a frame's end, which begins a request (or is refused).
  size_t feed(const char* p, size_t n) override {
    size_t i = 0;
    while (i < n) {
      switch (state_) {
        case Framing::Seeking: {
          const void* start = std::memchr(p + i, kStartBlock, n - i);
          size_t at = start ? static_cast<const char*>(start) - p : n;
          if (at > i) noteGarbage(at - i);
          if (!start) return n;
          i = at + 1;
          state_ = Framing::InFrame;
          frame_.clear();
          oversized_ = false;
          frameBegun();
          break;
        }
        case Framing::InFrame: {
          const void* end = std::memchr(p + i, kEndBlock, n - i);
          size_t at = end ? static_cast<const char*>(end) - p : n;
          append(p + i, at - i);
          if (!end) return n;
          i = at + 1;
          state_ = Framing::AfterEnd;
          dispatch();
          return i;
        }
        case Framing::AfterEnd:
          // 0x1C is followed by 0x0D; a sender that leaves it out is still
          // read correctly.
          state_ = Framing::Seeking;
          if (p[i] == kCarriageReturn) ++i;
          break;
      }
    }
    return i;
  }

  void append(const char* p, size_t n) {
    if (oversized_) return;
    if (frame_.size() + n > maxMessage()) {
      oversized_ = true;
      size_t keep = std::min(kOversizedHead, frame_.size() + n);
      if (frame_.size() < keep) frame_.append(p, keep - frame_.size());
      frame_.resize(keep);
      return;
    }
    frame_.append(p, n);
  }

  // An answer the listener gives itself, without the handler.
  void writeAck(std::string_view ack) { answerNow(hl7::mllp::frame(ack)); }

  void noteGarbage(size_t bytes) {
    if (garbageLogged_) return;
    garbageLogged_ = true;
    spdlog::warn(
        "{}: connection {} from {} sent {} byte(s) outside an MLLP frame; skipping "
        "them (logged once per connection)",
        name(), id_, peer(), bytes);
  }

  // A refusal the listener answers itself, logged at most once per
  // limits().logEvery on this connection.
  void noteRefusal(const std::string& why) {
    uint64_t unsaid = 0;
    if (!refusals_.admit(now(), static_cast<uint64_t>(limits().logEvery.count()), &unsaid)) return;
    spdlog::warn("{}: connection {} from {}: message refused: {}; answered AR{}", name(), id_,
                 peer(), why,
                 unsaid ? " (" + std::to_string(unsaid) + " more refused since the last line)"
                        : " (further refusals on this connection are logged at most once every " +
                              config::formatDuration(limits().logEvery) + ")");
    if (MllpListener* l = listener(); l && l->settings_.onRefused)
      l->settings_.onRefused(peer(), why, unsaid);
  }

  void dispatch() {
    frameEnded();
    std::string frame = std::move(frame_);
    frame_.clear();
    if (oversized_) {
      noteRefusal("over the " + std::to_string(maxMessage()) + "-byte limit");
      writeAck(answerFor(mshSegmentOf(frame), hl7::AckCode::Reject, "message too large"));
      return;
    }
    auto view = hl7::MessageView::parse(frame);
    if (!view) {
      noteRefusal(view.error().message);
      writeAck(answerFor(mshSegmentOf(frame), hl7::AckCode::Reject, view.error().message));
      return;
    }
    // A second start block inside the frame: a message nested in this one,
    // which a receiver downstream would read as a message of its own.
    if (auto s = hl7::mllp::refuseFramingBytes(frame); !s) {
      noteRefusal(s.error().message);
      writeAck(hl7::buildAck(*view, hl7::AckCode::Reject, s.error().message));
      return;
    }
    MllpListener* listener = this->listener();
    if (!listener) return;
    auto state = std::make_shared<MllpAnswer::State>();
    state->msh = std::string(view->msh());
    beginRequest(state);
    listener->handler_(MllpPeer{peer(), id_}, std::move(frame), MllpAnswer(std::move(state)));
  }

  MllpListener* listener_;  // valid while attached()
  const uint64_t id_;
  Framing state_ = Framing::Seeking;
  std::string frame_;
  bool oversized_ = false;
  bool garbageLogged_ = false;
  net::LogThrottle refusals_;
};

MllpAnswer::State::~State() {
  if (auto* c = take<MllpConnection>())
    c->answer(answerFor(msh, hl7::AckCode::Error, "message was not answered"));
}

void MllpAnswer::operator()(hl7::AckCode code, std::string_view text) const {
  if (!state_) return;
  if (auto* c = state_->take<MllpConnection>()) c->answer(answerFor(state_->msh, code, text));
}

bool MllpAnswer::answered() const { return !state_ || state_->answered(); }

MllpListener::MllpListener(uv_loop_t* loop, MllpSettings settings, Handler handler)
    : loop_(loop),
      settings_(std::move(settings)),
      handler_(std::move(handler)),
      connections_(settings_.name, settings_.limits) {
  connections_.guard(settings_.guard);
}

MllpListener::~MllpListener() = default;

net::TcpListen MllpListener::how() {
  return {settings_.name, "MLLP", this, &MllpListener::onConnection};
}

Status MllpListener::listen(const std::string& host, uint16_t port, int backlog) {
  return net::listenTcp(loop_, server_, how(), host, port, backlog);
}

Status MllpListener::adopt(int fd) { return net::adoptTcp(loop_, server_, how(), fd); }

std::string MllpListener::address() const { return net::boundAddress(server_); }

uint16_t MllpListener::port() const { return net::boundPort(server_); }

void MllpListener::onConnection(uv_stream_t* server, int status) {
  auto* self = static_cast<MllpListener*>(server->data);
  if (!self) return;
  auto* c = self->connections_.accept<MllpConnection>(server, status, self);
  if (c) spdlog::debug("{}: connection {} from {}", self->settings_.name, c->id(), c->peer());
}

void MllpListener::close(std::function<void()> onClosed) {
  server_.reset();
  connections_.closeAll(std::move(onClosed));
}

}  // namespace ductus::intake
