// What the common/tls tests share: a throwaway folder with a CA, and
// certificates: entries naming files in it.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/tls/certificates.h"
#include "tests/support/test_ca.h"

namespace ductus::tls::test {

class TlsFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ductus-tls-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static std::string read(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  static CertificateSource pairOf(const std::string& name, const ductus::test::Issued& i) {
    CertificateSource s;
    s.name = name;
    s.certFile = i.cert;
    s.keyFile = i.key;
    s.at = "resources.yaml:3";
    return s;
  }
  static CertificateSource caOf(const std::string& name, const ductus::test::TestCa& ca) {
    CertificateSource s;
    s.name = name;
    s.caFile = ca.cert();
    s.at = "resources.yaml:9";
    return s;
  }

  std::filesystem::path dir_;
};

}  // namespace ductus::tls::test
