// What the Intake stores beside each message for the API's message browser
// (migration 0006): MSH-9, MSH-10, the ordering key's value and the charset,
// through every insert path (one message, a coalesced group, a source's
// batch, a route), over a real PostgreSQL.
#include <gtest/gtest.h>

#include <memory>

#include "intake/intake.h"
#include "tests/schema/store_fixture.h"

namespace ductus::intake {
namespace {

using store::test::StoreTest;

class IntakeColumns : public StoreTest {
 protected:
  std::unique_ptr<Intake> make(KeySpec keys) {
    IntakeSpec spec;
    spec.name = "adt-in";
    spec.interfaceId = iface_;
    spec.tier = store::Tier::Week7;
    spec.destinationIds = {destA_};
    spec.keys = keys;
    return std::make_unique<Intake>(*store_, spec, [](int32_t) {});
  }
  store::StoredMessage accept(Intake& in, std::string payload) {
    auto r = run<store::StoredMessage>(
        [&](auto cb) { in.accept(std::move(payload), cb); });
    EXPECT_TRUE(r.ok()) << r.error().message;
    return r.ok() ? *r : store::StoredMessage{};
  }
  // "type|control|key|charset|lane" of a stored message, NULL as "-".
  std::string columns(int64_t id) {
    return text(
        "SELECT concat_ws('|', coalesce(message_type, '-'), coalesce(control_id, '-'), "
        "coalesce(key_value, '-'), coalesce(charset, '-'), partition_key) "
        "FROM messages WHERE id = $1",
        {std::to_string(id)});
  }
};

KeySpec hl7Keys() {
  KeySpec k;
  k.orderingKey = "PID.3.1";
  k.partitions = 16;
  return k;
}

TEST_F(IntakeColumns, Hl7WithCustomDelimitersIsStoredWithItsHeaderAndKey) {
  auto in = make(hl7Keys());
  auto m = accept(*in,
                  "MSH#@!*&#SEND#FAC#RECV#FAC#20260101120000##ADT@A01@ADT_A01#CTL-7#P#2.5\r"
                  "PID#1##MRN-42@@@H##Doe@Jane\r");
  auto lane = keysOf(hl7Keys(), "MSH|^~\\&|A|B|C|D|1||ADT^A01|X|P|2.5\rPID|1||MRN-42\r").lane;
  EXPECT_EQ(columns(m.ref.id), "ADT^A01^ADT_A01|CTL-7|MRN-42|-|" + std::to_string(lane));

  // MSH-18 naming ISO-8859-1: the charset kept, the values read as it.
  auto latin1 = accept(*in,
                       "MSH|^~\\&|A|B|C|D|20260101||ORU^R01|C\xe9|P|2.5||||||8859/1\r"
                       "PID|1||M\xfc\r");
  EXPECT_EQ(text("SELECT concat_ws('|', message_type, control_id, key_value, charset) "
                 "FROM messages WHERE id = $1",
                 {std::to_string(latin1.ref.id)}),
            "ORU^R01|C\xc3\xa9|M\xc3\xbc|iso-8859-1");
}

TEST_F(IntakeColumns, JsonHasTheKeyValueOnly) {
  KeySpec k;
  k.format = config::Format::Json;
  k.orderingKey = "patient.mrn";
  k.partitions = 4;
  k.dedupeKey = "id";
  auto in = make(k);
  auto m = accept(*in, R"({"id":"E1","patient":{"mrn":"J-9"}})");
  EXPECT_EQ(columns(m.ref.id),
            "-|-|J-9|-|" + std::to_string(keysOf(k, R"({"patient":{"mrn":"J-9"}})").lane));
  auto none = accept(*in, R"({"id":"E2"})");
  EXPECT_EQ(columns(none.ref.id).substr(0, 8), "-|-|-|-|");
}

TEST_F(IntakeColumns, BatchesGroupsAndRoutesFillThemToo) {
  auto in = make(hl7Keys());
  auto b = run<store::BatchStored>([&](auto cb) {
    in->acceptBatch({"MSH|^~\\&|A|B|C|D|1||ADT^A08|B1|P|2.5\rPID|1||K1\r",
                     "MSH|^~\\&|A|B|C|D|1||ADT^A03|B2|P|2.5\rPID|1||K2\r"},
                    std::nullopt, cb);
  });
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ(text("SELECT string_agg(concat_ws('|', message_type, control_id, key_value), ',' "
                 "ORDER BY id) FROM messages"),
            "ADT^A08|B1|K1,ADT^A03|B2|K2");

  // Inserts waiting together go as one statement: each keeps its own.
  std::vector<std::optional<Result<store::StoredMessage>>> answers(3);
  for (int i = 0; i < 3; ++i)
    in->accept("MSH|^~\\&|A|B|C|D|1||ADT^A0" + std::to_string(i) + "|G" + std::to_string(i) +
                   "|P|2.5\rPID|1||P" + std::to_string(i) + "\r",
               [&answers, i](Result<store::StoredMessage> r) { answers[i] = std::move(r); });
  while ((!answers[0] || !answers[1] || !answers[2]) && uv_run(&loop_, UV_RUN_ONCE)) {
  }
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(answers[i] && answers[i]->ok());
    EXPECT_EQ(columns((*answers[i])->ref.id).substr(0, 16),
              "ADT^A0" + std::to_string(i) + "|G" + std::to_string(i) + "|P" + std::to_string(i) +
                  "|-|");
  }

  // A route's copy: read with the target interface's keys.
  auto target = run<int64_t>([&](auto cb) { store_->ensureInterface("adt-out", cb); });
  ASSERT_TRUE(target.ok());
  auto tdest = run<int64_t>([&](auto cb) { store_->ensureDestination(*target, "t", cb); });
  ASSERT_TRUE(tdest.ok());
  IntakeSpec spec;
  spec.name = "adt-out";
  spec.interfaceId = *target;
  spec.destinationIds = {*tdest};
  spec.keys = hl7Keys();
  Intake out(*store_, spec, [](int32_t) {});
  auto source = (*answers[0])->ref;
  std::string routed = "MSH|^~\\&|A|B|C|D|1||ADT^A31|R1|P|2.5\rPID|1||RK\r";
  auto r = run<std::vector<store::RoutedMessage>>([&](auto cb) {
    out.acceptRouted(destA_, {store::RoutedItem{source, routed, out.keysOf(routed).lane, {}}}, cb);
  });
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ(columns((*r)[0].stored.ref.id).substr(0, 15), "ADT^A31|R1|RK|-");
}

}  // namespace
}  // namespace ductus::intake
