// Intake: one interface's door into the store. Every source (MLLP, HTTP,
// schedule, file, a route) hands its message here, and reads or saves its
// own progress here; no source touches the store itself. The Intake reads
// the message's keys, stores it with one delivery per destination in one
// commit, and only then answers, so a source acknowledges only what is
// committed (persist before acknowledge). After the commit it wakes the
// delivery loops of the message's lane.
//
// Each intake has a Gate: while closed (a stop, a drain) nothing new is
// stored, and a stop waits for the passes still out. Routed copies are the
// one exception, see acceptRouted().
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "intake/gate.h"
#include "intake/message_keys.h"
#include "schema/store.h"

namespace ductus::intake {

struct IntakeSpec {
  std::string name;  // the interface's, for logs
  int64_t interfaceId = 0;
  store::Tier tier = store::Tier::Week7;
  std::vector<int64_t> destinationIds;
  bool relaxed = false;  // durability: relaxed
  KeySpec keys;
  // Hears each commit's count of messages stored, and how many of them were
  // duplicates (the engine's activity counts).
  std::function<void(int64_t stored, int64_t duplicates)> onStored;
};

class Intake {
 public:
  // wake(lane) runs after each commit that queued something in that lane.
  Intake(store::Store& store, IntakeSpec spec, std::function<void(int32_t lane)> wake);

  const IntakeSpec& spec() const { return spec_; }
  Gate& gate() { return *gate_; }

  // Stores one message. cb hears the stored message (Duplicate for a dedupe
  // hit, still stored) or why storing failed (the sender should retry).
  // Refused at once when the gate is closed.
  void accept(std::string payload, std::function<void(Result<store::StoredMessage>)> cb);

  // Stores many messages (a file's records) with the source's progress in
  // one transaction. Gate as accept().
  void acceptBatch(std::vector<std::string> payloads, std::optional<store::SourceStateWrite> state,
                   std::function<void(Result<store::BatchStored>)> cb);

  // Stores one message quarantined at intake (a file's record that may not
  // be delivered): kept for an operator to see, with `reason` as its error,
  // never queued; the source's progress commits with it. Gate as accept().
  void acceptRefused(std::string payload, std::string reason,
                     std::optional<store::SourceStateWrite> state,
                     std::function<void(Result<store::StoredMessage>)> cb);

  // Stores the outputs a route's delivery loop made, in this (the target)
  // interface's queue, in one transaction with the source deliveries'
  // outcome. Not refused by a closed gate: a routed copy finishes the
  // delivery of a message stored and acknowledged before, and refusing it
  // during a stop would only make the source route it again after the
  // restart. While the gate is open the batch holds a pass like any store.
  void acceptRouted(int64_t sourceDestinationId, std::vector<store::RoutedItem> items,
                    std::function<void(Result<std::vector<store::RoutedMessage>>)> cb);

  // A source's saved progress (a file's offset, a schedule's last run).
  void sourceState(const std::string& key,
                   std::function<void(Result<std::optional<std::string>>)> cb);
  void saveSourceState(const std::string& key, const std::string& json,
                       std::function<void(Status)> cb);
  // Whether a message of this interface is still waiting for delivery.
  void hasPending(std::function<void(Result<bool>)> cb);

  // Where new messages go from now on (a shorter retention confirmed while
  // the engine runs).
  void setTier(store::Tier tier) { spec_.tier = tier; }

  // A routed message's keys, read with this (the target) interface's spec.
  MessageKeys keysOf(std::string_view payload) const { return intake::keysOf(spec_.keys, payload); }
  void wake(int32_t lane) { wake_(lane); }

 private:
  // The row every single insert starts from: this interface, its tier, the
  // payload and what its keys say (lane and the browser's columns).
  store::NewMessage messageOf(std::string payload, MessageKeys& keys) const;
  store::Store& store_;
  IntakeSpec spec_;
  std::function<void(int32_t)> wake_;
  std::shared_ptr<Gate> gate_ = Gate::make();
};

}  // namespace ductus::intake
