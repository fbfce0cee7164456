// Interface code in real worker processes: modules, outcomes, formats and
// services, as the supervisor sees them through the WorkerPool.
#include <gtest/gtest.h>

#include <string>

#include "tests/supervisor/workers/pool_fixture.h"

namespace ductus::test {
namespace {

using supervisor::Outcome;
using Kind = supervisor::Outcome::Kind;

// A realistic ISO-8859-1 message with custom delimiters (# for fields,
// $ components, * repetitions, ! escape, % subcomponents) and bytes above
// 0x7f (ä = 0xE4, ß = 0xDF, é = 0xE9).
const std::string kLatin1Custom =
    "MSH#$*!%#LAB#HOSP#EHR#HOSP#20240101120000##ORU$R01#MSG0001#P#2.5####8859/1\r"
    "PID#1##12345$$$HOSP$MR*67890$$$OTHER$PI##M\xE4ller$J\xFCrgen##19700101#M\r"
    "OBX#1#TX#NOTE##Stra\xDF" "e !F! caf\xE9 !S! done\r";

TEST_F(PoolTest, AnIso88591MessageWithCustomDelimitersReturnedUnchangedComesBackByteForByte) {
  writeFile("interfaces/same/transform.js",
            "export function transform(msg) {\n"
            "  msg.get('PID.5.1'); msg.segments('OBX');\n"
            "  return msg;\n"
            "}\n");
  auto fn = load(spec("same"));
  ASSERT_TRUE(fn) << fn.error().message;
  auto out = call(*fn, kLatin1Custom);
  ASSERT_EQ(out.kind, Kind::Output) << out.data;
  EXPECT_EQ(out.data, kLatin1Custom);
}

TEST_F(PoolTest, EscapesAreDecodedOnGetAndEncodedOnSetWithTheMessagesOwnDelimiters) {
  writeFile("interfaces/esc/transform.js",
            "export function transform(msg) {\n"
            "  const note = msg.get('OBX.5');\n"
            "  if (note !== 'Stra\\u00dfe # caf\\u00e9 $ done') throw new Error('decoded: ' + note);\n"
            "  msg.set('PID.5.1', 'A#B$C*D!E%F');\n"
            "  if (msg.get('PID.5.1') !== 'A#B$C*D!E%F') throw new Error('round trip: ' + msg.get('PID.5.1'));\n"
            "  msg.set('PID.3[2].1', '99');\n"
            "  return msg;\n"
            "}\n");
  auto fn = load(spec("esc"));
  ASSERT_TRUE(fn) << fn.error().message;
  auto out = call(*fn, kLatin1Custom);
  ASSERT_EQ(out.kind, Kind::Output) << out.data;
  // The set value is escaped with this message's delimiters; the untouched
  // segments are byte for byte the same; latin1 stays latin1.
  EXPECT_NE(out.data.find("#12345$$$HOSP$MR*99$$$OTHER$PI##A!F!B!S!C!R!D!E!E!T!F$J\xFCrgen#"),
            std::string::npos)
      << out.data;
  EXPECT_NE(out.data.find("OBX#1#TX#NOTE##Stra\xDF" "e !F! caf\xE9 !S! done\r"), std::string::npos);
  EXPECT_EQ(out.data.substr(0, out.data.find('\r')), kLatin1Custom.substr(0, kLatin1Custom.find('\r')));
}

TEST_F(PoolTest, AUtf8MessageDeclaredInMsh18IsDecodedAsUtf8AndWrittenBackAsUtf8) {
  writeFile("interfaces/u8/transform.js",
            "export function transform(msg) {\n"
            "  if (msg.get('PID.5.1') !== 'M\\u00fcller') throw new Error('got ' + msg.get('PID.5.1'));\n"
            "  msg.set('PID.5.2', '\\u00c9mile');\n"
            "  return msg;\n"
            "}\n");
  auto fn = load(spec("u8"));
  ASSERT_TRUE(fn) << fn.error().message;
  std::string in =
      "MSH|^~\\&|A|B|C|D|20240101||ADT^A01|1|P|2.5||||||UNICODE UTF-8\r"
      "PID|1||1||M\xC3\xBCller^X\r";
  auto out = call(*fn, in);
  ASSERT_EQ(out.kind, Kind::Output) << out.data;
  EXPECT_NE(out.data.find("PID|1||1||M\xC3\xBCller^\xC3\x89mile"), std::string::npos) << out.data;
}

TEST_F(PoolTest, ReturningNullFiltersAndKillFiltersWithItsReason) {
  writeFile("interfaces/f/transform.js",
            "import { kill } from 'ductus';\n"
            "export function transform(msg) {\n"
            "  if (msg.get('MSH.10') === '1') return null;\n"
            "  return kill('duplicate visit');\n"
            "}\n");
  auto fn = load(spec("f"));
  ASSERT_TRUE(fn) << fn.error().message;
  auto a = call(*fn, "MSH|^~\\&|A|B|C|D|x||ADT^A01|1|P|2.5\r");
  EXPECT_EQ(a.kind, Kind::Filtered);
  auto b = call(*fn, "MSH|^~\\&|A|B|C|D|x||ADT^A01|2|P|2.5\r");
  EXPECT_EQ(b.kind, Kind::Filtered);
  EXPECT_EQ(b.data, "duplicate visit");
}

TEST_F(PoolTest, QuarantineAndOtherExceptionsAreQuarantinedWithTheScriptsFileAndLine) {
  writeFile("interfaces/q/transform.js",
            "import { quarantine } from 'ductus';\n"
            "export function transform(msg) {\n"
            "  if (msg.get('MSH.10') === '1') throw quarantine('no patient id');\n"
            "  return msg.nothing.here;\n"
            "}\n");
  auto fn = load(spec("q"));
  ASSERT_TRUE(fn) << fn.error().message;
  auto a = call(*fn, "MSH|^~\\&|A|B|C|D|x||ADT^A01|1|P|2.5\r");
  EXPECT_EQ(a.kind, Kind::Quarantine);
  EXPECT_NE(a.data.find("no patient id"), std::string::npos) << a.data;
  EXPECT_NE(a.data.find("interfaces/q/transform.js:3"), std::string::npos) << a.data;
  auto b = call(*fn, "MSH|^~\\&|A|B|C|D|x||ADT^A01|2|P|2.5\r");
  EXPECT_EQ(b.kind, Kind::Quarantine);
  EXPECT_NE(b.data.find("TypeError"), std::string::npos) << b.data;
  EXPECT_NE(b.data.find("interfaces/q/transform.js:4"), std::string::npos) << b.data;
}

TEST_F(PoolTest, AnErrorCarryingTheTransientMarkerIsRetriedNotQuarantined) {
  writeFile("interfaces/t/transform.js",
            "export function transform(msg) { throw new Error('[ductus:transient] lab system busy'); }\n");
  auto fn = load(spec("t"));
  ASSERT_TRUE(fn) << fn.error().message;
  auto a = call(*fn, "MSH|^~\\&|A\r");
  EXPECT_EQ(a.kind, Kind::Transient);
  EXPECT_NE(a.data.find("lab system busy"), std::string::npos);
}

TEST_F(PoolTest, ARemoteImportIsRefusedWithAClearLoadError) {
  writeFile("interfaces/remote/transform.js",
            "import x from 'https://example.com/evil.js';\n"
            "export function transform(m) { return m; }\n");
  auto fn = load(spec("remote"));
  ASSERT_FALSE(fn);
  EXPECT_NE(fn.error().message.find("https://example.com/evil.js"), std::string::npos)
      << fn.error().message;
  EXPECT_NE(fn.error().message.find("remote and absolute imports are refused"), std::string::npos)
      << fn.error().message;
  EXPECT_TRUE(pool().isStopped("remote"));
}

TEST_F(PoolTest, AnAbsoluteImportAndAnEscapeFromTheProjectAreRefused) {
  writeFile("interfaces/abs/transform.js", "import '/etc/passwd';\nexport const transform = (m) => m;\n");
  writeFile("interfaces/up/transform.js",
            "import '../other/secret.js';\nexport const transform = (m) => m;\n");
  writeFile("interfaces/other/secret.js", "export const s = 1;\n");
  auto a = load(spec("abs"));
  ASSERT_FALSE(a);
  EXPECT_NE(a.error().message.find("refused"), std::string::npos) << a.error().message;
  auto b = load(spec("up"));
  ASSERT_FALSE(b);
  EXPECT_NE(b.error().message.find("outside the interface folder"), std::string::npos)
      << b.error().message;
}

TEST_F(PoolTest, ASyntaxErrorNamesTheFileLineAndColumn) {
  writeFile("interfaces/bad/transform.js",
            "export function transform(msg) {\n"
            "  const x = 1;\n"
            "  return msg +* 2;\n"
            "}\n");
  auto fn = load(spec("bad"));
  ASSERT_FALSE(fn);
  EXPECT_NE(fn.error().message.find("interfaces/bad/transform.js:3:"), std::string::npos)
      << fn.error().message;
  EXPECT_NE(fn.error().message.find("SyntaxError"), std::string::npos) << fn.error().message;
}

TEST_F(PoolTest, ASyntaxErrorInAnImportedLibModuleNamesThatFile) {
  writeFile("lib/broken.js", "export const a = ;\n");
  writeFile("interfaces/imp/transform.js",
            "import { a } from '../../lib/broken.js';\nexport const transform = (m) => m;\n");
  auto fn = load(spec("imp"));
  ASSERT_FALSE(fn);
  EXPECT_NE(fn.error().message.find("lib/broken.js:1:"), std::string::npos) << fn.error().message;
}

TEST_F(PoolTest, RelativeImportsReachTheInterfaceFolderAndTheProjectLib) {
  writeFile("lib/names.js", "export const upper = (s) => s.toUpperCase();\n");
  writeFile("interfaces/rel/helpers.js",
            "import { upper } from '../../lib/names.js';\nexport const fix = (s) => upper(s);\n");
  writeFile("interfaces/rel/transform.js",
            "import { fix } from './helpers.js';\n"
            "export function transform(msg) { msg.set('PID.5.1', fix(msg.get('PID.5.1'))); return msg; }\n");
  auto fn = load(spec("rel"));
  ASSERT_TRUE(fn) << fn.error().message;
  auto out = call(*fn, "MSH|^~\\&|A\rPID|1||1||doe^john\r");
  ASSERT_EQ(out.kind, Kind::Output) << out.data;
  EXPECT_EQ(out.data, "MSH|^~\\&|A\rPID|1||1||DOE^john\r");
}

TEST_F(PoolTest, ModulesAreEvaluatedOncePerWorkerAndReused) {
  writeFile("interfaces/once/transform.js",
            "let loads = 0; loads++;\n"
            "let calls = 0;\n"
            "export function transform(s) { calls++; return `${loads}/${calls}`; }\n");
  auto fn = load(spec("once", "text"));
  ASSERT_TRUE(fn) << fn.error().message;
  EXPECT_EQ(call(*fn, "x").data, "1/1");
  EXPECT_EQ(call(*fn, "x").data, "1/2");
}

TEST_F(PoolTest, InterfaceCodeCannotReachTheWorkersNativeBridgeOrTheSdksEntryPoints) {
  // With them, one interface in a shared worker could settle another's calls.
  writeFile("interfaces/peek/transform.js",
            "import * as sdk from 'ductus';\n"
            "export function transform(s) {\n"
            "  return [typeof globalThis.__ductus_native, typeof sdk.__run, typeof sdk.runCall,\n"
            "          Object.keys(sdk).filter((k) => k.startsWith('_')).length].join(',');\n"
            "}\n");
  auto fn = load(spec("peek", "text"));
  ASSERT_TRUE(fn) << fn.error().message;
  EXPECT_EQ(call(*fn, "x").data, "undefined,undefined,undefined,0");
}

TEST_F(PoolTest, AsyncTransformsAwaitingServicesInterleaveOnOneWorker) {
  writeFile("interfaces/db/transform.js",
            "import { db, env } from 'ductus';\n"
            "export async function transform(s) {\n"
            "  const rows = await db('patients').query('select name from p where id = $1', [s]);\n"
            "  const site = await env('SITE');\n"
            "  return `${s}:${rows[0].name}@${site}`;\n"
            "}\n");
  services_.hold = true;
  supervisor::WorkerPool::Options o;
  o.sharedWorkers = 1;
  pool(o);
  auto fn = load(spec("db", "text"));
  ASSERT_TRUE(fn) << fn.error().message;
  std::vector<std::string> results(3);
  int done = 0;
  for (int i = 0; i < 3; ++i) {
    pool().invoke(*fn, std::to_string(i), {}, [&, i](Outcome o) {
      results[i] = o.data;
      ++done;
    });
  }
  // All three are waiting for their query at once.
  ASSERT_TRUE(runUntil([&] { return services_.held.size() == 3; }, std::chrono::seconds(10)));
  EXPECT_EQ(services_.held[0].first.kind, supervisor::ServiceCall::Kind::DbQuery);
  EXPECT_EQ(services_.held[0].first.resource, "patients");
  EXPECT_EQ(services_.held[0].first.interfaceName, "db");
  EXPECT_EQ(services_.held[0].first.paramsJson, "[\"0\"]");
  // Answer in reverse order; then the env requests.
  for (int i = 2; i >= 0; --i)
    services_.held[i].second(std::string("[{\"name\":\"p") + std::to_string(i) + "\"}]");
  ASSERT_TRUE(runUntil([&] { return services_.held.size() == 6; }, std::chrono::seconds(10)));
  for (size_t i = 3; i < 6; ++i) {
    EXPECT_EQ(services_.held[i].first.kind, supervisor::ServiceCall::Kind::Env);
    services_.held[i].second(std::string("\"north\""));
  }
  ASSERT_TRUE(runUntil([&] { return done == 3; }, std::chrono::seconds(10)));
  EXPECT_EQ(results[0], "0:p0@north");
  EXPECT_EQ(results[1], "1:p1@north");
  EXPECT_EQ(results[2], "2:p2@north");
}

TEST_F(PoolTest, AFailedServiceCallRejectsInTheScriptAndItsTransientMarkerRetries) {
  writeFile("interfaces/dbf/transform.js",
            "import { db } from 'ductus';\n"
            "export async function transform(s) { return JSON.stringify(await db('x').query('select 1')); }\n");
  services_.answer = [](const supervisor::ServiceCall&) -> Result<std::string> {
    return Error{"[ductus:transient] connection refused"};
  };
  auto fn = load(spec("dbf", "text"));
  ASSERT_TRUE(fn) << fn.error().message;
  auto out = call(*fn, "x");
  EXPECT_EQ(out.kind, Kind::Transient) << out.data;
}

TEST_F(PoolTest, FetchAnswering503IsTransientUnlessRetryIsFalse) {
  writeFile("interfaces/http/transform.js",
            "import { fetch } from 'ductus';\n"
            "export async function transform(s) {\n"
            "  const r = await fetch('https://lab.example/x', { method: 'POST', body: s, retry: s !== 'strict' });\n"
            "  return `${r.status} ${await r.text()}`;\n"
            "}\n");
  services_.answer = [](const supervisor::ServiceCall& c) -> Result<std::string> {
    return std::string("{\"status\":503,\"headers\":{},\"body\":\"busy\"}");
  };
  auto fn = load(spec("http", "text"));
  ASSERT_TRUE(fn) << fn.error().message;
  auto a = call(*fn, "x");
  EXPECT_EQ(a.kind, Kind::Transient) << a.data;
  EXPECT_NE(a.data.find("503"), std::string::npos);
  auto b = call(*fn, "strict");
  EXPECT_EQ(b.kind, Kind::Output) << b.data;
  EXPECT_EQ(b.data, "503 busy");
  ASSERT_FALSE(services_.calls.empty());
  EXPECT_EQ(services_.calls[0].url, "https://lab.example/x");
  EXPECT_NE(services_.calls[0].initJson.find("\"method\":\"POST\""), std::string::npos);
  EXPECT_EQ(services_.calls[0].initJson.find("retry"), std::string::npos);
}

TEST_F(PoolTest, EnvIsAnsweredFromTheAllowlistOnly) {
  writeFile("interfaces/env/transform.js",
            "import { env } from 'ductus';\n"
            "export async function transform(s) { return String(await env(s)); }\n");
  supervisor::AllowlistedEnv allow({{"SITE", "north \"1\""}}, &services_);
  supervisor::WorkerPool::Options o;
  o.binary = ductusBinary();
  pool_ = std::make_unique<supervisor::WorkerPool>(&loop_, o, allow);
  auto fn = load(spec("env", "text"));
  ASSERT_TRUE(fn) << fn.error().message;
  EXPECT_EQ(call(*fn, "SITE").data, "north \"1\"");
  auto denied = call(*fn, "HOME");
  EXPECT_EQ(denied.kind, Kind::Quarantine);
  EXPECT_NE(denied.data.find("not a variable this interface may read"), std::string::npos);
}

TEST_F(PoolTest, JsonCsvAndXmlPayloadsAreDecodedForTheTransform) {
  writeFile("interfaces/j/transform.js",
            "export function transform(o) { return { total: o.items.reduce((a, b) => a + b, 0), who: o.who }; }\n");
  writeFile("interfaces/c/transform.js",
            "export function transform(rows) { return rows.map((r) => [r[1], r[0]]); }\n");
  writeFile("interfaces/x/transform.js",
            "export function transform(doc) { return doc.find('patient/name').text + '|' + doc.attrs.v; }\n");
  auto j = load(spec("j", "json"));
  ASSERT_TRUE(j) << j.error().message;
  EXPECT_EQ(call(*j, "{\"items\":[1,2,3],\"who\":\"Jos\xC3\xA9\"}").data,
            "{\"total\":6,\"who\":\"Jos\xC3\xA9\"}");
  auto c = load(spec("c", "csv"));
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(call(*c, "a,\"b,1\"\r\nc,d\r\n").data, "\"b,1\",a\r\nd,c\r\n");
  auto x = load(spec("x", "xml", "text"));
  ASSERT_TRUE(x) << x.error().message;
  EXPECT_EQ(call(*x, "<?xml version=\"1.0\"?><doc v=\"2\"><patient><name>A &amp; B</name></patient></doc>").data,
            "A & B|2");
}

// Exports from other systems: a CSV in ISO-8859-1 from a Windows tool, with
// its byte order mark, and JSON with one. Before, the ISO-8859-1 name came
// out as U+FFFD (lost), the header's first name carried the mark, and
// JSON.parse refused the marked JSON (quarantined).
TEST_F(PoolTest, IsoLatin1AndAByteOrderMarkAreReadAsTheTextTheyAre) {
  writeFile("interfaces/c/transform.js", "export function transform(rows) { return rows; }\n");
  writeFile("interfaces/j/transform.js", "export function transform(o) { return o; }\n");
  auto c = load(spec("c", "csv", "json"));
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(call(*c, "\xef\xbb\xbfid,name\r\n1,J\xc3\xb6rg\r\n").data,
            "[[\"id\",\"name\"],[\"1\",\"J\xc3\xb6rg\"]]");
  EXPECT_EQ(call(*c, "id,name\r\n1,M\xfcller\r\n").data,  // ISO-8859-1 \xfc is \xc3\xbc
            "[[\"id\",\"name\"],[\"1\",\"M\xc3\xbcller\"]]");
  auto j = load(spec("j", "json"));
  ASSERT_TRUE(j) << j.error().message;
  auto out = call(*j, "\xef\xbb\xbf{\"who\":\"Jos\xc3\xa9\"}");
  EXPECT_EQ(out.kind, Kind::Output) << out.data;
  EXPECT_EQ(out.data, "{\"who\":\"Jos\xc3\xa9\"}");
}

TEST_F(PoolTest, AnOutputTooBigForACallIsQuarantinedAndTheWorkerLives) {
  // 90 MB from a small message: over the frame limit, which the supervisor
  // would refuse (killing the worker) on every retry.
  writeFile("interfaces/big/transform.js",
            "export function transform(m) { return m.get('MSH.10') === 'BIG' ? 'x'.repeat(90 << "
            "20) : 'ok'; }\n");
  auto fn = load(spec("big", "hl7v2", "text"));
  ASSERT_TRUE(fn) << fn.error().message;
  auto out = call(*fn, "MSH|^~\\&|A|B|C|D|||ADT^A01|BIG|P|2.5\r");
  EXPECT_EQ(out.kind, Kind::Quarantine) << out.data.substr(0, 200);
  EXPECT_NE(out.data.find("the output is 94371840 bytes"), std::string::npos)
      << out.data.substr(0, 200);
  auto next = call(*fn, "MSH|^~\\&|A|B|C|D|||ADT^A01|SMALL|P|2.5\r");
  EXPECT_EQ(next.kind, Kind::Output) << next.data;
  EXPECT_EQ(next.data, "ok");
}

TEST_F(PoolTest, RespondModeTakesAnHttpEnvelopeAndReturnsStatusHeadersAndBody) {
  writeFile("interfaces/api/transform.js",
            "export function transform(req) {\n"
            "  return { status: 201, body: { path: req.path, id: req.query.id, got: req.json().n } };\n"
            "}\n");
  auto fn = load(spec("api", "http"));
  ASSERT_TRUE(fn) << fn.error().message;
  auto out = call(*fn, "{\"method\":\"POST\",\"path\":\"/p\",\"query\":{\"id\":\"7\"},\"headers\":{},\"body\":\"{\\\"n\\\":3}\"}");
  ASSERT_EQ(out.kind, Kind::Output) << out.data;
  EXPECT_EQ(out.data,
            "{\"status\":201,\"headers\":{\"content-type\":\"application/json\"},"
            "\"body\":\"{\\\"path\\\":\\\"/p\\\",\\\"id\\\":\\\"7\\\",\\\"got\\\":3}\"}");
}

}  // namespace
}  // namespace ductus::test
