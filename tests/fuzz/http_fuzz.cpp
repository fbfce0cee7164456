// The HTTP request parser as the HTTP source runs it: intake/http_server.h's
// HttpServer on 127.0.0.1 (a free port) on a libuv loop in this process,
// created once, with routes that answer at once. Each input is the byte
// stream of one connection: written in pieces, then half-closed; the loop
// runs until the server has answered and closed.
//
// Routes: /fuzz answers 200 with the body's size; /small is the same with a
// 16-byte body limit (413); /drop drops its HttpRespond unanswered (500). The
// head limit is 4 KB here (64 KB by default) so 431 is reachable with
// inputs of -max_len 64 KB.
//
// Checked beyond the sanitizers: what the server sends is HTTP/1.1 responses
// (it starts with a status line), a request reaches a handler only with the
// path it was routed by and a body within the route's limit, and the
// connection ends with an EOF and is freed.
#include <signal.h>
#include <uv.h>

#include <memory>
#include <string>

#include "common/net/http_server.h"
#include "tests/fuzz/fuzz_support.h"
#include "tests/fuzz/loop_client.h"

namespace {

using namespace ductus;
using fuzz::show;

struct Server {
  uv_loop_t loop;
  std::unique_ptr<net::HttpServer> http;
  uint16_t port = 0;

  static void look(const net::HttpRequest& req) {
    // Everything a source handler reads.
    FUZZ_CHECK(!req.method.empty(), "a request without a method");
    FUZZ_CHECK(req.path.find('?') == std::string::npos, "the path holds the query: " + show(req.path));
    for (const auto& [name, value] : req.headers)
      for (char c : name)
        FUZZ_CHECK(!(c >= 'A' && c <= 'Z'), "a header name is not lower-cased: " + show(name));
    (void)req.header("content-type");
    (void)req.header("expect");
  }

  Server() {
    uv_loop_init(&loop);
    net::HttpSettings settings;
    settings.maxHeaderBytes = 4 * 1024;
    settings.maxBodyBytes = 64 * 1024;
    settings.name = "fuzz-http";
    http = std::make_unique<net::HttpServer>(&loop, settings);
    auto answer = [](const net::HttpRequest& req, net::HttpRespond respond) {
      look(req);
      FUZZ_CHECK(req.path == "/fuzz" || req.path == "/small", "routed by another path: " + show(req.path));
      FUZZ_CHECK(req.path != "/small" || req.body.size() <= 16,
                 "/small got a body of " + std::to_string(req.body.size()) + " bytes");
      respond(net::HttpResponse{200, {{"Content-Type", "text/plain"}},
                                   std::to_string(req.body.size()) + "\n"});
      FUZZ_CHECK(respond.responded(), "responded() is false after the response");
      respond(net::HttpResponse{500, {}, "second response: must do nothing"});
    };
    auto ok = http->addRoute("/fuzz", answer);
    FUZZ_CHECK(ok, "addRoute /fuzz");
    ok = http->addRoute("/small", answer, 16);
    FUZZ_CHECK(ok, "addRoute /small");
    ok = http->addRoute("/drop", [](const net::HttpRequest& req, net::HttpRespond) { look(req); });
    FUZZ_CHECK(ok, "addRoute /drop");
    auto s = http->listen("127.0.0.1", 0);
    FUZZ_CHECK(s, s ? "" : s.error().message);
    port = http->port();
  }
};

Server& server() {
  static Server* s = new Server();  // never destroyed: the fuzzer exits from anywhere
  return *s;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quietLogs();
  signal(SIGPIPE, SIG_IGN);  // writes to a connection the server reset
  server();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Server& s = server();
  std::string_view input(reinterpret_cast<const char*>(data), size);
  fuzz::Rng rng(input);
  auto pieces = fuzz::split(input, rng, 8);
  auto result = fuzz::LoopClient::exchange(&s.loop, s.port, pieces,
                                           [&] { return s.http->connectionCount(); });
  const std::string& out = result.received;
  if (!out.empty())
    FUZZ_CHECK(out.rfind("HTTP/1.1 ", 0) == 0, "the server's answer is not HTTP/1.1: " + show(out));
  return 0;
}
