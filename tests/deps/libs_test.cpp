// Each library the engine links is used once for real.
#include <arpa/inet.h>
#include <curl/curl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <sys/socket.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "common/fd.h"

namespace ductus {
namespace {

TEST(Libraries, YamlCppReportsTheLineOfEachNode) {
  YAML::Node n = YAML::Load("source:\n  mllp:\n    listen: 127.0.0.1:2575\ntimeout: 5s\n");
  EXPECT_EQ(n["source"]["mllp"]["listen"].as<std::string>(), "127.0.0.1:2575");
  // 0-based in yaml-cpp; errors we print are 1-based.
  EXPECT_EQ(n["timeout"].Mark().line, 3);
}

TEST(Libraries, NlohmannJsonRoundTripsUnicode) {
  auto j = nlohmann::json::parse(R"({"name":"M\u00fcller","ids":[1,2]})");
  EXPECT_EQ(j["name"], "M\xc3\xbcller");
  EXPECT_EQ(j.dump(), R"({"ids":[1,2],"name":"Müller"})");
}

TEST(Libraries, OpensslSha256OfAbc) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  ASSERT_EQ(EVP_Digest("abc", 3, md, &len, EVP_sha256(), nullptr), 1);
  std::string hex;
  char b[3];
  for (unsigned i = 0; i < len; ++i) {
    snprintf(b, sizeof b, "%02x", md[i]);
    hex += b;
  }
  EXPECT_EQ(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

size_t collect(char* p, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(p, size * n);
  return size * n;
}

TEST(Libraries, LibcurlTalksToALoopbackServer) {
  Fd listener(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(listener.valid());
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(listener.get(), 1), 0);
  socklen_t alen = sizeof addr;
  getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &alen);
  int port = ntohs(addr.sin_port);

  // Before the server thread: an ASSERT after it would leave it unjoined,
  // blocked in accept().
  CURL* curl = curl_easy_init();
  ASSERT_NE(curl, nullptr);
  std::string request;
  std::thread server([&] {
    Fd c(accept(listener.get(), nullptr, nullptr));
    char buf[4096];
    while (request.find("\r\n\r\n") == std::string::npos) {
      ssize_t n = read(c.get(), buf, sizeof buf);
      if (n <= 0) return;
      request.append(buf, n);
    }
    const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello";
    (void)!write(c.get(), resp, sizeof resp - 1);
  });

  std::string body;
  std::string url = "http://127.0.0.1:" + std::to_string(port) + "/ping";
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, 10L);
  CURLcode rc = curl_easy_perform(curl);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(curl);
  server.join();

  EXPECT_EQ(rc, CURLE_OK) << curl_easy_strerror(rc);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(body, "hello");
  EXPECT_EQ(request.rfind("GET /ping HTTP/1.1\r\n", 0), 0u) << request;
}

}  // namespace
}  // namespace ductus
