#include "tests/schema/store_fixture.h"

#include <libpq-fe.h>

#include <random>

#include "tests/support/test_env.h"

namespace ductus::store::test {

std::string withDatabase(const std::string& url, const std::string& dbname) {
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(url.c_str(), &err);
  if (!opts) {
    std::string why = err ? err : "unparsable";
    PQfreemem(err);
    ADD_FAILURE() << "DUCTUS_TEST_DATABASE_URL: " << why;
    return url;
  }
  std::string out;
  auto quote = [](const std::string& v) {
    std::string q = "'";
    for (char c : v) {
      if (c == '\'' || c == '\\') q.push_back('\\');
      q.push_back(c);
    }
    return q + "'";
  };
  for (PQconninfoOption* o = opts; o->keyword; ++o) {
    if (std::string(o->keyword) == "dbname") continue;
    if (o->val && *o->val) out += std::string(o->keyword) + "=" + quote(o->val) + " ";
  }
  PQconninfoFree(opts);
  return out + "dbname=" + quote(dbname);
}

TestDatabase::TestDatabase() : adminUrl_(ductus::test::databaseUrl()) {
  std::random_device rd;
  name_ = "test_store_" + std::to_string(rd()) + std::to_string(rd() % 1000);
  conninfo_ = withDatabase(adminUrl_, name_);
  Sql admin(adminUrl_);
  // Identifiers can't be parameters; the name is ours (digits only).
  auto r = admin("CREATE DATABASE " + name_);
  if (!r) ADD_FAILURE() << "CREATE DATABASE " << name_ << ": " << r.error().message;
}

TestDatabase::~TestDatabase() {
  Sql admin(adminUrl_);
  auto r = admin("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
  if (!r) ADD_FAILURE() << "DROP DATABASE " << name_ << ": " << r.error().message;
}

Sql::Sql(const std::string& conninfo) {
  uv_loop_init(&loop_);
  conn_ = std::make_unique<PgConnection>(&loop_);
  conn_->connect(conninfo, [](Status s) {
    if (!s) ADD_FAILURE() << "connecting: " << s.error().message;
  });
}

Sql::~Sql() {
  conn_.reset();
  uv_run(&loop_, UV_RUN_DEFAULT);
  uv_loop_close(&loop_);
}

Result<PgResult> Sql::operator()(const std::string& sql, std::vector<Param> params) {
  return await<PgResult>(&loop_, [&](auto cb) { conn_->query(sql, std::move(params), cb); });
}

void Sql::send(const std::string& sql, std::vector<Param> params,
               std::function<void(Result<PgResult>)> cb) {
  conn_->query(sql, std::move(params), std::move(cb));
}

Status migrate(const std::string& conninfo) {
  auto migrations = embeddedMigrations();
  if (!migrations) return migrations.error();
  Sql s(conninfo);
  Migrator m(s.conn(), *migrations);
  auto r = await<MigrateReport>(s.loop(), [&](auto cb) { m.migrate(cb); });
  if (!r) return r.error();
  return {};
}

void StoreTest::SetUp() {
  uv_loop_init(&loop_);  // first: TearDown closes it even if a step below fails
  db_ = std::make_unique<TestDatabase>();
  ASSERT_TRUE(migrate(db_->conninfo()).ok());
  sql_ = std::make_unique<Sql>(db_->conninfo());
  StoreOptions options{db_->conninfo(), poolSize_};
  options.queueReadBytes = queueReadBytes_;
  store_ = std::make_unique<Store>(&loop_, options);
  auto started = await<bool>(&loop_, [&](auto cb) {
    store_->start([cb](Status s) {
      if (!s) return cb(s.error());
      cb(true);
    });
  });
  ASSERT_TRUE(started.ok()) << started.error().message;
  auto parts = run<PartitionReport>([&](auto cb) { store_->ensurePartitions({}, cb); });
  ASSERT_TRUE(parts.ok()) << parts.error().message;
  ASSERT_TRUE(parts->errors.empty()) << parts->errors[0];
  auto iface = run<int64_t>([&](auto cb) { store_->ensureInterface("adt-in", cb); });
  ASSERT_TRUE(iface.ok()) << iface.error().message;
  iface_ = *iface;
  for (auto dest : {std::pair{"a", &destA_}, {"b", &destB_}, {"c", &destC_}}) {
    // Not a structured binding: clang 14 can't capture one.
    const char* name = dest.first;
    auto d = run<int64_t>([&](auto cb) { store_->ensureDestination(iface_, name, cb); });
    ASSERT_TRUE(d.ok()) << d.error().message;
    *dest.second = *d;
  }
}

void StoreTest::TearDown() {
  store_.reset();
  uv_run(&loop_, UV_RUN_DEFAULT);
  uv_loop_close(&loop_);
  sql_.reset();
  db_.reset();
}

Result<StoredMessage> StoreTest::insert(NewMessage m) {
  return run<StoredMessage>([&](auto cb) { store_->insert(std::move(m), cb); });
}

NewMessage StoreTest::message(std::string payload, std::vector<int64_t> destinations,
                              std::optional<std::string> dedupe, int32_t lane) {
  NewMessage m;
  m.interfaceId = iface_;
  m.tier = Tier::Week1;
  m.payload = std::move(payload);
  m.destinationIds = std::move(destinations);
  m.dedupeKey = std::move(dedupe);
  m.partitionKey = lane;
  return m;
}

std::vector<QueuedDelivery> StoreTest::queue(int64_t destination, std::vector<int32_t> lanes,
                                             int64_t after) {
  auto r = run<QueueRead>([&](auto cb) { store_->readQueue(destination, lanes, after, cb); });
  EXPECT_TRUE(r.ok()) << r.error().message;
  return r ? r->rows : std::vector<QueuedDelivery>{};
}

int64_t StoreTest::scalar(const std::string& sql, std::vector<Param> params) {
  auto r = (*sql_)(sql, std::move(params));
  EXPECT_TRUE(r.ok()) << sql << ": " << r.error().message;
  if (!r || r->rows() == 0 || r->isNull(0, 0)) return -1;
  return r->integer(0, 0);
}

std::string StoreTest::text(const std::string& sql, std::vector<Param> params) {
  auto r = (*sql_)(sql, std::move(params));
  EXPECT_TRUE(r.ok()) << sql << ": " << r.error().message;
  if (!r || r->rows() == 0 || r->isNull(0, 0)) return "";
  return std::string(r->text(0, 0));
}

}  // namespace ductus::store::test
