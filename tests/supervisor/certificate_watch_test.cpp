#include "supervisor/certificate_watch.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <uv.h>

#include <chrono>
#include <filesystem>

#include "common/uv_handle.h"
#include "tests/support/test_ca.h"

namespace ductus::supervisor {
namespace {

using namespace std::chrono_literals;

// Runs the loop until pred holds (checked every 10 ms) or `limit` passes.
template <class Pred>
bool runUntil(uv_loop_t* loop, Pred pred, std::chrono::milliseconds limit) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (!pred() && std::chrono::steady_clock::now() < end) uv_run(loop, UV_RUN_NOWAIT), uv_sleep(10);
  return pred();
}

class CertificateWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ductus-watch-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    uv_loop_init(&loop_);
  }
  void TearDown() override {
    closeLoop(&loop_);
    std::filesystem::remove_all(dir_);
  }
  std::filesystem::path dir_;
  uv_loop_t loop_{};
};

TEST_F(CertificateWatchTest, APairRenewedOnDiskIsLoadedWithinTheIntervalAndABrokenOneIsNot) {
  test::TestCa ca(dir_);
  auto first = ca.issue("server", "/CN=first");
  tls::CertificateSource s;
  s.name = "server";
  s.certFile = first.cert;
  s.keyFile = first.key;
  auto certs = tls::Certificates::load({s});
  ASSERT_TRUE(certs) << certs.error().message;
  {
    CertificateWatch watch(&loop_, *certs, 50ms);
    ca.issue("server", "/CN=second");
    EXPECT_TRUE(runUntil(&loop_, [&] { return (*certs)->entry("server")->subject == "CN=second"; }, 5s));
    // Garbage where the certificate was: the renewed one stays.
    std::filesystem::resize_file(first.cert, 10);
    runUntil(&loop_, [] { return false; }, 300ms);
    EXPECT_EQ((*certs)->entry("server")->subject, "CN=second");
  }
  // The watch is gone and its timer with it: the loop ends.
  uv_run(&loop_, UV_RUN_DEFAULT);
}

}  // namespace
}  // namespace ductus::supervisor
