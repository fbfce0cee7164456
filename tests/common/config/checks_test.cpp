// Checks across files: routes, listeners, named resources.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/common/config/project_dir.h"

namespace ductus::config::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string mllpTo(const std::string& listen, const std::string& destination) {
  return "source:\n  mllp: { listen: " + listen + " }\ndestination:\n" + destination;
}

TEST(CheckRoutes, ARouteIntoAnInternalInterfaceOfTheSameFormatIsValid) {
  ProjectDir p;
  p.iface("in", mllpTo("127.0.0.1:2575", "  interface: store\n  output: json\n"));
  p.iface("store", "source:\n  internal: {}\nformat: json\ndestination:\n  file: { path: out/ }\n");
  EXPECT_EQ(p.errors(), "");
}

TEST(CheckRoutes, ARouteToAMissingInterfaceNamesTheNearestOne) {
  ProjectDir p;
  p.iface("in", mllpTo("127.0.0.1:2575", "  interface: stroe\n"));
  p.iface("store", "source:\n  internal: {}\ndestination:\n  file: { path: out/ }\n");
  EXPECT_THAT(p.errors(), HasSubstr("interfaces/in/interface.yaml:4:3: destination.interface: route target "
                                    "`stroe` is not an interface of this project \u2014 did you mean `store`?"));
}

TEST(CheckRoutes, ARouteTargetMustHaveAnInternalSource) {
  ProjectDir p;
  p.iface("in", mllpTo("127.0.0.1:2575", "  interface: other\n"));
  p.iface("other", mllpTo("127.0.0.1:2576", "  file: { path: out/ }\n"));
  EXPECT_THAT(p.errors(), HasSubstr("interfaces/in/interface.yaml:4:3: destination.interface: route target "
                                    "`other` must have `source: internal`"));
}

TEST(CheckRoutes, ARouteTargetMustReadTheFormatTheDestinationOutputs) {
  ProjectDir p;
  p.iface("in", mllpTo("127.0.0.1:2575", "  interface: store\n"));  // outputs hl7v2
  p.iface("store", "source:\n  internal: {}\nformat: json\ndestination:\n  file: { path: out/ }\n");
  EXPECT_THAT(p.errors(), HasSubstr("interfaces/in/interface.yaml:4:3: destination.interface: this destination "
                                    "outputs hl7v2 but `store` reads json"));
}

TEST(CheckRoutes, ARouteLoopIsRefused) {
  ProjectDir p;
  p.iface("in", mllpTo("127.0.0.1:2575", "  interface: a\n"));
  p.iface("a", "source:\n  internal: {}\ndestination:\n  interface: b\n");
  p.iface("b", "source:\n  internal: {}\ndestinations:\n  back:\n    interface: a\n");
  std::string e = p.errors();
  EXPECT_THAT(e, HasSubstr("interfaces/b/interface.yaml:5:5: destinations.back.interface: route loop: "
                           "a \u2192 b \u2192 a"));
  EXPECT_EQ(std::count(e.begin(), e.end(), '\n'), 1) << e;
}

TEST(CheckEndpoints, TwoMllpListenersOnOneAddressAreRefused) {
  ProjectDir p;
  p.iface("a", mllpTo("127.0.0.1:2575", "  file: { path: a/ }\n"));
  p.iface("b", mllpTo("0.0.0.0:2575", "  file: { path: b/ }\n"));
  EXPECT_THAT(p.errors(), HasSubstr("interfaces/b/interface.yaml:2:3: source.mllp.listen: 0.0.0.0:2575 is also "
                                    "where interface `a` listens"));
}

TEST(CheckEndpoints, AListenerOnTheApiAddressIsRefused) {
  ProjectDir p;
  p.iface("a", mllpTo("127.0.0.1:7700", "  file: { path: a/ }\n"));
  EXPECT_THAT(p.errors(), HasSubstr("interfaces/a/interface.yaml:2:3: source.mllp.listen: 127.0.0.1:7700 is also "
                                    "where the API"));
}

TEST(CheckEndpoints, HttpInterfacesMayShareAPortWithDistinctPathsOnly) {
  ProjectDir p;
  auto http = [](const std::string& path) {
    return "source:\n  http: { listen: 127.0.0.1:8080, path: " + path +
           " }\ndestination:\n  file: { path: out/ }\n";
  };
  p.iface("a", http("/a"));
  p.iface("b", http("/b"));
  EXPECT_EQ(p.errors(), "");
  p.iface("c", http("/a"));
  EXPECT_THAT(p.errors(), HasSubstr("interfaces/c/interface.yaml:2:3: source.http.listen: path /a on "
                                    "127.0.0.1:8080 is also interface `a`'s"));
}

TEST(CheckEndpoints, AnHttpAndAnMllpListenerCannotSharePorts) {
  ProjectDir p;
  p.iface("a", "source:\n  http: { listen: 127.0.0.1:8080 }\ndestination:\n  file: { path: out/ }\n");
  p.iface("b", mllpTo("127.0.0.1:8080", "  file: { path: b/ }\n"));
  EXPECT_THAT(p.errors(), HasSubstr("only HTTP interfaces may share a port"));
}

TEST(CheckResources, ANamedApiOrDatabaseThatDoesNotExistIsRefused) {
  ProjectDir p;
  p.write("resources.yaml",
          "apis:\n  lab: { url: \"https://lab.example\" }\n"
          "databases:\n  patients: { url: \"postgresql://db/p\" }\n");
  p.iface("a",
          "source:\n  mllp: { listen: 127.0.0.1:2575 }\n"
          "isolation: dedicated\n"
          "dedicated_pools: { patient: 2 }\n"
          "destination:\n  http: { api: lbb, path: /in }\n");
  std::string e = p.errors();
  EXPECT_THAT(e, HasSubstr("interfaces/a/interface.yaml:4:18: dedicated_pools.patient: database `patient` is not "
                           "in resources.yaml (databases:) \u2014 did you mean `patients`?"));
  EXPECT_THAT(e, HasSubstr("interfaces/a/interface.yaml:6:3: destination.http.api: api `lbb` is not in "
                           "resources.yaml (apis:) \u2014 did you mean `lab`?"));
}

constexpr const char* kCertificates =
    "certificates:\n"
    "  server: { cert_file: tls/server.pem, key_file: tls/server.key }\n"
    "  analyzers: { ca_file: tls/ca.pem }\n";

TEST(CheckCertificates, NamesThatExistAndFitAreValid) {
  ProjectDir p;
  p.write("ductus.yaml", "database: { url: \"postgresql://db/d\", ca: analyzers }\n");
  p.write("resources.yaml", kCertificates);
  p.iface("a",
          "source:\n  mllp: { listen: 127.0.0.1:2575, tls: { certificate: server, clients: { ca: "
          "analyzers } } }\n"
          "destination:\n  mllp: { host: lab, port: 2575, tls: { ca: server, certificate: server } "
          "}\n");
  EXPECT_EQ(p.errors(), "");
}

TEST(CheckCertificates, AMissingOrWrongKindOfEntryIsNamedAtItsUseWithTheEntriesThatFit) {
  ProjectDir p;
  p.write("ductus.yaml", "api: { listen: 127.0.0.1:7700, tls: { certificate: analyzers } }\n");
  p.write("resources.yaml",
          std::string(kCertificates) + "apis:\n  lab: { url: https://lab.example, ca: nope }\n");
  p.iface("a",
          "source:\n  mllp: { listen: 127.0.0.1:2575, tls: { certificate: srever, clients: { ca: "
          "analyzers } } }\n"
          "destinations:\n"
          "  out: { mllp: { host: lab, port: 2575, tls: { certificate: analyzers } } }\n"
          "  web: { http: { url: https://x.example/in, ca: analyzer } }\n");
  std::string e = p.errors();
  EXPECT_THAT(e, HasSubstr("ductus.yaml:1: api.tls.certificate: certificate `analyzers` ("));
  EXPECT_THAT(e, HasSubstr(") is a CA alone; api.tls.certificate needs a pair (cert_file and "
                           "key_file, or cert and key); entries that fit: server"));
  EXPECT_THAT(e, HasSubstr("interfaces/a/interface.yaml:2: source.mllp.tls.certificate: certificate "
                           "`srever` is not in resources.yaml (certificates:) \u2014 did you mean "
                           "`server`?; entries that fit: server"));
  EXPECT_THAT(e, HasSubstr("interfaces/a/interface.yaml:4: destinations.out.mllp.tls.certificate: "
                           "certificate `analyzers`"));
  EXPECT_THAT(e, HasSubstr("interfaces/a/interface.yaml:5: destinations.web.http.ca: certificate "
                           "`analyzer` is not in resources.yaml (certificates:) \u2014 did you mean "
                           "`analyzers`?; entries that fit: analyzers, server"));
  EXPECT_THAT(e, HasSubstr("resources.yaml:5: apis.lab.ca: certificate `nope` is not in"));
  EXPECT_THAT(e, Not(HasSubstr("clients.ca")));
}

TEST(CheckEndpoints, HttpInterfacesOnOnePortMustShareTlsAndAllow) {
  ProjectDir p;
  p.write("resources.yaml", kCertificates);
  auto http = [](const std::string& path, const std::string& more) {
    return "source:\n  http: { listen: 127.0.0.1:8080, path: " + path + more +
           " }\ndestination:\n  file: { path: out/ }\n";
  };
  p.iface("a", http("/a", ", tls: { certificate: server }, allow: [10.0.0.0/8]"));
  p.iface("b", http("/b", ", tls: { certificate: server }, allow: [10.0.0.0/8]"));
  EXPECT_EQ(p.errors(), "");
  p.iface("c", http("/c", ", allow: [10.0.0.0/8]"));
  p.iface("d", http("/d", ", tls: { certificate: server }, allow: [10.0.0.1]"));
  std::string e = p.errors();
  EXPECT_THAT(e, HasSubstr("interfaces/c/interface.yaml:2:3: source.http.tls: interface `c` and "
                           "interface `a` ("));
  EXPECT_THAT(e, HasSubstr("both listen on 127.0.0.1:8080 but their tls: differ; HTTP interfaces on "
                           "one port share one server, so give both the same tls:"));
  EXPECT_THAT(e, HasSubstr("interfaces/d/interface.yaml:2:3: source.http.allow: interface `d` and "
                           "interface `a`"));
}

TEST(ProjectWarnings, TheApiOffLoopbackWithoutTlsIsAWarningNotAnError) {
  ProjectDir p;
  p.write("ductus.yaml", "api: { listen: 0.0.0.0:7700 }\n");
  p.iface("a", mllpTo("127.0.0.1:2575", "  file: { path: out/ }\n"));
  auto o = p.load();
  ASSERT_TRUE(o.project) << p.errors();
  ASSERT_EQ(o.warnings.size(), 1u);
  EXPECT_EQ(o.warnings[0].line, 1);
  EXPECT_THAT(o.warnings[0].message,
              HasSubstr("the API listens on 0.0.0.0:7700 without tls: { certificate }: its session "
                        "cookie is Secure"));

  ProjectDir ok;
  ok.write("ductus.yaml", "api: { listen: 127.0.0.1:7700 }\n");
  ok.iface("a", mllpTo("127.0.0.1:2575", "  file: { path: out/ }\n"));
  EXPECT_TRUE(ok.load().warnings.empty());

  ProjectDir secured;
  secured.write("ductus.yaml", "api: { listen: 0.0.0.0:7700, tls: { certificate: server } }\n");
  secured.write("resources.yaml", kCertificates);
  secured.iface("a", mllpTo("127.0.0.1:2575", "  file: { path: out/ }\n"));
  auto so = secured.load();
  ASSERT_TRUE(so.project) << secured.errors();
  EXPECT_TRUE(so.warnings.empty());
}

// The first destination of interface `name`, a file destination.
template <typename Loaded>
const config::FileDestination& firstFileDestination(const Loaded& o, const char* name) {
  return std::get<config::FileDestination>(o.project->find(name)->destinations.at(0).target);
}

// sync: is read on file destinations; none is allowed, and named as the
// risk it is.
TEST(ProjectWarnings, AFileDestinationWithSyncNoneIsAWarningGroupAndEachAreNot) {
  ProjectDir p;
  p.iface("a", mllpTo("127.0.0.1:2575", "  file: { path: out/, sync: none }\n"));
  p.iface("b", mllpTo("127.0.0.1:2576", "  file: { path: out2/, sync: each }\n"));
  p.iface("c", mllpTo("127.0.0.1:2577", "  file: { path: out3/ }\n"));
  auto o = p.load();
  ASSERT_TRUE(o.project) << p.errors();
  ASSERT_EQ(o.warnings.size(), 1u);
  EXPECT_THAT(o.warnings[0].file, HasSubstr("interfaces/a/interface.yaml"));
  EXPECT_THAT(o.warnings[0].message,
              HasSubstr("sync: none reports a file sent before it is on disk"));
  auto sync = [&](const char* name) { return firstFileDestination(o, name).sync; };
  EXPECT_EQ(sync("a"), config::FileSyncMode::None);
  EXPECT_EQ(sync("b"), config::FileSyncMode::Each);
  EXPECT_EQ(sync("c"), config::FileSyncMode::Group);

  ProjectDir bad;
  bad.iface("a", mllpTo("127.0.0.1:2575", "  file: { path: out/, sync: later }\n"));
  EXPECT_FALSE(bad.load().project);
  EXPECT_THAT(bad.errors(), HasSubstr("sync"));
  EXPECT_THAT(bad.errors(), HasSubstr("group"));
}

// publish: says how a finished file gets its name; link unless it says
// rename (for readers that wait for a rename, IN_MOVED_TO).
TEST(ProjectWarnings, AFileDestinationPublishesByLinkUnlessItSaysRename) {
  ProjectDir p;
  p.iface("a", mllpTo("127.0.0.1:2575", "  file: { path: out/, publish: rename }\n"));
  p.iface("b", mllpTo("127.0.0.1:2576", "  file: { path: out2/ }\n"));
  auto o = p.load();
  ASSERT_TRUE(o.project) << p.errors();
  EXPECT_TRUE(o.warnings.empty());
  auto publish = [&](const char* name) { return firstFileDestination(o, name).publish; };
  EXPECT_EQ(publish("a"), config::FilePublish::Rename);
  EXPECT_EQ(publish("b"), config::FilePublish::Link);

  ProjectDir bad;
  bad.iface("a", mllpTo("127.0.0.1:2575", "  file: { path: out/, publish: copy }\n"));
  EXPECT_FALSE(bad.load().project);
  EXPECT_THAT(bad.errors(), HasSubstr("publish"));
  EXPECT_THAT(bad.errors(), HasSubstr("rename"));
}

TEST(CheckCertificates, TheSmtpServersCaNamesACertificatesEntry) {
  ProjectDir p;
  p.write("ductus.yaml",
          "alerts:\n"
          "  smtp: { host: mail.example, from: d@example.org,\n"
          "          ca: analyzer }\n");
  p.write("resources.yaml", kCertificates);
  p.iface("a", mllpTo("127.0.0.1:2575", "  file: { path: out/ }\n"));
  EXPECT_THAT(p.errors(), HasSubstr("ductus.yaml:3: alerts.smtp.ca: certificate `analyzer` is not in "
                                    "resources.yaml (certificates:) \u2014 did you mean `analyzers`?"));

  ProjectDir ok;
  ok.write("ductus.yaml", "alerts:\n  smtp: { host: mail.example, from: d@example.org, ca: analyzers }\n");
  ok.write("resources.yaml", kCertificates);
  ok.iface("a", mllpTo("127.0.0.1:2575", "  file: { path: out/ }\n"));
  EXPECT_EQ(ok.errors(), "");
}

TEST(ProjectWarnings, ARuleThatNotifiesNoOneAndAChannelNoRuleUsesAreWarnings) {
  ProjectDir p;
  p.write("ductus.yaml",
          "alerts:\n"
          "  channels:\n"
          "    hook: { webhook: https://chat.example/x }\n"
          "    spare: { webhook: https://chat.example/y }\n"
          "  rules:\n"
          "    - { when: [stalled], severity: critical, notify: [hook] }\n"
          "    - { when: [quiet], severity: info }\n");
  p.iface("a", mllpTo("127.0.0.1:2575", "  file: { path: out/ }\n"));
  auto o = p.load();
  ASSERT_TRUE(o.project) << p.errors();
  ASSERT_EQ(o.warnings.size(), 2u);
  EXPECT_EQ(o.warnings[0].line, 4);
  EXPECT_EQ(o.warnings[0].keyPath, "alerts.channels.spare");
  EXPECT_THAT(o.warnings[0].message, HasSubstr("no rule notifies this channel"));
  EXPECT_EQ(o.warnings[1].line, 7);
  EXPECT_EQ(o.warnings[1].keyPath, "alerts.rules[1].notify");
  EXPECT_THAT(o.warnings[1].message, HasSubstr("the rule notifies no channel"));
}

}  // namespace
}  // namespace ductus::config::test
