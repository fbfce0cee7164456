// The engine's side of an outbound TLS test (MLLP and HTTP senders): a
// throwaway folder with our test CA and another one, the engine's client
// pair signed by ours, and the ClientTls a destination naming { ca,
// certificate } gets, through the engine's own tls::Certificates. Servers
// we did not write (tests/support/*.py, run by ScriptServer) record what
// they received in record().
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "common/tls/certificates.h"
#include "tests/support/test_ca.h"

namespace ductus::test {

class OutboundTlsFiles {
 public:
  OutboundTlsFiles() {
    char tmpl[] = "/tmp/ductus-outbound-XXXXXX";
    if (!mkdtemp(tmpl)) {
      ADD_FAILURE() << "mkdtemp failed";
      return;
    }
    dir_ = tmpl;
    ca_.emplace(dir_ / "ca");
    other_.emplace(dir_ / "other", "Another CA");
    engine_ = ca_->issue("engine", "/CN=ductus-engine", {"ductus.example"}, {});
  }
  ~OutboundTlsFiles() {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  OutboundTlsFiles(const OutboundTlsFiles&) = delete;
  OutboundTlsFiles& operator=(const OutboundTlsFiles&) = delete;

  const TestCa& ca() const { return *ca_; }        // the servers' and the engine's
  const TestCa& other() const { return *other_; }  // a CA the engine does not name
  std::filesystem::path record() const { return dir_ / "received"; }
  // What the server recorded, whole ("" before anything).
  std::string recorded() const {
    std::ifstream in(record(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  // certificates: { ca: <trusted>, engine: <the pair> } loaded as the
  // engine loads them, and the ClientTls of { ca: ca, certificate: engine
  // (or none) }.
  std::shared_ptr<tls::ClientTls> client(const TestCa& trusted, bool clientCertificate) {
    // Member by member: GCC 12 warns of every member a designated
    // initializer leaves out (-Wmissing-field-initializers).
    tls::CertificateSource ca;
    ca.name = "ca";
    ca.caFile = trusted.cert();
    ca.at = "resources.yaml:2";
    tls::CertificateSource pair;
    pair.name = "engine";
    pair.certFile = engine_.cert;
    pair.keyFile = engine_.key;
    pair.at = "resources.yaml:3";
    auto certs = tls::Certificates::load({ca, pair});
    EXPECT_TRUE(certs) << certs.error().message;
    if (!certs) return nullptr;
    certificates_ = *certs;
    tls::ConnectTls connect;
    connect.enabled = true;
    connect.ca = "ca";
    connect.certificate = clientCertificate ? "engine" : "";
    auto client = certificates_->client(connect);
    EXPECT_TRUE(client) << client.error().message;
    return client ? *client : nullptr;
  }

 private:
  std::filesystem::path dir_;
  std::optional<TestCa> ca_, other_;
  Issued engine_;
  std::shared_ptr<tls::Certificates> certificates_;
};

}  // namespace ductus::test
