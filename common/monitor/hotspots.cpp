// Hotspot findings: which loops are blocked and by what, whether the
// receiver or the message is the trouble, where the backlog piles up, and
// lanes no loop reads.
#include "common/monitor/hotspots.h"

#include <algorithm>
#include <map>

#include "common/monitor/alert_text.h"

namespace ductus::monitor {

std::optional<uint32_t> loopOfLane(int32_t lane, uint32_t loops, uint32_t partitions) {
  if (lane < 0) return std::nullopt;
  if (loops <= 1) return 0u;  // one loop reads every lane (an empty lane list)
  if (static_cast<uint32_t>(lane) >= partitions) return std::nullopt;
  return static_cast<uint32_t>(lane) % loops;
}

namespace {

std::string laneList(const std::vector<int32_t>& lanes) {
  std::string out;
  for (size_t i = 0; i < lanes.size(); ++i) {
    if (i) out += ", ";
    if (i == 10) return out + "... (" + std::to_string(lanes.size()) + " lanes)";
    out += std::to_string(lanes[i]);
  }
  return out;
}

struct Loop {
  std::vector<int32_t> lanes;  // with messages waiting
  int64_t waiting = 0;
  const LaneFact* blocker = nullptr;  // its retried message, if any
};

std::string messageWords(const LaneFact& l) {
  std::string s = "message " + std::to_string(l.firstMessageId);
  if (!l.firstKey.empty()) s += " (key " + oneLine(l.firstKey, 100) + ")";
  return s;
}

// The receiver took messages after this one arrived: it is up, and this
// message is what it refuses.
bool receiverTookOthers(const LaneFact& l, const LaneFacts& f) {
  return f.lastFinished && l.firstReceivedAt && *f.lastFinished > *l.firstReceivedAt;
}

}  // namespace

std::vector<Finding> findHotspots(const LaneFacts& f) {
  std::vector<Finding> out;
  const uint32_t loops = std::max(1u, f.loops);
  int64_t total = f.waiting;
  if (total <= 0)
    for (const auto& l : f.lanes) total += std::max<int64_t>(0, l.waiting);

  std::map<uint32_t, Loop> byLoop;
  std::vector<int32_t> unowned;
  int64_t unownedWaiting = 0;
  std::vector<const LaneFact*> lanes;
  for (const auto& l : f.lanes)
    if (l.waiting > 0) lanes.push_back(&l);
  std::sort(lanes.begin(), lanes.end(), [](auto* a, auto* b) { return a->lane < b->lane; });
  for (const LaneFact* l : lanes) {
    auto owner = loopOfLane(l->lane, loops, f.partitions);
    if (!owner) {
      unowned.push_back(l->lane);
      unownedWaiting += l->waiting;
      continue;
    }
    Loop& lp = byLoop[*owner];
    lp.lanes.push_back(l->lane);
    lp.waiting += l->waiting;
    // The loop reads in message id order: of its lanes' first messages
    // with failures, the oldest is the one it is retrying.
    if (l->firstAttempts > 0 && (!lp.blocker || l->firstMessageId < lp.blocker->firstMessageId))
      lp.blocker = l;
  }

  // blocked-lane: one per blocked loop.
  size_t blocked = 0;
  bool anyMessageTrouble = false;
  for (const auto& [index, lp] : byLoop) {
    if (!lp.blocker) continue;
    ++blocked;
    const LaneFact& b = *lp.blocker;
    std::string text = (loops > 1 ? "Loop " + std::to_string(index) + " of " + std::to_string(loops)
                                  : std::string("The delivery loop")) +
                       " is retrying " + messageWords(b) + " in lane " + std::to_string(b.lane) +
                       " after " + std::to_string(b.firstAttempts) +
                       (b.firstAttempts == 1 ? " failed attempt" : " failed attempts");
    if (!b.firstLastError.empty()) text += " (" + oneLine(b.firstLastError, 300) + ")";
    text += "; " + std::to_string(lp.waiting) + " waiting in its lanes (" + laneList(lp.lanes) +
            ") wait behind it";
    if (receiverTookOthers(b, f)) {
      anyMessageTrouble = true;
      text +=
          ". The receiver took other messages since it arrived: the message is the trouble, "
          "not the receiver.";
    } else {
      text += ". Nothing was delivered since it arrived.";
    }
    out.push_back({"blocked-lane", std::move(text)});
  }

  // receiver-down: every loop is blocked, and none by a message the
  // receiver refuses while it takes others.
  if (blocked > 0 && blocked == loops && !anyMessageTrouble)
    out.push_back({"receiver-down",
                   loops > 1 ? "Every delivery loop (" + std::to_string(loops) +
                                   ") is retrying and nothing was delivered since: the receiver "
                                   "looks down."
                             : std::string("The only delivery loop is retrying and nothing was "
                                           "delivered since: the receiver looks down.")});

  // hot-key: a lane, else a loop, with most of the backlog.
  const LaneFact* hotLane = nullptr;
  if (f.partitions > 1 || lanes.size() > 1)
    for (const LaneFact* l : lanes)
      if (l->waiting >= kHotKeyAtLeast && l->waiting * 2 > total) hotLane = l;
  if (hotLane) {
    std::string text = "Lane " + std::to_string(hotLane->lane) + " holds " +
                       std::to_string(hotLane->waiting) + " of " + std::to_string(total) +
                       " waiting";
    if (!hotLane->firstKey.empty())
      text += " (its first key: " + oneLine(hotLane->firstKey, 100) + ")";
    text += ": one key, or a few sharing a lane, carries most of the traffic.";
    out.push_back({"hot-key", std::move(text)});
  } else if (loops > 1) {
    for (const auto& [index, lp] : byLoop)
      if (lp.waiting >= kHotKeyAtLeast && lp.waiting * 2 > total) {
        out.push_back({"hot-key", "Loop " + std::to_string(index) + " of " + std::to_string(loops) +
                                      " holds " + std::to_string(lp.waiting) + " of " +
                                      std::to_string(total) + " waiting (lanes " +
                                      laneList(lp.lanes) +
                                      "): its keys carry most of the traffic."});
        break;
      }
  }

  // unowned-lanes: lanes at or above partitions, read by no loop.
  if (!unowned.empty())
    out.push_back({"unowned-lanes", std::to_string(unownedWaiting) +
                                        " waiting in lanes no loop reads (" + laneList(unowned) +
                                        "): ordering.partitions was lowered to " +
                                        std::to_string(f.partitions) +
                                        "; raise it again until they are delivered."});
  return out;
}

}  // namespace ductus::monitor
