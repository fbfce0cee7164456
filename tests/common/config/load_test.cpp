// Reading each file into the model, and the errors each key can produce,
// each with its exact file:line:column.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/common/config/project_dir.h"

namespace ductus::config::test {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// A real ed25519 public key as ssh-keyscan prints it (without the host).
constexpr const char* kSftpHostKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAkUt5CgstUNshcz4pink7vlO2LXNGaqbB//9HWYoX6I";

constexpr const char* kMllpToFile =
    "source:\n"
    "  mllp: { listen: 127.0.0.1:2575 }\n"
    "destination:\n"
    "  file: { path: out/ }\n";

TEST(LoadProject, AMinimalInterfaceGetsTheDocumentedDefaults) {
  ProjectDir p;
  p.iface("adt", kMllpToFile);
  auto o = p.load();
  ASSERT_TRUE(o.project) << p.errors();
  const InterfaceConfig& i = o.project->interfaces.at(0);
  EXPECT_EQ(i.name, "adt");
  EXPECT_EQ(i.format, Format::Hl7v2);
  EXPECT_EQ(i.timeout, 5000ms);
  EXPECT_EQ(i.durability, Durability::Strict);
  EXPECT_EQ(i.isolation, Isolation::Shared);
  EXPECT_EQ(i.retention, Retention::SevenWeeks);
  EXPECT_EQ(i.quarantined, QuarantinedRetention::Keep);
  EXPECT_EQ(i.maxMessageBytes, 64ull << 20);
  EXPECT_EQ(i.partitionCount(), 1u);
  ASSERT_EQ(i.destinations.size(), 1u);
  const Destination& d = i.destinations[0];
  EXPECT_EQ(d.name, "default");
  EXPECT_EQ(d.transform, "transform");
  EXPECT_EQ(d.output, Format::Hl7v2);
  EXPECT_EQ(d.maxAttempts, 0u);
  EXPECT_FALSE(d.saveOutput);
  EXPECT_EQ(std::get<FileDestination>(d.target).path, "out/");
  auto& m = std::get<MllpSource>(i.source);
  EXPECT_EQ(m.listen.host, "127.0.0.1");
  EXPECT_EQ(m.listen.port, 2575);
}

TEST(LoadProject, EveryDocumentedSettingIsReadIntoTheModel) {
  ProjectDir p;
  p.write("ductus.yaml",
          "api: { listen: 127.0.0.1:7799 }\n"
          "isolates: { workers: 3, heap_mb: 256 }\n"
          "retention: 3w\n"
          "max_message_size: 32MB\n");
  p.write("resources.yaml", "databases:\n  patients: { url: postgresql://db/p, max_connections: 4 }\n");
  p.iface("lab",
          "source:\n"
          "  http: { listen: 127.0.0.1:8080, path: /lab, mode: queue }\n"
          "format: json\n"
          "ordering: { key: patient.id, partitions: 32 }\n"
          "dedupe: { key: id }\n"
          "durability: relaxed\n"
          "timeout: 250ms\n"
          "isolation: dedicated\n"
          "workers: 2\n"
          "retention: 1w\n"
          "quarantined: purge\n"
          "max_message_size: 512KB\n"
          "dedicated_pools: { patients: 2 }\n"
          "destinations:\n"
          "  a:\n"
          "    mllp: { host: lab.example, port: 2576, ack_timeout: 10s }\n"
          "    transform: toHl7\n"
          "    output: hl7v2\n"
          "    retry: { max_attempts: 5 }\n"
          "    rate_limit: { messages: 10, per: 1m, over: drop }\n"
          "    save_output: true\n"
          "  b:\n"
          "    http: { url: \"https://lab.example/in\", method: PUT, headers: { X-A: b }, timeout: "
          "3s }\n");
  auto o = p.load();
  ASSERT_TRUE(o.project) << p.errors();
  const EngineConfig& e = o.project->engine;
  EXPECT_EQ(e.apiListen.port, 7799);
  EXPECT_EQ(e.isolateWorkers, 3u);
  EXPECT_EQ(e.heapMb, 256u);
  EXPECT_EQ(e.retention, Retention::ThreeWeeks);
  EXPECT_EQ(e.maxMessageBytes, 32ull << 20);
  EXPECT_EQ(o.project->resources.databases.at("patients").maxConnections, 4u);
  const InterfaceConfig& i = o.project->interfaces.at(0);
  EXPECT_EQ(std::get<HttpSource>(i.source).path, "/lab");
  EXPECT_EQ(i.format, Format::Json);
  EXPECT_EQ(i.ordering->key, "patient.id");
  EXPECT_EQ(i.partitionCount(), 32u);
  EXPECT_EQ(*i.dedupeKey, "id");
  EXPECT_EQ(i.durability, Durability::Relaxed);
  EXPECT_EQ(i.timeout, 250ms);
  EXPECT_EQ(i.isolation, Isolation::Dedicated);
  EXPECT_EQ(i.workers, 2u);
  EXPECT_EQ(i.retention, Retention::OneWeek);
  EXPECT_EQ(i.quarantined, QuarantinedRetention::Purge);
  EXPECT_EQ(i.maxMessageBytes, 512u << 10);
  EXPECT_EQ(i.dedicatedPools.at("patients"), 2u);
  ASSERT_EQ(i.destinations.size(), 2u);
  const Destination& a = i.destinations[0];
  EXPECT_EQ(a.name, "a");
  EXPECT_EQ(std::get<MllpDestination>(a.target).address.host, "lab.example");
  EXPECT_EQ(std::get<MllpDestination>(a.target).ackTimeout, 10s);
  EXPECT_EQ(a.transform, "toHl7");
  EXPECT_EQ(a.output, Format::Hl7v2);
  EXPECT_EQ(a.maxAttempts, 5u);
  ASSERT_TRUE(a.rateLimit);
  EXPECT_EQ(a.rateLimit->messages, 10u);
  EXPECT_EQ(a.rateLimit->per, 60s);
  EXPECT_TRUE(a.rateLimit->dropOver);
  EXPECT_TRUE(a.saveOutput);
  const Destination& b = i.destinations[1];
  auto& h = std::get<HttpDestination>(b.target);
  EXPECT_EQ(h.method, "PUT");
  EXPECT_EQ(h.headers.at("X-A"), "b");
  EXPECT_EQ(h.timeout, 3s);
  EXPECT_EQ(b.output, Format::Json);  // the interface's format by default
}

TEST(LoadProject, AnOrderingKeyWithoutPartitionsGetsSixteenLanes) {
  ProjectDir p;
  p.iface("adt", std::string(kMllpToFile) + "ordering: { key: PID.3.1 }\n");
  auto o = p.load();
  ASSERT_TRUE(o.project) << p.errors();
  EXPECT_EQ(o.project->interfaces[0].partitionCount(), 16u);
}

TEST(LoadProject, EachSourceKindIsRead) {
  ProjectDir p;
  p.iface("f", "source:\n  file: { path: in/, pattern: \"*.csv\", split: records, move_to: done/ }\n"
               "format: csv\ndestination:\n  file: { path: out/ }\n");
  p.iface("s", "source:\n  schedule: { cron: \"0 2 * * mon-fri\" }\nformat: json\n"
               "destination:\n  file: { path: out2/ }\n");
  p.iface("e", "source:\n  schedule: { every: 5m }\ndestination:\n  file: { path: out3/ }\n");
  p.iface("t", "source:\n  sftp: { host: sftp.example, user: u, password: p, path: /in, delete: true,\n"
               "          host_key: \"" + std::string(kSftpHostKey) + "\" }\n"
               "destination:\n  file: { path: out4/ }\n");
  p.iface("r", "source:\n  http: { listen: 127.0.0.1:8081, mode: respond }\nformat: json\n");
  auto o = p.load();
  ASSERT_TRUE(o.project) << p.errors();
  auto& f = std::get<FileSource>(o.project->find("f")->source);
  EXPECT_EQ(f.files.split, Split::Records);
  EXPECT_EQ(f.files.moveTo, "done/");
  EXPECT_EQ(std::get<ScheduleSource>(o.project->find("s")->source).cron, "0 2 * * mon-fri");
  EXPECT_EQ(*std::get<ScheduleSource>(o.project->find("e")->source).every, 5min);
  auto& t = std::get<SftpSource>(o.project->find("t")->source);
  EXPECT_EQ(t.server.port, 22);
  EXPECT_TRUE(t.files.deleteAfter);
  EXPECT_TRUE(o.project->find("r")->respondMode());
  EXPECT_TRUE(o.project->find("r")->destinations.empty());
}

TEST(LoadProject, AnUnknownKeyNamesTheNearestValidKeyAtItsLine) {
  ProjectDir p;
  p.iface("adt",
          "source:\n"
          "  mllp: { listen: 127.0.0.1:2575 }\n"
          "destinaton:\n"
          "  file: { path: out/ }\n");
  std::string e = p.errors();
  EXPECT_THAT(e, HasSubstr("interfaces/adt/interface.yaml:3:1: destinaton: unknown key `destinaton` "
                           "\u2014 did you mean `destination`?"));
}

TEST(LoadProject, AnUnknownNestedKeyIsPlacedAtItsOwnLineAndColumn) {
  ProjectDir p;
  p.iface("adt",
          "source:\n"
          "  mllp: { listen: 127.0.0.1:2575 }\n"
          "destination:\n"
          "  file: { path: out/ }\n"
          "  retry: { max_atempts: 3 }\n");
  EXPECT_THAT(p.errors(), HasSubstr("interfaces/adt/interface.yaml:5:12: destination.retry.max_atempts: "
                                    "unknown key `max_atempts` \u2014 did you mean `max_attempts`?"));
}

TEST(LoadProject, SettingsNotImplementedYetAreRefusedNotIgnored) {
  ProjectDir p;
  p.write("ductus.yaml", "doctor: { schedule: 6h }\n");
  p.write("resources.yaml", "ldap: {}\n");
  p.iface("adt",
          "source:\n"
          "  mllp: { listen: 127.0.0.1:2575 }\n"
          "owners: [team-a]\n"
          "destination:\n"
          "  file: { path: out/ }\n");
  std::string e = p.errors();
  EXPECT_THAT(e, HasSubstr("ductus.yaml:1:1: doctor: `doctor` (scheduled certificate and connection checks) is not supported yet"));
  EXPECT_THAT(e, HasSubstr("resources.yaml:1:1: ldap: `ldap`"));
  EXPECT_THAT(e, HasSubstr("interfaces/adt/interface.yaml:3:1: owners: `owners` (owners of an interface) is not supported yet"));
}

// tls:, allow: and certificates: as issue #30 writes them, and each
// mistake at its line with what was expected.
TEST(LoadProject, TlsAllowAndCertificatesAreReadAndTheirMistakesPlaced) {
  ProjectDir p;
  p.write("ductus.yaml",
          "api: { listen: 0.0.0.0:7700, tls: { certificate: server }, allow: [10.0.0.0/8] }\n");
  p.write("resources.yaml",
          "certificates:\n"
          "  server: { cert_file: tls/server.pem, key_file: tls/server.key }\n"
          "  analyzers: { ca_file: tls/ca.pem }\n"
          "  text: { cert: \"PEM\", key: \"KEY\" }\n");
  p.iface("adt",
          "source:\n"
          "  mllp: { listen: 127.0.0.1:2575, tls: { certificate: server, clients: { ca: analyzers, "
          "subjects: [\"CN=lab-analyzer\", lab-gw.hospital.org] } }, allow: [127.0.0.2, "
          "10.20.0.0/16, \"2001:db8::/32\", lab-gw.hospital.org] }\n"
          "destination:\n"
          "  file: { path: out/ }\n");
  auto loaded = p.load();
  ASSERT_TRUE(loaded.project) << p.errors();
  auto& project = loaded.project;
  const auto& m = std::get<config::MllpSource>(project->interfaces.at(0).source);
  ASSERT_TRUE(m.tls);
  EXPECT_EQ(m.tls->certificate, "server");
  EXPECT_EQ(m.tls->clientCa, "analyzers");
  EXPECT_EQ(m.tls->subjects, (std::vector<std::string>{"CN=lab-analyzer", "lab-gw.hospital.org"}));
  EXPECT_EQ(m.allow.entries.size(), 4u);
  ASSERT_TRUE(project->engine.apiTls);
  EXPECT_EQ(project->engine.apiAllow.entries, std::vector<std::string>{"10.0.0.0/8"});
  const auto& certs = project->resources.certificates;
  ASSERT_EQ(certs.size(), 3u);
  EXPECT_EQ(certs.at("server").certFile, p.root() / "tls/server.pem");
  EXPECT_EQ(certs.at("analyzers").caFile, p.root() / "tls/ca.pem");
  EXPECT_EQ(certs.at("text").certPem, "PEM");

  ProjectDir bad;
  bad.write("resources.yaml",
            "certificates:\n"
            "  half: { cert_file: a.pem }\n"
            "  twice: { cert_file: a.pem, cert: x, key_file: a.key }\n"
            "  empty: {}\n");
  bad.iface("adt",
            "source:\n"
            "  mllp: { listen: 127.0.0.1:2575, tls: { clients: { ca: x, subjects: [\"XX=y\"] } }, "
            "allow: [10.0.0.0/33, \"not a host\"] }\n"
            "destination:\n"
            "  file: { path: out/ }\n");
  bad.iface("empty",
            "source:\n  mllp: { listen: 127.0.0.1:2576, allow: [] }\ndestination:\n  file: { path: "
            "out/ }\n");
  std::string e = bad.errors();
  EXPECT_THAT(e, HasSubstr("resources.yaml:2:9: certificates.half: a certificate needs its key"));
  EXPECT_THAT(e, HasSubstr("certificates.twice.cert: give cert_file or cert, not both"));
  EXPECT_THAT(e, HasSubstr("certificates.empty: expected a pair"));
  EXPECT_THAT(e, HasSubstr("source.mllp.tls.certificate"));
  EXPECT_THAT(e, HasSubstr("\"XX\" in subject \"XX=y\" is not one of CN, O, OU, C, L, ST, DC"));
  EXPECT_THAT(e, HasSubstr("`10.0.0.0/33` is not an address"));
  EXPECT_THAT(e, HasSubstr("`not a host` is not an address"));
  EXPECT_THAT(e, HasSubstr("an empty allow: list would refuse every connection"));
}

// databases: kind: sqlserver with its URL, TLS verified unless
// trust_server_certificate; each mistake at its line.
TEST(LoadProject, ASqlServerDatabaseIsReadWithItsTlsChoice) {
  ProjectDir p;
  p.write("resources.yaml",
          "databases:\n"
          "  emr: { kind: sqlserver, url: \"sqlserver://ductus:pw@emr-db:1433/EMR\", "
          "max_connections: 4 }\n"
          "  lab: { kind: sqlserver, url: \"sqlserver://u:p@lab-db/lab\", "
          "trust_server_certificate: true }\n"
          "  pg: { url: \"postgresql://u@pg/db\" }\n");
  p.iface("adt",
          "source:\n  mllp: { listen: 127.0.0.1:2575 }\ndestination:\n  file: { path: out/ }\n");
  auto o = p.load();
  ASSERT_TRUE(o.project) << p.errors();
  const auto& dbs = o.project->resources.databases;
  EXPECT_EQ(dbs.at("emr").kind, DatabaseKind::SqlServer);
  EXPECT_EQ(dbs.at("emr").maxConnections, 4u);
  EXPECT_FALSE(dbs.at("emr").trustServerCertificate);
  EXPECT_TRUE(dbs.at("lab").trustServerCertificate);
  EXPECT_EQ(dbs.at("pg").kind, DatabaseKind::Postgresql);

  p.write("resources.yaml",
          "databases:\n"
          "  a: { kind: oracle, url: \"postgresql://u@h/db\" }\n"
          "  b: { kind: sqlserver, url: \"sqlserver://emr-db/EMR\" }\n"
          "  c: { url: \"sqlserver://u@h/db\" }\n"
          "  d: { url: \"postgresql://u@h/db\", trust_server_certificate: true }\n"
          "  e: { kind: sqlserver, url: \"sqlserver://u@h/db\", ca: corp, "
          "trust_server_certificate: true }\n"
          "certificates:\n  corp: { ca_file: tls/corp.pem }\n");
  o = p.load();
  ASSERT_FALSE(o.project);
  std::string e = p.errors();
  EXPECT_THAT(e, HasSubstr("resources.yaml:2:"));
  EXPECT_THAT(e, HasSubstr("databases.a.kind: expected postgresql or sqlserver, not \"oracle\""));
  EXPECT_THAT(e, HasSubstr("resources.yaml:3:"));
  EXPECT_THAT(e, HasSubstr("databases.b.url: no user@ before the host"));
  EXPECT_THAT(e, HasSubstr("databases.c.url: a sqlserver:// URL needs kind: sqlserver beside it"));
  EXPECT_THAT(
      e,
      HasSubstr("databases.d.trust_server_certificate: only a kind: sqlserver database takes it"));
  EXPECT_THAT(e, HasSubstr("databases.e.trust_server_certificate: ca: and "
                           "trust_server_certificate: true contradict"));
}

// Outbound TLS: tls: on MLLP destinations, ca:/certificate: beside a URL,
// a database's ca:; the plain forms keep working.
TEST(LoadProject, OutboundTlsIsReadBesideEachConnection) {
  ProjectDir p;
  p.write("ductus.yaml",
          "database: { url: \"postgresql://ductus@db/ductus\", ca: pg-ca }\n");
  p.write("resources.yaml",
          "databases:\n"
          "  lab: { url: \"postgresql://u@lab/db\", ca: pg-ca }\n"
          "  plain: { url: \"postgresql://u@plain/db\" }\n"
          "apis:\n"
          "  secure: { url: https://api.example, ca: corp, certificate: client }\n"
          "  open: { url: http://api.example }\n"
          "certificates:\n"
          "  pg-ca: { ca_file: tls/pg-ca.pem }\n"
          "  corp: { ca_file: tls/corp.pem }\n"
          "  client: { cert_file: tls/client.pem, key_file: tls/client.key }\n");
  p.iface("adt",
          "source:\n"
          "  mllp: { listen: 127.0.0.1:2575 }\n"
          "destinations:\n"
          "  a: { mllp: { host: lab, port: 2575, tls: true } }\n"
          "  b: { mllp: { host: lab, port: 2576, tls: { ca: corp, certificate: client } } }\n"
          "  c: { mllp: { host: lab, port: 2577 } }\n"
          "  d: { http: { url: https://x.example/in } }\n"
          "  e: { http: { url: http://x.example/in } }\n"
          "  f: { http: { url: https://x.example/in, ca: corp } }\n");
  auto o = p.load();
  ASSERT_TRUE(o.project) << p.errors();
  const auto& e = o.project->engine;
  EXPECT_EQ(e.database, "postgresql://ductus@db/ductus");
  EXPECT_TRUE(e.databaseTls.enabled);
  EXPECT_EQ(e.databaseTls.ca, "pg-ca");
  EXPECT_THAT(e.databaseTls.at, ::testing::EndsWith("ductus.yaml:1"));
  const auto& res = o.project->resources;
  EXPECT_EQ(res.databases.at("lab").tls.ca, "pg-ca");
  EXPECT_FALSE(res.databases.at("plain").tls.enabled);
  EXPECT_TRUE(res.apis.at("secure").tls.enabled);
  EXPECT_EQ(res.apis.at("secure").tls.certificate, "client");
  EXPECT_FALSE(res.apis.at("open").tls.enabled);
  const auto& d = o.project->interfaces.at(0).destinations;
  auto mllp = [&](size_t k) { return std::get<MllpDestination>(d.at(k).target).tls; };
  auto http = [&](size_t k) { return std::get<HttpDestination>(d.at(k).target).tls; };
  EXPECT_TRUE(mllp(0).enabled);
  EXPECT_EQ(mllp(0).ca, "");
  EXPECT_EQ(mllp(1), (tls::ConnectTls{true, "corp", "client", ""}));
  EXPECT_FALSE(mllp(2).enabled);
  EXPECT_TRUE(http(3).enabled);
  EXPECT_FALSE(http(4).enabled);
  EXPECT_EQ(http(5).ca, "corp");

  // The string form of database: still works.
  ProjectDir plain;
  plain.write("ductus.yaml", "database: \"postgresql://ductus@db/ductus\"\n");
  plain.iface("adt", kMllpToFile);
  auto po = plain.load();
  ASSERT_TRUE(po.project) << plain.errors();
  EXPECT_EQ(po.project->engine.database, "postgresql://ductus@db/ductus");
  EXPECT_FALSE(po.project->engine.databaseTls.enabled);

  ProjectDir bad;
  bad.write("resources.yaml", "apis:\n  a: { url: http://api.example, ca: corp }\n");
  bad.iface("adt",
            "source:\n"
            "  mllp: { listen: 127.0.0.1:2575 }\n"
            "destinations:\n"
            "  a: { mllp: { host: lab, port: 2575, tls: yes please } }\n"
            "  b: { http: { url: http://x.example/in, certificate: client } }\n"
            "  c: { http: { api: a, ca: corp } }\n");
  std::string errs = bad.errors();
  EXPECT_THAT(errs, HasSubstr("resources.yaml:2:33: apis.a.ca: `ca` is for TLS, but the URL is http://"));
  EXPECT_THAT(errs, HasSubstr("destinations.a.mllp.tls: expected true, false or { ca:"));
  EXPECT_THAT(errs, HasSubstr("destinations.b.http.certificate: `certificate` is for TLS"));
  EXPECT_THAT(errs, HasSubstr("destinations.c.http.ca: `ca` goes on the apis: entry"));
}

TEST(LoadProject, EveryErrorOfAProjectIsReportedInOneRun) {
  ProjectDir p;
  p.write("ductus.yaml", "retention: 2w\n");
  p.iface("a",
          "source:\n"
          "  mllp: { listen: 127.0.0.1:0 }\n"
          "timeout: 5\n"
          "destination:\n"
          "  file: { path: out/ }\n");
  p.iface("b",
          "source:\n"
          "  schedule: { every: 5 }\n"
          "destination:\n"
          "  file: { path: out/ }\n"
          "  save_output: yes\n");
  auto o = p.load();
  EXPECT_FALSE(o.project);
  std::string e = p.errors();
  EXPECT_EQ(o.diagnostics.size(), 5u) << e;
  EXPECT_THAT(e, HasSubstr("ductus.yaml:1:12: retention: expected 1w | 3w | 7w, got `2w`"));
  EXPECT_THAT(e, HasSubstr("interfaces/a/interface.yaml:2:19: source.mllp.listen: expected host:port"));
  EXPECT_THAT(e, HasSubstr("interfaces/a/interface.yaml:3:10: timeout: expected a duration such as 250ms"));
  EXPECT_THAT(e, HasSubstr("interfaces/b/interface.yaml:2:22: source.schedule.every: expected a duration"));
  EXPECT_THAT(e, HasSubstr("interfaces/b/interface.yaml:5:16: destination.save_output: expected true or false, got `yes`"));
}

TEST(LoadProject, TimeoutMustBeFromTenMillisecondsToTenMinutes) {
  for (auto [value, ok] : {std::pair{"10ms", true}, {"10m", true}, {"9ms", false}, {"11m", false}}) {
    ProjectDir p;
    p.iface("adt", std::string(kMllpToFile) + "timeout: " + value + "\n");
    std::string e = p.errors();
    if (ok) {
      EXPECT_EQ(e, "") << value;
    }
    else EXPECT_THAT(e, HasSubstr("interfaces/adt/interface.yaml:5:10: timeout: must be from 10ms to 10m, got `" +
                                  std::string(value) + "`"));
  }
}

TEST(LoadProject, RetentionIsOneThreeOrSevenWeeksAndPartitionsAtLeastOne) {
  ProjectDir p;
  p.iface("adt", std::string(kMllpToFile) + "retention: 14d\nordering: { key: PID.3.1, partitions: 0 }\n");
  std::string e = p.errors();
  EXPECT_THAT(e, HasSubstr("interfaces/adt/interface.yaml:5:12: retention: expected 1w | 3w | 7w, got `14d`"));
  EXPECT_THAT(e, HasSubstr("interfaces/adt/interface.yaml:6:39: ordering.partitions: expected a whole number from 1 to 4096, got `0`"));
}

TEST(LoadProject, QuarantinedIsKeepOrPurge) {
  ProjectDir p;
  p.iface("adt", std::string(kMllpToFile) + "quarantined: forever\n");
  EXPECT_THAT(
      p.errors(),
      HasSubstr(
          "interfaces/adt/interface.yaml:5:14: quarantined: expected keep | purge, got `forever`"));
}

TEST(LoadProject, SizesPortsAndHostsAreChecked) {
  ProjectDir p;
  p.write("ductus.yaml", "max_message_size: 64 megabytes\n");
  p.iface("adt",
          "source:\n"
          "  mllp: { listen: \"127.0.0.1:70000\" }\n"
          "destinations:\n"
          "  x:\n"
          "    mllp: { host: \"no such host!\", port: 0 }\n");
  std::string e = p.errors();
  EXPECT_THAT(e, HasSubstr("ductus.yaml:1:19: max_message_size: expected a size such as 512KB, 64MB or 1GB"));
  EXPECT_THAT(e, HasSubstr("interfaces/adt/interface.yaml:2:19: source.mllp.listen: expected host:port with a port from 1 to 65535"));
  EXPECT_THAT(e, HasSubstr("interfaces/adt/interface.yaml:5:19: destinations.x.mllp.host: expected a host name or IP address"));
  EXPECT_THAT(e, HasSubstr("interfaces/adt/interface.yaml:5:42: destinations.x.mllp.port: expected a whole number from 1 to 65535"));
}

TEST(LoadProject, AuditKeepIsReadInYearsOrADurationAndAtLeastAYear) {
  auto keepOf = [](const std::string& yaml) {
    ProjectDir p;
    p.write("ductus.yaml", yaml);
    p.iface("adt", kMllpToFile);
    auto o = p.load();
    return o.project ? std::optional(o.project->engine.auditKeep) : std::nullopt;
  };
  EXPECT_EQ(keepOf("retention: 1w\n"), std::chrono::hours(24 * 365 * 6)) << "6 years by default";
  EXPECT_EQ(keepOf("audit: { keep: 10y }\n"), std::chrono::hours(24 * 365 * 10));
  EXPECT_EQ(keepOf("audit: { keep: 400d }\n"), std::chrono::hours(24 * 400));
  ProjectDir p;
  p.write("ductus.yaml", "audit: { keep: 30d }\n");
  p.iface("adt", kMllpToFile);
  EXPECT_THAT(p.errors(), HasSubstr("ductus.yaml:1:16: audit.keep: must be from 365d"));
  ProjectDir q;
  q.write("ductus.yaml", "audit: { keep: 0y }\n");
  q.iface("adt", kMllpToFile);
  EXPECT_THAT(q.errors(), HasSubstr("audit.keep: must be from 1y to 100y, got `0y`"));
}

TEST(LoadProject, TheEventsTablesBoundsHaveDefaultsAndLimits) {
  auto load = [](const std::string& yaml) {
    ProjectDir p;
    p.write("ductus.yaml", yaml);
    p.iface("adt", kMllpToFile);
    return p.load();
  };
  auto o = load("retention: 1w\n");
  ASSERT_TRUE(o.project);
  EXPECT_EQ(o.project->engine.eventsKeep, std::chrono::hours(24 * 30)) << "30 days by default";
  EXPECT_EQ(o.project->engine.eventsMaxRows, 100'000);
  o = load("events: { keep: 7d, max_rows: 5000 }\n");
  ASSERT_TRUE(o.project);
  EXPECT_EQ(o.project->engine.eventsKeep, std::chrono::hours(24 * 7));
  EXPECT_EQ(o.project->engine.eventsMaxRows, 5'000);
  ProjectDir p;
  p.write("ductus.yaml", "events: { keep: 10m, max_rows: 10, size: 3 }\n");
  p.iface("adt", kMllpToFile);
  std::string e = p.errors();
  EXPECT_THAT(e, HasSubstr("events.keep: must be from"));
  EXPECT_THAT(e, HasSubstr("events.max_rows: expected a whole number from 1000 to 10000000"));
  EXPECT_THAT(e, HasSubstr("size"));
}

TEST(LoadProject, AMaxMessageSizeAWorkerCallCannotCarryIsRefused) {
  ProjectDir p;
  p.write("ductus.yaml", "max_message_size: 200MB\n");
  p.iface("adt",
          "source:\n  mllp: { listen: 127.0.0.1:2575 }\n"
          "destination:\n  file: { path: out/ }\n");
  EXPECT_THAT(
      p.errors(),
      HasSubstr("ductus.yaml:1:19: max_message_size: must be from 1KB to 64MB, got `200MB`"));
}

TEST(LoadProject, AFileDestinationWritesOwnerAndGroupOnlyUnlessItsModeSaysOtherwise) {
  ProjectDir p;
  p.iface("adt", kMllpToFile);
  p.iface("pub",
          "source:\n  mllp: { listen: 127.0.0.1:2576 }\n"
          "destination:\n  file: { path: out/, mode: \"0644\" }\n");
  auto o = p.load();
  ASSERT_TRUE(o.project) << p.errors();
  EXPECT_EQ(std::get<FileDestination>(o.project->interfaces.at(0).destinations[0].target).mode,
            0640);
  EXPECT_EQ(std::get<FileDestination>(o.project->interfaces.at(1).destinations[0].target).mode,
            0644);
}

TEST(LoadProject, AFileModeMustBeOctalAndLetTheEngineReadAndWrite) {
  for (auto [mode, message] :
       {std::pair{"rw-r-----", "expected an octal file mode such as \"0640\""},
        std::pair{"0999", "expected an octal file mode such as \"0640\""},
        std::pair{"0440", "the engine must be able to read and write its files"}}) {
    ProjectDir p;
    p.iface("adt", std::string("source:\n  mllp: { listen: 127.0.0.1:2575 }\n"
                               "destination:\n  file: { path: out/, mode: \"") +
                       mode + "\" }\n");
    EXPECT_THAT(p.errors(), HasSubstr(std::string("interface.yaml:4:")) ) << mode;
    EXPECT_THAT(p.errors(), HasSubstr(message)) << mode;
  }
}

TEST(LoadProject, AnInvalidCronExpressionIsRefusedAtItsLine) {
  ProjectDir p;
  p.iface("nightly", "source:\n  schedule: { cron: \"0 25 * * *\" }\ndestination:\n  file: { path: out/ }\n");
  EXPECT_THAT(p.errors(), HasSubstr("interfaces/nightly/interface.yaml:2:21: source.schedule.cron: cron hour field"));
}

TEST(LoadProject, YamlSyntaxErrorsArePlacedAtTheirLine) {
  ProjectDir p;
  p.iface("adt", "source:\n  mllp: { listen: 127.0.0.1:2575\ndestination: x\n");
  EXPECT_THAT(p.errors(), HasSubstr("interfaces/adt/interface.yaml:3:"));
  EXPECT_THAT(p.errors(), HasSubstr("not valid YAML"));
}

TEST(LoadProject, ADuplicateKeyIsRefused) {
  ProjectDir p;
  p.iface("adt", std::string(kMllpToFile) + "timeout: 1s\ntimeout: 2s\n");
  EXPECT_THAT(p.errors(), HasSubstr("interfaces/adt/interface.yaml:6:1: timeout: duplicate key `timeout` "
                                    "(first given on line 5)"));
}

TEST(LoadProject, AMissingSourceOrDestinationIsNamed) {
  ProjectDir p;
  p.iface("a", "format: hl7v2\n");
  std::string e = p.errors();
  EXPECT_THAT(e, HasSubstr("interfaces/a/interface.yaml:1:1: source: `source` is required"));
  EXPECT_THAT(e, HasSubstr("interfaces/a/interface.yaml:1:1: destination: `destination` (or `destinations`) is required"));
}

TEST(LoadProject, AMissingModuleFileIsNamed) {
  ProjectDir p;
  p.write("interfaces/adt/interface.yaml", kMllpToFile);
  EXPECT_THAT(p.errors(), HasSubstr("interfaces/adt/transform.js not found"));
}

TEST(LoadProject, AFolderWithoutDuctusYamlIsNotAProject) {
  ProjectDir p;
  std::filesystem::remove(p.root() / "ductus.yaml");
  p.iface("adt", kMllpToFile);
  EXPECT_THAT(p.errors(), HasSubstr("ductus.yaml: not found"));
}

TEST(LoadProject, LoadProjectReturnsEveryDiagnosticInItsError) {
  ProjectDir p;
  p.iface("adt", std::string(kMllpToFile) + "timeout: 1x\nretention: 2w\n");
  LoadOptions o;
  auto r = loadProject(p.root(), o);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::Config);
  EXPECT_THAT(r.error().message, HasSubstr("interface.yaml:5:10: timeout"));
  EXPECT_THAT(r.error().message, HasSubstr("interface.yaml:6:12: retention"));
}

TEST(LoadProject, ListenerLimitsHaveDefaultsAndAreReadFromDuctusYaml) {
  {
    ProjectDir p;
    p.iface("adt", kMllpToFile);
    auto o = p.load();
    ASSERT_TRUE(o.project) << p.errors();
    const EngineConfig::Limits& l = o.project->engine.limits;
    EXPECT_EQ(l.connectionsPerListener, 1000u);
    EXPECT_EQ(l.connectionsPerAddress, 250u);
    EXPECT_EQ(l.idleTimeout, 5min);
    EXPECT_EQ(l.frameDeadline, 60s);
    EXPECT_EQ(l.unreadAnswers, 1ull << 20);
  }
  ProjectDir p;
  p.write("ductus.yaml",
          "limits:\n"
          "  connections_per_listener: 3000\n"
          "  idle_timeout: 90s\n"
          "  frame_deadline: 5m\n"
          "  unread_answers: 256KB\n");
  p.iface("adt", kMllpToFile);
  auto o = p.load();
  ASSERT_TRUE(o.project) << p.errors();
  const EngineConfig::Limits& l = o.project->engine.limits;
  EXPECT_EQ(l.connectionsPerListener, 3000u);
  EXPECT_EQ(l.connectionsPerAddress, 750u) << "a quarter of connections_per_listener";
  EXPECT_EQ(l.idleTimeout, 90s);
  EXPECT_EQ(l.frameDeadline, 5min);
  EXPECT_EQ(l.unreadAnswers, 256ull << 10);
}

TEST(LoadProject, ConnectionsPerAddressIsReadOrAQuarterOfThePerListenerLimit) {
  {
    ProjectDir p;
    p.write("ductus.yaml", "limits:\n  connections_per_address: 7\n");
    p.iface("adt", kMllpToFile);
    auto o = p.load();
    ASSERT_TRUE(o.project) << p.errors();
    EXPECT_EQ(o.project->engine.limits.connectionsPerAddress, 7u);
    EXPECT_EQ(o.project->engine.limits.connectionsPerListener, 1000u);
  }
  {
    // A quarter of 3 is 0: at least one connection per address.
    ProjectDir p;
    p.write("ductus.yaml", "limits: { connections_per_listener: 3 }\n");
    p.iface("adt", kMllpToFile);
    auto o = p.load();
    ASSERT_TRUE(o.project) << p.errors();
    EXPECT_EQ(o.project->engine.limits.connectionsPerAddress, 1u);
  }
  for (const char* bad : {"0", "1000001", "-1", "many"}) {
    ProjectDir p;
    p.write("ductus.yaml",
            std::string("# listeners\nlimits:\n  connections_per_address: ") + bad + "\n");
    p.iface("adt", kMllpToFile);
    EXPECT_THAT(p.errors(),
                HasSubstr(std::string("ductus.yaml:3:28: limits.connections_per_address: expected "
                                      "a whole number from 1 to 1000000, got `") +
                          bad + "`"));
  }
}

TEST(LoadProject, BadListenerLimitsArePlacedAtTheirLine) {
  ProjectDir p;
  p.write("ductus.yaml",
          "limits:\n"
          "  connections_per_listener: 0\n"
          "  idle_timeout: 5\n"
          "  frame_deadline: 2h\n"
          "  unread_answers: 2GB\n"
          "  idle_timout: 5m\n");
  p.iface("adt", kMllpToFile);
  std::string e = p.errors();
  EXPECT_THAT(e, HasSubstr("ductus.yaml:2:29: limits.connections_per_listener: expected a whole "
                           "number from 1 to 1000000, got `0`"));
  EXPECT_THAT(e, HasSubstr("ductus.yaml:3:17: limits.idle_timeout: expected a duration such as "
                           "250ms, 5s, 10m or 1h, got `5`"));
  EXPECT_THAT(e, HasSubstr("ductus.yaml:4:19: limits.frame_deadline: must be from 1s to 1h, got "
                           "`2h`"));
  EXPECT_THAT(e, HasSubstr("ductus.yaml:5:19: limits.unread_answers: must be from 1KB to 1024MB, "
                           "got `2GB`"));
  EXPECT_THAT(e, HasSubstr("ductus.yaml:6:3: limits.idle_timout:"));
  EXPECT_THAT(e, HasSubstr("idle_timeout"));  // the nearest known key
}

TEST(LoadProject, LimitsMustBeAMapping) {
  ProjectDir p;
  p.write("ductus.yaml", "limits: 1000\n");
  p.iface("adt", kMllpToFile);
  EXPECT_THAT(p.errors(), HasSubstr("ductus.yaml:1:9: limits:"));
}

TEST(LoadProject, CharsetDefaultsToAutoAndTakesUtf8OrIso88591) {
  ProjectDir p;
  auto on = [](int port, const std::string& extra) {
    return "source:\n  mllp: { listen: 127.0.0.1:" + std::to_string(port) +
           " }\ndestination:\n  file: { path: out/ }\n" + extra;
  };
  p.iface("a", on(2575, ""));
  p.iface("b", on(2576, "charset: utf-8\n"));
  p.iface("c", on(2577, "charset: iso-8859-1\n"));
  p.iface("d", on(2578, "charset: auto\n"));
  auto o = p.load();
  ASSERT_TRUE(o.project) << p.errors();
  EXPECT_EQ(o.project->interfaces.at(0).charset, Charset::Auto);
  EXPECT_EQ(o.project->interfaces.at(1).charset, Charset::Utf8);
  EXPECT_EQ(o.project->interfaces.at(2).charset, Charset::Latin1);
  EXPECT_EQ(o.project->interfaces.at(3).charset, Charset::Auto);
  EXPECT_STREQ(charsetName(Charset::Utf8), "utf-8");
  EXPECT_STREQ(charsetName(Charset::Latin1), "iso-8859-1");
  EXPECT_STREQ(charsetName(Charset::Auto), "auto");
}

TEST(LoadProject, AnUnknownCharsetIsPlacedAtItsLine) {
  ProjectDir p;
  p.iface("a", std::string(kMllpToFile) + "charset: latin9\n");
  EXPECT_THAT(p.errors(), HasSubstr("interfaces/a/interface.yaml:5:10: charset: expected auto | "
                                    "utf-8 | iso-8859-1, got `latin9`"));
}

}  // namespace
}  // namespace ductus::config::test

namespace ductus::config::test {
namespace {

// monitor: and alerts: as issue #31 writes them (the shapes users rely
// on), read into the model.
TEST(LoadProject, MonitorAndAlertsAreReadAsTheIssueWritesThem) {
  ProjectDir p;
  p.write("ductus.yaml",
          "alerts:\n"
          "  smtp: { host: mail.hospital.org, port: 587, from: ductus@hospital.org, user: ductus, "
          "password: \"${env:SMTP_PASSWORD}\" }\n"
          "  channels:\n"
          "    oncall: { email: [oncall@hospital.org] }\n"
          "    hook: { webhook: https://chat.hospital.org/hooks/x, format: slack }\n"
          "  rules:\n"
          "    - { when: [stalled, behind, error, stopped], severity: critical, notify: [oncall, hook] }\n"
          "  heartbeat: { url: https://uptime.hospital.org/ping/x, every: 1m }\n"
          "  quiet_hours: { between: \"22:00-07:00\", hold: [warning] }\n"
          "  remind: 30m\n");
  p.iface("adt",
          "source:\n  mllp: { listen: 127.0.0.1:2575 }\n"
          "monitor:\n"
          "  behind: { waiting: 5, oldest: 10m }\n"
          "  active_within: { within: 30m, between: \"07:00-19:00\" }\n"
          "  active_by: { weekly: \"mon 06:00\", from: \"04:00\" }\n"
          "destinations:\n"
          "  lab:\n    file: { path: out/ }\n    monitor: { behind: { oldest: 1h } }\n");
  auto out = p.load(withEnv({{"SMTP_PASSWORD", "s3cret"}}));
  ASSERT_TRUE(out.project) << p.errors(withEnv({{"SMTP_PASSWORD", "s3cret"}}));
  const auto& a = out.project->engine.alerts;
  EXPECT_TRUE(a.enabled);
  ASSERT_TRUE(a.smtp);
  EXPECT_EQ(a.smtp->password, "s3cret");
  EXPECT_EQ(a.smtp->port, 587);
  ASSERT_EQ(a.channels.size(), 2u);
  EXPECT_EQ(a.channel("hook")->format, monitor::WebhookFormat::Slack);
  ASSERT_EQ(a.rules.size(), 1u);
  EXPECT_EQ(a.rules[0].when.size(), 4u);
  EXPECT_EQ(a.rules[0].severity, monitor::Severity::Critical);
  ASSERT_TRUE(a.heartbeat);
  EXPECT_EQ(a.heartbeat->every.count(), 60);
  ASSERT_TRUE(a.quietHours);
  EXPECT_EQ(a.quietHours->between.startMinute, 22 * 60);
  EXPECT_EQ(a.quietHours->hold, std::vector<monitor::Severity>{monitor::Severity::Warning});
  EXPECT_EQ(a.remind.count(), 1800);
  const auto& m = out.project->interfaces[0].monitor;
  ASSERT_TRUE(m.behind);
  EXPECT_EQ(m.behind->waiting, 5);
  EXPECT_EQ(m.behind->oldest->count(), 600);
  ASSERT_TRUE(m.activeWithin && m.activeWithin->between);
  EXPECT_EQ(m.activeWithin->between->endMinute, 19 * 60);
  ASSERT_TRUE(m.activeBy);
  EXPECT_EQ(m.activeBy->kind, monitor::ActiveBy::Kind::Weekly);
  EXPECT_EQ(m.activeBy->weekday, 1);
  EXPECT_EQ(m.activeBy->fromMinute, 4 * 60);
  ASSERT_TRUE(out.project->interfaces[0].destinations[0].behind);
  EXPECT_EQ(out.project->interfaces[0].destinations[0].behind->oldest->count(), 3600);
}

TEST(LoadProject, MonitorAndAlertsMistakesArePlacedWithWhatWasExpected) {
  ProjectDir p;
  p.write("ductus.yaml",
          "alerts:\n"
          "  channels:\n"
          "    oncall: { email: [\"x@y.org\\r\\nRCPT TO:<evil@z>\"] }\n"
          "    hook: { webhook: ftp://x }\n"
          "  rules:\n"
          "    - { when: [stuck], severity: fatal, notify: [pager] }\n"
          "  remind: 1s\n");
  p.iface("adt",
          "source:\n  mllp: { listen: 127.0.0.1:2575 }\n"
          "monitor:\n"
          "  behind: {}\n"
          "  active_within: { within: 30m, between: \"07:00-07:00\" }\n"
          "  active_by: { daily: \"25:00\" }\n"
          "destination:\n  file: { path: out/ }\n");
  std::string e = p.errors();
  EXPECT_THAT(e, HasSubstr("alerts.channels.oncall.email: `x@y.org"));
  EXPECT_THAT(e, HasSubstr("alerts.channels.hook.webhook: expected an http:// or https:// URL"));
  EXPECT_THAT(e, HasSubstr("alerts.channels.oncall: the channel sends e-mail: alerts.smtp:"));
  EXPECT_THAT(e, HasSubstr("unknown state `stuck`"));
  EXPECT_THAT(e, HasSubstr("expected info | warning | critical, got `fatal`"));
  EXPECT_THAT(e, HasSubstr("no channel `pager` under alerts.channels"));
  EXPECT_THAT(e, HasSubstr("ductus.yaml:7:"));  // remind: 1s, below its floor
  EXPECT_THAT(e, HasSubstr("interface.yaml:4:"));
  EXPECT_THAT(e, HasSubstr("give waiting:"));
  EXPECT_THAT(e, HasSubstr("the window starts and ends at the same time"));
  EXPECT_THAT(e, HasSubstr("monitor.active_by.daily: expected a time of day as HH:MM"));
}

// Every other mistake in monitor: and alerts:, each at its line.
TEST(LoadProject, EachMonitorMistakeIsPlacedAtItsLine) {
  ProjectDir p;
  p.iface("a",
          "source:\n  mllp: { listen: 127.0.0.1:2575 }\n"
          "monitor:\n"
          "  active_with: 30m\n"
          "destination:\n  file: { path: out/ }\n");
  p.iface("b",
          "source:\n  mllp: { listen: 127.0.0.1:2576 }\n"
          "monitor:\n"
          "  behind: { waiting: 0 }\n"
          "  active_within: { between: \"07:00-19\" }\n"
          "  active_by: { daily: \"06:00\", weekly: \"mon 06:00\" }\n"
          "destination:\n  file: { path: out/ }\n");
  p.iface("c",
          "source:\n  mllp: { listen: 127.0.0.1:2577 }\n"
          "monitor:\n"
          "  active_by: { weekly: \"someday 06:00\", from: \"4:00\" }\n"
          "destinations:\n  lab:\n    file: { path: out/ }\n"
          "    monitor: { active_within: 5m }\n");
  p.iface("d",
          "source:\n  mllp: { listen: 127.0.0.1:2578 }\n"
          "monitor:\n"
          "  active_by: { cron: \"0 25 * * *\" }\n"
          "destination:\n  file: { path: out/ }\n");
  p.iface("r",
          "source:\n  http: { listen: 127.0.0.1:8081, mode: respond }\nformat: json\n"
          "monitor:\n"
          "  behind: { waiting: 5 }\n");
  std::string e = p.errors();
  EXPECT_THAT(e, HasSubstr("interfaces/a/interface.yaml:4:3: monitor.active_with: unknown key "
                           "`active_with` \u2014 did you mean `active_within`?"));
  EXPECT_THAT(e, HasSubstr("interfaces/b/interface.yaml:4:"));  // waiting: 0
  EXPECT_THAT(e, HasSubstr("interfaces/b/interface.yaml:5:18: monitor.active_within.within"));
  EXPECT_THAT(e, HasSubstr("monitor.active_within.within: `within` is required"));
  EXPECT_THAT(e, HasSubstr("monitor.active_within.between: expected a part of the day"));
  EXPECT_THAT(e, HasSubstr("interfaces/b/interface.yaml:6:14: monitor.active_by: give exactly one of"));
  EXPECT_THAT(e, HasSubstr("interfaces/c/interface.yaml:4:24: monitor.active_by.weekly"));
  EXPECT_THAT(e, HasSubstr("monitor.active_by.weekly: expected a weekday and a time, e.g. \"mon 06:00\""));
  EXPECT_THAT(e, HasSubstr("monitor.active_by.from: expected a time of day as HH:MM (00:00-23:59), "
                           "got `4:00`"));
  EXPECT_THAT(e, HasSubstr("destinations.lab.monitor.active_within: unknown key `active_within`"));
  EXPECT_THAT(e, HasSubstr("interfaces/d/interface.yaml:4:22: monitor.active_by.cron"));
  EXPECT_THAT(e, HasSubstr("monitor.active_by.cron: cron "));
  EXPECT_THAT(e, HasSubstr("interfaces/r/interface.yaml:4:1: monitor.behind: a respond-mode interface "
                           "has no queue to fall behind"));

  // Weekdays in any case, three letters or whole; a respond-mode interface
  // may still expect traffic.
  ProjectDir ok;
  ok.iface("a",
           "source:\n  mllp: { listen: 127.0.0.1:2575 }\n"
           "monitor: { active_by: { weekly: \"Saturday 23:59\" }, active_within: 30m }\n"
           "destination:\n  file: { path: out/ }\n");
  ok.iface("b",
           "source:\n  mllp: { listen: 127.0.0.1:2576 }\n"
           "monitor: { active_by: { weekly: \"SUN 00:00\" } }\n"
           "destination:\n  file: { path: out/ }\n");
  ok.iface("r",
           "source:\n  http: { listen: 127.0.0.1:8081, mode: respond }\nformat: json\n"
           "monitor: { active_by: { cron: \"0 6 * * 1-5\", from: \"04:00\" } }\n");
  auto o = ok.load();
  ASSERT_TRUE(o.project) << ok.errors();
  EXPECT_EQ(o.project->find("a")->monitor.activeBy->weekday, 6);
  EXPECT_EQ(o.project->find("a")->monitor.activeBy->minuteOfDay, 23 * 60 + 59);
  EXPECT_EQ(o.project->find("a")->monitor.activeWithin->within.count(), 1800);
  EXPECT_EQ(o.project->find("b")->monitor.activeBy->weekday, 0);
  EXPECT_EQ(o.project->find("r")->monitor.activeBy->kind, monitor::ActiveBy::Kind::Cron);
  EXPECT_EQ(o.project->find("a")->monitorAt.line, 3);
}

TEST(LoadProject, EachAlertsMistakeIsPlacedAtItsLine) {
  ProjectDir p;
  p.write("ductus.yaml",
          "alerts:\n"
          "  smtp: { host: mail.example, tls: sometimes }\n"
          "  channels:\n"
          "    one: { email: \"a@b.org, c@d.org\" }\n"
          "    none: {}\n"
          "  rules:\n"
          "    - { when: [stalld], notify: one }\n"
          "  heartbeat: { url: ftp://up.example/x, every: 5s }\n"
          "  quiet_hours: { between: \"22:00-07:00\", hold: [loud] }\n"
          "  remind: 10s\n"
          "  certificates: { warn_days: [7, 14] }\n"
          "  pager: {}\n");
  p.iface("a", "source:\n  mllp: { listen: 127.0.0.1:2575 }\ndestination:\n  file: { path: out/ }\n");
  std::string e = p.errors();
  EXPECT_THAT(e, HasSubstr("ductus.yaml:2:9: alerts.smtp.from: `from` is required"));
  EXPECT_THAT(e, HasSubstr("alerts.smtp.tls: expected starttls | required | tls | off, got `sometimes`"));
  EXPECT_THAT(e, HasSubstr("ductus.yaml:4:"));
  EXPECT_THAT(e, HasSubstr("alerts.channels.one.email: `a@b.org, c@d.org` is not an address"));
  EXPECT_THAT(e, HasSubstr("alerts.channels.none: a channel needs email: (addresses) or webhook:"));
  EXPECT_THAT(e, HasSubstr("ductus.yaml:7:"));
  EXPECT_THAT(e,
              HasSubstr("unknown state `stalld`: expected stopped, paused, stalled, error, behind, "
                        "intake_stopped, late, quiet or expiring \u2014 did you mean `stalled`?"));
  EXPECT_THAT(e, HasSubstr("ductus.yaml:8:"));
  EXPECT_THAT(e, HasSubstr("alerts.heartbeat.url: expected an http:// or https:// URL"));
  EXPECT_THAT(e, HasSubstr("alerts.heartbeat.every:"));
  EXPECT_THAT(e, HasSubstr("ductus.yaml:9:"));
  EXPECT_THAT(e, HasSubstr("unknown severity `loud`"));
  EXPECT_THAT(e, HasSubstr("ductus.yaml:10:11: alerts.remind: must be from 15s"));
  EXPECT_THAT(e, HasSubstr("ductus.yaml:11:"));
  EXPECT_THAT(e, HasSubstr("alerts.certificates.warn_days: expected whole days, descending"));
  EXPECT_THAT(e, HasSubstr("ductus.yaml:12:3: alerts.pager: unknown key `pager`"));
}

// The defaults the issue gives, expiring as a state, and ${...} allowed in
// alerts: alone among ductus.yaml's sections.
TEST(LoadProject, AlertsDefaultsAndSubstitution) {
  ProjectDir p;
  p.write("ductus.yaml",
          "alerts:\n"
          "  smtp: { host: \"${env:SMTP_HOST}\", from: ductus@hospital.org, tls: tls,\n"
          "          user: d, password: \"${env:SMTP_PASSWORD}\" }\n"
          "  channels:\n"
          "    oncall: { email: oncall@hospital.org }\n"
          "    hook: { webhook: \"https://chat.hospital.org/hooks/${env:HOOK}\" }\n"
          "  rules:\n"
          "    - { when: [expiring], severity: warning, notify: [oncall, hook] }\n"
          "  heartbeat: { url: https://uptime.hospital.org/ping/x }\n"
          "  quiet_hours: { between: \"22:00-07:00\" }\n"
          "  remind: 1m\n");
  p.iface("a", "source:\n  mllp: { listen: 127.0.0.1:2575 }\ndestination:\n  file: { path: out/ }\n");
  auto env = withEnv({{"SMTP_HOST", "mail.hospital.org"}, {"SMTP_PASSWORD", "pw"}, {"HOOK", "t0k"}});
  auto o = p.load(env);
  ASSERT_TRUE(o.project) << p.errors(env);
  EXPECT_TRUE(o.warnings.empty());
  const auto& a = o.project->engine.alerts;
  EXPECT_EQ(a.smtp->host, "mail.hospital.org");
  EXPECT_EQ(a.smtp->port, 465);
  EXPECT_EQ(a.smtp->tls, monitor::SmtpServer::Tls::Implicit);
  EXPECT_EQ(a.smtp->password, "pw");
  EXPECT_EQ(a.channel("oncall")->email, std::vector<std::string>{"oncall@hospital.org"});
  EXPECT_EQ(a.channel("hook")->webhook, "https://chat.hospital.org/hooks/t0k");
  EXPECT_EQ(a.channel("hook")->format, monitor::WebhookFormat::Json);
  EXPECT_EQ(a.rules[0].when, std::vector<monitor::State>{monitor::State::Expiring});
  EXPECT_EQ(a.heartbeat->every.count(), 60);
  EXPECT_EQ(a.quietHours->hold,
            (std::vector<monitor::Severity>{monitor::Severity::Info, monitor::Severity::Warning}));
  EXPECT_EQ(a.remind.count(), 60);
  EXPECT_EQ(a.settle.count(), 120);
  EXPECT_EQ(a.certificateDays, (std::vector<int>{30, 14, 7}));

  ProjectDir elsewhere;
  elsewhere.write("ductus.yaml", "api: { listen: \"${env:LISTEN}\" }\n");
  elsewhere.iface("a", "source:\n  mllp: { listen: 127.0.0.1:2575 }\ndestination:\n  file: { path: out/ }\n");
  EXPECT_THAT(elsewhere.errors(withEnv({{"LISTEN", "127.0.0.1:7700"}})),
              HasSubstr("${...} is not allowed here"));
}

}  // namespace
}  // namespace ductus::config::test

// ---- sftp: servers -----------------------------------------------------------

namespace ductus::config::test {
namespace {

std::string sftpSource(const std::string& server) {
  return "source:\n  sftp: { " + server + ", path: outbox/, delete: true }\n"
         "destination:\n  file: { path: out/ }\n";
}

TEST(LoadSftp, AKeyFileAPinnedKeyAndAPasswordOnlyDestinationAreRead) {
  ProjectDir p;
  auto key = p.write("keys/lab", "-----BEGIN OPENSSH PRIVATE KEY-----\nx\n-----END OPENSSH PRIVATE KEY-----\n");
  std::filesystem::permissions(key, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  p.iface("t", "source:\n  sftp: { host: lab-gw.example, port: 2222, user: ductus, private_key: keys/lab,\n"
               "          host_key: \"" + std::string(kSftpHostKey) + "\", path: outbox/, move_to: done/ }\n"
               "destination:\n  sftp:\n    host: out.example\n    user: u\n    password: pw\n"
               "    host_key:\n      - \"" + std::string(kSftpHostKey) + "\"\n"
               "      - \"" + std::string(kSftpHostKey) + " a comment\"\n"
               "    path: inbox/\n    name: \"{id}.hl7\"\n");
  auto o = p.load();
  ASSERT_TRUE(o.project) << p.errors();
  EXPECT_TRUE(o.warnings.empty());
  auto& s = std::get<SftpSource>(o.project->find("t")->source).server;
  EXPECT_EQ(s.host, "lab-gw.example");
  EXPECT_EQ(s.port, 2222);
  EXPECT_EQ(s.user, "ductus");
  EXPECT_EQ(s.privateKeyFile, p.root() / "keys/lab");
  EXPECT_TRUE(s.privateKeyPem.empty());
  EXPECT_EQ(s.hostKeys, std::vector<std::string>{kSftpHostKey});
  EXPECT_THAT(s.at, ::testing::EndsWith("interfaces/t/interface.yaml:2"));
  auto& d = std::get<SftpDestination>(o.project->find("t")->destinations[0].target);
  EXPECT_EQ(d.server.password, "pw");
  EXPECT_EQ(d.server.port, 22);
  EXPECT_TRUE(d.server.privateKeyFile.empty());
  EXPECT_EQ(d.server.hostKeys.size(), 2u);
  EXPECT_EQ(d.path, "inbox/");
  EXPECT_EQ(d.name, "{id}.hl7");
}

TEST(LoadSftp, AnInlinePemFromASubstitutionIsTheKeyItself) {
  ProjectDir p;
  const char* pem = "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----\n";
  p.iface("t", "source:\n  file: { path: in/, delete: true }\ndestination:\n"
               "  sftp: { host: out.example, user: u, private_key: \"${env:LAB_KEY}\",\n"
               "          host_key: \"" + std::string(kSftpHostKey) + "\", path: inbox/ }\n");
  auto env = withEnv({{"LAB_KEY", pem}});
  auto o = p.load(env);
  ASSERT_TRUE(o.project) << p.errors(env);
  auto& d = std::get<SftpDestination>(o.project->find("t")->destinations[0].target);
  EXPECT_EQ(d.server.privateKeyPem, pem);
  EXPECT_TRUE(d.server.privateKeyFile.empty());
}

TEST(LoadSftp, AnUnpinnedServerIsRefusedWithTheCommandThatGetsItsKey) {
  ProjectDir p;
  p.iface("t", sftpSource("host: sftp.example, port: 2222, user: u, password: p"));
  EXPECT_THAT(p.errors(),
              HasSubstr("interfaces/t/interface.yaml:2:9: source.sftp: the server's key is not pinned: "
                        "add host_key: \"<type> <base64>\" (get it with `ssh-keyscan -p 2222 sftp.example`"));
}

TEST(LoadSftp, HostKeyAndKnownHostsTogetherAreRefused) {
  ProjectDir p;
  p.write("known_hosts", std::string("sftp.example ") + kSftpHostKey + "\n");
  p.iface("t", sftpSource("host: sftp.example, user: u, password: p, known_hosts: known_hosts, host_key: \"" +
                          std::string(kSftpHostKey) + "\""));
  EXPECT_THAT(p.errors(), HasSubstr("source.sftp.known_hosts: give host_key: or known_hosts:, not both"));
}

TEST(LoadSftp, NoSignInIsRefused) {
  ProjectDir p;
  p.iface("t", sftpSource("host: sftp.example, user: u, host_key: \"" + std::string(kSftpHostKey) + "\""));
  EXPECT_THAT(p.errors(), HasSubstr("interfaces/t/interface.yaml:2:9: source.sftp: no sign-in: give "
                                    "private_key:"));
}

TEST(LoadSftp, AMalformedHostKeyIsRefusedAtItsLineSayingWhy) {
  ProjectDir p;
  std::string blob = std::string(kSftpHostKey).substr(12);  // the base64 alone
  p.iface("t", "source:\n  file: { path: in/, delete: true }\ndestinations:\n"
               "  a:\n    sftp:\n      host: h\n      user: u\n      password: p\n      path: x/\n"
               "      host_key:\n"
               "        - \"ssh-foo " + blob + "\"\n"
               "        - \"ssh-ed25519 AAAA!!!!\"\n"
               "        - \"ssh-rsa " + blob + "\"\n"
               "        - \"h.example " + std::string(kSftpHostKey) + "\"\n"
               "        - \"ssh-ed25519\"\n");
  std::string e = p.errors();
  EXPECT_THAT(e, HasSubstr(":11:11: destinations.a.sftp.host_key[0]: `ssh-foo` is not a host key type"));
  EXPECT_THAT(e, HasSubstr(":12:11: destinations.a.sftp.host_key[1]: the key after ssh-ed25519 is not valid "
                           "base64"));
  EXPECT_THAT(e, HasSubstr(":13:11: destinations.a.sftp.host_key[2]: the base64 is not a ssh-rsa key"));
  EXPECT_THAT(e, HasSubstr(":14:11: destinations.a.sftp.host_key[3]: `h.example` is not a host key type"));
  EXPECT_THAT(e, HasSubstr(":15:11: destinations.a.sftp.host_key[4]: expected \"<type> <base64>\""));
}

TEST(LoadSftp, AMissingKeyFileIsAnErrorAtItsLine) {
  ProjectDir p;
  p.iface("t", sftpSource("host: sftp.example, user: u, private_key: keys/none, host_key: \"" +
                          std::string(kSftpHostKey) + "\""));
  EXPECT_THAT(p.errors(), HasSubstr("interfaces/t/interface.yaml:2:53: source.sftp.private_key: "));
  EXPECT_THAT(p.errors(), HasSubstr("keys/none: No such file or directory"));
}

TEST(LoadSftp, AKeyFileOthersCanReadIsAWarning) {
  ProjectDir p;
  auto key = p.write("keys/lab", "k");
  std::filesystem::permissions(key, std::filesystem::perms(0644));
  p.iface("t", sftpSource("host: sftp.example, user: u, private_key: keys/lab, host_key: \"" +
                          std::string(kSftpHostKey) + "\""));
  auto o = p.load();
  ASSERT_TRUE(o.project) << p.errors();
  ASSERT_EQ(o.warnings.size(), 1u);
  EXPECT_EQ(o.warnings[0].line, 2);
  EXPECT_EQ(o.warnings[0].keyPath, "source.sftp.private_key");
  EXPECT_THAT(o.warnings[0].message, HasSubstr("can be read by its group or others: chmod 600 it"));
}

TEST(LoadSftp, AKnownHostsFileMustHaveTheServersEntry) {
  ProjectDir p;
  // Port 2222 is written [host]:port; a plain entry for the host is port 22's.
  p.write("kh/plain", std::string("sftp.example ") + kSftpHostKey + "\n");
  p.write("kh/ported", std::string("# keyscan\n@revoked * ") + kSftpHostKey + "\nother,[sftp.*]:22?2 " + kSftpHostKey + "\n");
  // As ssh-keygen -H writes "[sftp.example]:2222".
  p.write("kh/hashed", std::string("|1|TWub5a9PJcGOq2OnU8rLeIIvehI=|kV1VjDOjtgR13MIvTmgvT5HW+u4= ") + kSftpHostKey +
                           "\n");
  p.iface("a", sftpSource("host: sftp.example, port: 2222, user: u, password: p, known_hosts: kh/plain"));
  EXPECT_THAT(p.errors(),
              HasSubstr("interfaces/a/interface.yaml:2:78: source.sftp.known_hosts: "));
  EXPECT_THAT(p.errors(), HasSubstr("kh/plain has no key for [sftp.example]:2222: add the line `ssh-keyscan "
                                    "-p 2222 sftp.example` prints"));
  p.iface("a", sftpSource("host: sftp.example, port: 2222, user: u, password: p, known_hosts: kh/ported"));
  EXPECT_EQ(p.errors(), "");
  p.iface("a", sftpSource("host: sftp.example, port: 2222, user: u, password: p, known_hosts: kh/hashed"));
  EXPECT_EQ(p.errors(), "");
  p.iface("a", sftpSource("host: sftp.example, port: 2222, user: u, password: p, known_hosts: kh/none"));
  EXPECT_THAT(p.errors(), HasSubstr("source.sftp.known_hosts: "));
}

TEST(LoadSftp, ADestinationFileNameHasNoSlash) {
  ProjectDir p;
  p.iface("t", "source:\n  file: { path: in/, delete: true }\ndestination:\n"
               "  sftp: { host: out.example, user: u, password: p, path: inbox/, name: \"a/{id}\",\n"
               "          host_key: \"" + std::string(kSftpHostKey) + "\" }\n");
  EXPECT_THAT(p.errors(), HasSubstr("destination.sftp.name: a file name has no `/`"));
}

}  // namespace
}  // namespace ductus::config::test

namespace ductus::config::test {
namespace {

// auth: { ldap: } in the shape issue #34 writes it.
TEST(LoadProject, DirectorySignInIsReadInTheShapeTheIssueWrites) {
  ProjectDir p;
  p.write("ductus.yaml",
          "auth:\n"
          "  ldap:\n"
          "    url: ldaps://dc1.hospital.org\n"
          "    ca: corp\n"
          "    bind: { dn: \"cn=ductus,ou=svc,dc=hospital,dc=org\", password: svc-pw }\n"
          "    users: { base: \"ou=people,dc=hospital,dc=org\", filter: \"(uid={name})\" }\n"
          "    groups: { base: \"ou=groups,dc=hospital,dc=org\", roles: { ductus-operators: "
          "operator, Ductus-Admins: admin } }\n"
          "    refresh: 5m\n");
  p.write("resources.yaml", "certificates:\n  corp: { ca_file: tls/corp.pem }\n");
  p.iface("adt", kMllpToFile);
  auto o = p.load();
  ASSERT_TRUE(o.project) << p.errors();
  const auto& l = o.project->engine.ldap;
  EXPECT_TRUE(l.enabled());
  EXPECT_EQ(l.url, "ldaps://dc1.hospital.org");
  EXPECT_TRUE(l.tls.enabled);
  EXPECT_FALSE(l.startTls);
  EXPECT_EQ(l.tls.ca, "corp");
  EXPECT_EQ(l.bindDn, "cn=ductus,ou=svc,dc=hospital,dc=org");
  EXPECT_EQ(l.bindPassword, "svc-pw");
  EXPECT_EQ(l.usersBase, "ou=people,dc=hospital,dc=org");
  EXPECT_EQ(l.usersFilter, "(uid={name})");
  EXPECT_EQ(l.groupsBase, "ou=groups,dc=hospital,dc=org");
  EXPECT_EQ(l.roles.at("ductus-operators"), "operator");
  EXPECT_EQ(l.roles.at("ductus-admins"), "admin") << "group names compared without case";
  EXPECT_EQ(l.refresh, std::chrono::minutes(5));
  EXPECT_EQ(l.timeout, std::chrono::seconds(10));

  ProjectDir none;
  none.iface("adt", kMllpToFile);
  auto n = none.load();
  ASSERT_TRUE(n.project) << none.errors();
  EXPECT_FALSE(n.project->engine.ldap.enabled());
}

TEST(LoadProject, DirectorySettingsMistakesArePlacedAndSayWhatWasExpected) {
  ProjectDir p;
  p.write("ductus.yaml",
          "auth:\n"
          "  ldap:\n"
          "    url: https://dc1\n"
          "    users: { base: \"ou=people\", filter: \"uid={name}\" }\n"
          "    groups: { base: \"ou=groups\", roles: { nurses: superuser } }\n");
  p.iface("adt", kMllpToFile);
  std::string e = p.errors();
  EXPECT_THAT(e, HasSubstr("ductus.yaml:3:10: auth.ldap.url: expected ldap://host[:port] or "
                           "ldaps://host[:port]"));
  EXPECT_THAT(e, HasSubstr("ductus.yaml:4:41: auth.ldap.users.filter: an LDAP filter is written "
                           "in parentheses"));
  EXPECT_THAT(e, HasSubstr("auth.ldap.groups.roles.nurses: expected viewer, operator or admin, "
                           "got `superuser`"));

  ProjectDir q;
  q.write("ductus.yaml",
          "auth:\n"
          "  ldap:\n"
          "    url: ldaps://dc1\n"
          "    start_tls: true\n"
          "    users: { base: \"ou=people\", filter: \"(cn=x)\" }\n");
  q.iface("adt", kMllpToFile);
  std::string f = q.errors();
  EXPECT_THAT(f, HasSubstr("auth.ldap.start_tls: ldaps:// is TLS from the first byte"));
  EXPECT_THAT(f, HasSubstr("auth.ldap.users.filter: the filter must hold {name}"));
  EXPECT_THAT(f, HasSubstr("groups: { base: ..., roles: { ductus-operators: operator } } is "
                           "needed"));

  ProjectDir r;
  r.write("ductus.yaml",
          "auth:\n"
          "  ldap:\n"
          "    url: ldap://dc1\n"
          "    ca: corp\n"
          "    users: { base: \"ou=people\" }\n"
          "    groups: { base: \"ou=groups\", roles: { ops: operator } }\n");
  r.iface("adt", kMllpToFile);
  EXPECT_THAT(r.errors(), HasSubstr("auth.ldap.ca: ca: verifies a TLS server: use ldaps:// or "
                                    "start_tls: true with it"));
  EXPECT_THAT(r.errors(), HasSubstr("auth.ldap.url: ldap:// without start_tls: true would send "
                                    "every password in clear"));

  // A ca: that names no certificates: entry is found by the cross-file checks.
  ProjectDir s;
  s.write("ductus.yaml",
          "auth:\n"
          "  ldap:\n"
          "    url: ldaps://dc1\n"
          "    ca: nowhere\n"
          "    users: { base: \"ou=people\" }\n"
          "    groups: { base: \"ou=groups\", roles: { ops: operator } }\n");
  s.iface("adt", kMllpToFile);
  EXPECT_THAT(s.errors(), HasSubstr("nowhere"));
}

TEST(LoadProject, SingleSignOnIsReadAndItsUrlsMustBeHttpsOrThisMachine) {
  ProjectDir p;
  p.write("ductus.yaml",
          "auth:\n"
          "  oidc:\n"
          "    issuer: https://login.hospital.org/realms/h\n"
          "    client_id: ductus\n"
          "    client_secret: s3cret\n"
          "    redirect_uri: https://ductus.hospital.org/api/v1/auth/oidc/callback\n"
          "    label: Hospital account\n"
          "    scopes: [openid, profile, groups]\n"
          "    roles: { Ductus-Operators: operator }\n");
  p.iface("adt", kMllpToFile);
  auto o = p.load();
  ASSERT_TRUE(o.project) << p.errors();
  const auto& s = o.project->engine.oidc;
  EXPECT_TRUE(s.enabled());
  EXPECT_EQ(s.issuer, "https://login.hospital.org/realms/h");
  EXPECT_EQ(s.clientSecret, "s3cret");
  EXPECT_EQ(s.label, "Hospital account");
  EXPECT_EQ(s.scopes, (std::vector<std::string>{"openid", "profile", "groups"}));
  EXPECT_EQ(s.nameClaim, "preferred_username");
  EXPECT_EQ(s.groupsClaim, "groups");
  EXPECT_EQ(s.roles.at("ductus-operators"), "operator");

  ProjectDir q;
  q.write("ductus.yaml",
          "auth:\n"
          "  oidc:\n"
          "    issuer: http://login.hospital.org\n"
          "    client_id: ductus\n"
          "    redirect_uri: https://ductus.hospital.org/login\n"
          "    scopes: [profile]\n"
          "    roles: { ops: root }\n");
  q.iface("adt", kMllpToFile);
  std::string e = q.errors();
  EXPECT_THAT(e, HasSubstr("ductus.yaml:3:13: auth.oidc.issuer: expected an https:// URL (http:// "
                           "only to this machine)"));
  EXPECT_THAT(e, HasSubstr("auth.oidc.redirect_uri: expected the engine's own https:// URL ending "
                           "in /api/v1/auth/oidc/callback"));
  EXPECT_THAT(e, HasSubstr("auth.oidc.scopes: must hold openid"));
  EXPECT_THAT(e, HasSubstr("auth.oidc.roles.ops: expected viewer, operator or admin"));

  ProjectDir local;
  local.write("ductus.yaml",
              "auth:\n"
              "  oidc:\n"
              "    issuer: http://127.0.0.1:8080/realms/dev\n"
              "    client_id: ductus\n"
              "    redirect_uri: http://localhost:7700/api/v1/auth/oidc/callback\n"
              "    roles: { ops: operator }\n");
  local.iface("adt", kMllpToFile);
  EXPECT_TRUE(local.load().project) << local.errors();
}

}  // namespace
}  // namespace ductus::config::test
