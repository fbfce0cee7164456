#include "intake/intake.h"

#include <set>

namespace ductus::intake {

Intake::Intake(store::Store& store, IntakeSpec spec, std::function<void(int32_t)> wake)
    : store_(store), spec_(std::move(spec)), wake_(std::move(wake)) {}

store::NewMessage Intake::messageOf(std::string payload, MessageKeys& keys) const {
  store::NewMessage m;
  m.interfaceId = spec_.interfaceId;
  m.tier = spec_.tier;
  m.payload = std::move(payload);
  m.partitionKey = keys.lane;
  m.columns = std::move(keys.columns);
  return m;
}

void Intake::accept(std::string payload,
                    std::function<void(Result<store::StoredMessage>)> cb) {
  auto pass = gate_->enter();
  if (!pass) return cb(Error{"interface " + spec_.name + " is not accepting messages (stopping)"});
  MessageKeys keys = intake::keysOf(spec_.keys, payload);
  store::NewMessage m = messageOf(std::move(payload), keys);
  m.dedupeKey = std::move(keys.dedupe);
  m.destinationIds = spec_.destinationIds;
  m.relaxed = spec_.relaxed;
  int32_t lane = keys.lane;
  // The pass travels with the store call: the gate counts this message as
  // in flight until the sender has been answered.
  auto held = std::make_shared<Gate::Pass>(std::move(*pass));
  store_.insert(std::move(m), [this, lane, held, cb = std::move(cb)](
                                  Result<store::StoredMessage> r) mutable {
    bool queued = r && r->status == store::MessageStatus::Pending;
    if (r && spec_.onStored) spec_.onStored(1, r->status == store::MessageStatus::Duplicate);
    cb(std::move(r));
    if (queued) wake_(lane);
  });
}

void Intake::acceptBatch(std::vector<std::string> payloads,
                         std::optional<store::SourceStateWrite> state,
                         std::function<void(Result<store::BatchStored>)> cb) {
  auto pass = gate_->enter();
  if (!pass) return cb(Error{"interface " + spec_.name + " is not accepting messages (stopping)"});
  store::NewBatch b;
  b.interfaceId = spec_.interfaceId;
  b.tier = spec_.tier;
  b.destinationIds = spec_.destinationIds;
  b.relaxed = spec_.relaxed;
  b.state = std::move(state);
  auto lanes = std::make_shared<std::set<int32_t>>();
  b.items.reserve(payloads.size());
  for (auto& p : payloads) {
    MessageKeys keys = intake::keysOf(spec_.keys, p);
    lanes->insert(keys.lane);
    b.items.push_back(
        store::BatchItem{std::move(p), keys.lane, std::move(keys.dedupe), std::move(keys.columns)});
  }
  auto held = std::make_shared<Gate::Pass>(std::move(*pass));
  store_.insertBatch(std::move(b), [this, lanes, held, cb = std::move(cb)](
                                       Result<store::BatchStored> r) mutable {
    bool ok = r.ok();
    if (ok && spec_.onStored) spec_.onStored(r->messages, r->duplicates);
    cb(std::move(r));
    if (ok)
      for (int32_t lane : *lanes) wake_(lane);
  });
}

void Intake::acceptRefused(std::string payload, std::string reason,
                           std::optional<store::SourceStateWrite> state,
                           std::function<void(Result<store::StoredMessage>)> cb) {
  auto pass = gate_->enter();
  if (!pass) return cb(Error{"interface " + spec_.name + " is not accepting messages (stopping)"});
  // Keys too: the browser finds it by type, control id and key like any other.
  MessageKeys keys = intake::keysOf(spec_.keys, payload);
  store::NewMessage m = messageOf(std::move(payload), keys);
  auto held = std::make_shared<Gate::Pass>(std::move(*pass));
  store_.insertRefused(std::move(m), std::move(reason), std::move(state),
                       [onStored = spec_.onStored, held, cb = std::move(cb)](
                           Result<store::StoredMessage> r) {
                         if (r && onStored) onStored(1, 0);
                         cb(std::move(r));
                       });
}

void Intake::acceptRouted(int64_t sourceDestinationId, std::vector<store::RoutedItem> items,
                          std::function<void(Result<std::vector<store::RoutedMessage>>)> cb) {
  auto pass = gate_->enter();
  auto held = pass ? std::make_shared<Gate::Pass>(std::move(*pass)) : nullptr;
  store::RoutedBatch b;
  b.sourceDestinationId = sourceDestinationId;
  b.targetInterfaceId = spec_.interfaceId;
  b.targetTier = spec_.tier;
  b.targetDestinationIds = spec_.destinationIds;
  // The browser's columns, read with this interface's keys (the route's
  // loop read the lane and dedupe key with them already).
  b.columns.reserve(items.size());
  for (auto& it : items) b.columns.push_back(intake::keysOf(spec_.keys, it.payload).columns);
  b.items = std::move(items);
  store_.finishRouted(std::move(b), [onStored = spec_.onStored, held, cb = std::move(cb)](
                                        Result<std::vector<store::RoutedMessage>> r) {
    if (r && onStored) {
      int64_t duplicates = 0;
      for (auto& m : *r) duplicates += m.stored.status == store::MessageStatus::Duplicate;
      onStored(static_cast<int64_t>(r->size()), duplicates);
    }
    cb(std::move(r));
  });
}

void Intake::sourceState(const std::string& key,
                         std::function<void(Result<std::optional<std::string>>)> cb) {
  store_.getSourceState(spec_.interfaceId, key, std::move(cb));
}

void Intake::saveSourceState(const std::string& key, const std::string& json,
                             std::function<void(Status)> cb) {
  store_.putSourceState(spec_.interfaceId, key, json, std::move(cb));
}

void Intake::hasPending(std::function<void(Result<bool>)> cb) {
  store_.hasPending(spec_.interfaceId, std::move(cb));
}

}  // namespace ductus::intake
