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
  // With what is left of the call's 5 s timeout, which the service must
  // not outlast (the worker settles the call at its deadline anyway).
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(services_.held[i].first.timeLeft.has_value()) << i;
    EXPECT_GT(services_.held[i].first.timeLeft->count(), 0) << i;
    EXPECT_LE(services_.held[i].first.timeLeft->count(), 5000) << i;
  }
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
  auto before = pool().workerPids("big");
  auto out = call(*fn, "MSH|^~\\&|A|B|C|D|||ADT^A01|BIG|P|2.5\r");
  EXPECT_EQ(out.kind, Kind::Quarantine) << out.data.substr(0, 200);
  EXPECT_NE(out.data.find("the output is 94371840 bytes"), std::string::npos)
      << out.data.substr(0, 200);
  auto next = call(*fn, "MSH|^~\\&|A|B|C|D|||ADT^A01|SMALL|P|2.5\r");
  EXPECT_EQ(next.kind, Kind::Output) << next.data;
  EXPECT_EQ(next.data, "ok");
  // The same processes: no worker was killed and replaced.
  EXPECT_EQ(pool().workerPids("big"), before);
  EXPECT_EQ(pool().restarts(), 0u);
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

// ---- charsets: MSH-18, then the bytes; `charset:` forces one -----------------

// Checks what the transform read against PID.5.3 (the expected family name
// in ASCII, as JavaScript escapes: \u00fc) and, as MSH-10 says, returns the
// message untouched ("keep") or sets PID.5.2 to "Zoë" ("set") or "Łukasz" ("wide").
const char* kCharsetProbe = R"JS(
export function transform(msg) {
  const family = msg.get('PID.5.1');
  const want = JSON.parse('"' + msg.get('PID.5.3') + '"');
  if (family !== want) throw new Error('read ' + JSON.stringify(family) + ' as ' + msg.charset);
  const action = msg.get('MSH.10');
  if (action === 'set') msg.set('PID.5.2', 'Zo\u00eb');
  if (action === 'wide') msg.set('PID.5.2', '\u0141ukasz');
  return msg;
}
)JS";

// family: PID.5.1 as bytes; expected: how it must read, in JavaScript escapes.
std::string adt(const std::string& action, const std::string& msh18, const std::string& family,
                const std::string& expected) {
  return "MSH|^~\\&|A|B|C|D|20240101||ADT^A01|" + action + "|P|2.5||||||" + msh18 + "\r" +
         "PID|1||1||" + family + "^^" + expected + "\r" + "PV1|1|I|W^1^1\r";
}

TEST_F(PoolTest, UndeclaredUtf8IsReadAsUtf8AndAChangedMessageIsWrittenInUtf8) {
  writeFile("interfaces/u/transform.js", kCharsetProbe);
  auto fn = load(spec("u"));
  ASSERT_TRUE(fn) << fn.error().message;
  // "SEBASTIÁN" and "Lüneburg" in UTF-8, MSH-18 empty.
  auto out = call(*fn, adt("set", "", "SEBASTI\xC3\x81N", "SEBASTI\\u00c1N"));
  ASSERT_EQ(out.kind, Kind::Output) << out.data;
  EXPECT_NE(out.data.find("PID|1||1||SEBASTI\xC3\x81N^Zo\xC3\xAB^"), std::string::npos) << out.data;
  auto city = call(*fn, adt("set", "", "L\xC3\xBCneburg", "L\\u00fcneburg"));
  ASSERT_EQ(city.kind, Kind::Output) << city.data;
  EXPECT_NE(city.data.find("PID|1||1||L\xC3\xBCneburg^Zo\xC3\xAB^"), std::string::npos)
      << city.data;
  std::string same =
      adt("keep", "", "SEBASTI\xC3\x81N-L\xC3\xBCneburg", "SEBASTI\\u00c1N-L\\u00fcneburg");
  auto kept = call(*fn, same);
  ASSERT_EQ(kept.kind, Kind::Output) << kept.data;
  EXPECT_EQ(kept.data, same);
}

TEST_F(PoolTest, UndeclaredIso88591IsReadAsLatin1AndWrittenBackInLatin1) {
  writeFile("interfaces/l/transform.js", kCharsetProbe);
  auto fn = load(spec("l"));
  ASSERT_TRUE(fn) << fn.error().message;
  auto out = call(*fn, adt("set", "", "SEBASTI\xC1N", "SEBASTI\\u00c1N"));
  ASSERT_EQ(out.kind, Kind::Output) << out.data;
  EXPECT_NE(out.data.find("PID|1||1||SEBASTI\xC1N^Zo\xEB^"), std::string::npos) << out.data;
  std::string same = adt("keep", "", "L\xFCneburg", "L\\u00fcneburg");
  EXPECT_EQ(call(*fn, same).data, same);
  // A character latin1 cannot hold, in text nothing declared latin1: the
  // whole message goes out as UTF-8 rather than with a '?'.
  auto wide = call(*fn, adt("wide", "", "L\xFCneburg", "L\\u00fcneburg"));
  ASSERT_EQ(wide.kind, Kind::Output) << wide.data;
  EXPECT_NE(wide.data.find("PID|1||1||L\xC3\xBCneburg^\xC5\x81ukasz^"), std::string::npos)
      << wide.data;
}

TEST_F(PoolTest, Msh18NamesTheCharsetWhenSet) {
  writeFile("interfaces/d/transform.js", kCharsetProbe);
  auto fn = load(spec("d"));
  ASSERT_TRUE(fn) << fn.error().message;
  auto u8 = call(*fn, adt("set", "UNICODE UTF-8", "L\xC3\xBCneburg", "L\\u00fcneburg"));
  ASSERT_EQ(u8.kind, Kind::Output) << u8.data;
  EXPECT_NE(u8.data.find("PID|1||1||L\xC3\xBCneburg^Zo\xC3\xAB^"), std::string::npos) << u8.data;
  // 8859/1 (and its other spellings) over bytes that happen to be valid
  // UTF-8: latin1, as declared.
  for (std::string name : {"8859/1", "ISO-8859-1", "ISO IR100"}) {
    auto o = call(*fn, adt("set", name, "L\xC3\xBCneburg", "L\\u00c3\\u00bcneburg"));
    ASSERT_EQ(o.kind, Kind::Output) << name << ": " << o.data;
    EXPECT_NE(o.data.find("PID|1||1||L\xC3\xBCneburg^Zo\xEB^"), std::string::npos)
        << name << ": " << o.data;
  }
  // Declared latin1 cannot hold U+0141: '?', never another charset than declared.
  auto wide = call(*fn, adt("wide", "8859/1", "M\xFCller", "M\\u00fcller"));
  ASSERT_EQ(wide.kind, Kind::Output) << wide.data;
  EXPECT_NE(wide.data.find("PID|1||1||M\xFCller^?ukasz^"), std::string::npos) << wide.data;
  // Declared UTF-8 over bytes that are not UTF-8: read as latin1, so the
  // untouched message still goes back byte for byte.
  std::string liar = adt("keep", "UNICODE UTF-8", "M\xFCller", "M\\u00fcller");
  auto kept = call(*fn, liar);
  ASSERT_EQ(kept.kind, Kind::Output) << kept.data;
  EXPECT_EQ(kept.data, liar);
}

TEST_F(PoolTest, AsciiOnlyMessagesReadTheSameAndTakeLatin1ForNewCharacters) {
  writeFile("interfaces/a/transform.js", kCharsetProbe);
  auto fn = load(spec("a"));
  ASSERT_TRUE(fn) << fn.error().message;
  std::string same = adt("keep", "", "DOE", "DOE");
  EXPECT_EQ(call(*fn, same).data, same);
  auto out = call(*fn, adt("set", "", "DOE", "DOE"));
  EXPECT_NE(out.data.find("PID|1||1||DOE^Zo\xEB^DOE\r"), std::string::npos) << out.data;
  auto u8 = call(*fn, adt("set", "UTF-8", "DOE", "DOE"));
  EXPECT_NE(u8.data.find("PID|1||1||DOE^Zo\xC3\xAB^DOE\r"), std::string::npos) << u8.data;
}

TEST_F(PoolTest, TheInterfacesCharsetForcesOneOverMsh18AndTheBytes) {
  writeFile("interfaces/fu/transform.js", kCharsetProbe);
  writeFile("interfaces/fl/transform.js", kCharsetProbe);
  auto u = spec("fu");
  u.functions[0].charset = "utf-8";
  auto l = spec("fl");
  l.functions[0].charset = "iso-8859-1";
  auto fu = load(u);
  ASSERT_TRUE(fu) << fu.error().message;
  auto fl = load(l);
  ASSERT_TRUE(fl) << fl.error().message;
  // A sender that says 8859/1 but sends UTF-8.
  auto a = call(*fu, adt("set", "8859/1", "L\xC3\xBCneburg", "L\\u00fcneburg"));
  ASSERT_EQ(a.kind, Kind::Output) << a.data;
  EXPECT_NE(a.data.find("PID|1||1||L\xC3\xBCneburg^Zo\xC3\xAB^"), std::string::npos) << a.data;
  // UTF-8 bytes read as latin1 on purpose: two characters each, kept as they are.
  auto b = call(*fl, adt("set", "", "L\xC3\xBCneburg", "L\\u00c3\\u00bcneburg"));
  ASSERT_EQ(b.kind, Kind::Output) << b.data;
  EXPECT_NE(b.data.find("PID|1||1||L\xC3\xBCneburg^Zo\xEB^"), std::string::npos) << b.data;
  std::string same = adt("keep", "UNICODE UTF-8", "L\xC3\xBCneburg", "L\\u00c3\\u00bcneburg");
  EXPECT_EQ(call(*fl, same).data, same);
}

TEST_F(PoolTest, TextAndCsvFollowTheSameRuleAndKeepTheirCharsetOnOutput) {
  writeFile("interfaces/t/transform.js",
            "export function transform(s) { return s.toUpperCase() + '|' + s.length; }\n");
  writeFile("interfaces/c/transform.js", "export function transform(rows) { return rows; }\n");
  auto t = load(spec("t", "text"));
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(call(*t, "m\xC3\xBCller").data, "M\xC3\x9CLLER|6");  // UTF-8 in, UTF-8 out
  EXPECT_EQ(call(*t, "m\xFCller").data, "M\xDCLLER|6");          // latin1 in, latin1 out
  auto cs = spec("c", "csv", "json");
  cs.functions[0].charset = "iso-8859-1";
  auto c = load(cs);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(call(*c, "name\r\nJ\xc3\xb6rg\r\n").data,
            "[[\"name\"],[\"J\xc3\x83\xc2\xb6rg\"]]");  // forced: two latin1 characters
}

// ---- CSV records and schedules ------------------------------------------------

TEST_F(PoolTest, ACsvRecordWithItsHeaderArrivesKeyedByColumnName) {
  writeFile("interfaces/r/transform.js", "export function transform(row) { return row; }\n");
  auto r = load(spec("r", "csv-record", "json"));
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(call(*r, "\xef\xbb\xbfid,name,note\r\n7,J\xc3\xb6rg,\"a,b\"").data,
            "{\"id\":\"7\",\"name\":\"J\xc3\xb6rg\",\"note\":\"a,b\"}");
  EXPECT_EQ(call(*r, "id,name,note\r\n8,Ann").data,
            "{\"id\":\"8\",\"name\":\"Ann\",\"note\":\"\"}");
  auto extra = call(*r, "id\r\n1,2");
  EXPECT_EQ(extra.kind, Kind::Quarantine);
  EXPECT_NE(extra.data.find("2 values but its header names 1 column"), std::string::npos)
      << extra.data;
}

// ---- set() adds a missing segment -----------------------------------------------

TEST_F(PoolTest, SetAddsAMissingSegmentAtTheEndAndRefusesImpossiblePaths) {
  writeFile("interfaces/z/transform.js", R"JS(
export function transform(msg) {
  const errors = [];
  const tryIt = (path) => { try { msg.set(path, 'x'); errors.push('no error for ' + path); } catch (e) { errors.push(e.message); } };
  msg.set('ZBR.1', 'first').set('ZBR.3.2', 'b&c');
  msg.set('ZBR[2].1', 'second');
  tryIt('ZBR[4].1');
  tryIt('zbr.1');
  tryIt('ZB.1');
  tryIt('ZXX.0');
  tryIt('MSH[2].3');
  return msg.toString() + '\n' + errors.join('\n');
}
)JS");
  auto fn = load(spec("z", "hl7v2", "text"));
  ASSERT_TRUE(fn) << fn.error().message;
  auto out = call(*fn, "MSH|^~\\&|A|B|C|D|x||ADT^A01|1|P|2.5\rPID|1||1\r");
  ASSERT_EQ(out.kind, Kind::Output) << out.data;
  EXPECT_NE(out.data.find("PID|1||1\rZBR|first||^b\\T\\c\rZBR|second\r\n"), std::string::npos)
      << out.data;
  EXPECT_NE(out.data.find("cannot set ZBR[4].1: the message has 2 ZBR segments, so ZBR[3] is the "
                          "next one that set can add"),
            std::string::npos)
      << out.data;
  EXPECT_NE(out.data.find("cannot set zbr.1: \"zbr\" is not a segment name"), std::string::npos)
      << out.data;
  EXPECT_NE(out.data.find("cannot set ZB.1: \"ZB\" is not a segment name"), std::string::npos)
      << out.data;
  EXPECT_NE(out.data.find("cannot set ZXX.0: field 0 is the segment name"), std::string::npos)
      << out.data;
  EXPECT_NE(out.data.find("cannot set MSH[2].3: "), std::string::npos) << out.data;
  EXPECT_EQ(out.data.find("no error for"), std::string::npos) << out.data;
  EXPECT_EQ(out.data.find("\rZXX"), std::string::npos) << out.data;  // a refused set adds nothing
}

}  // namespace
}  // namespace ductus::test
