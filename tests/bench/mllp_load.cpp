// mllp_load: a load generator for scripts/bench-*.sh. N connections each
// send their share of M HL7 messages, one at a time, waiting for each ACK
// (as an MLLP sender does), and it prints "acks=<n> seconds=<s> rate=<n/s>".
//
//   mllp_load HOST PORT CONNECTIONS TOTAL [--http PATH] [--tls CAFILE]
//   mllp_load --echo PORT [--tls CERT KEY]
//
// With --http it POSTs JSON to PATH over keep-alive connections instead and
// counts 202s. With --tls each connection is a TLS client (1.2 or 1.3) that
// verifies the server's certificate against CAFILE and HOST; the handshake
// is inside the timed span, once per connection, as a sender's is. With
// --echo it is the other end instead: an MLLP server on 127.0.0.1:PORT that
// answers every frame with an AA at once, storing nothing, until killed; the
// round trip a sender can't do better than (with --tls, over TLS with this
// pair).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tests/bench/raw_socket.h"

using ductus::bench::connectTo;
using ductus::bench::writeAll;

namespace {

// One connection's bytes, in clear or through OpenSSL on the blocking
// socket itself (a load generator needs no event loop).
struct Conn {
  int fd = -1;
  SSL* ssl = nullptr;
  ~Conn() {
    if (ssl) {
      SSL_shutdown(ssl);
      SSL_free(ssl);
    }
    if (fd >= 0) close(fd);
  }
  ssize_t read(char* buf, size_t n) {
    if (!ssl) return ::read(fd, buf, n);
    int r = SSL_read(ssl, buf, static_cast<int>(n));
    return r > 0 ? r : -1;
  }
  bool write(const std::string& s) {
    if (!ssl) return writeAll(fd, s);
    size_t written = 0;
    return SSL_write_ex(ssl, s.data(), s.size(), &written) == 1 && written == s.size();
  }
};

void tlsFailed(const char* what) {
  std::fprintf(stderr, "%s: ", what);
  ERR_print_errors_fp(stderr);
  std::fprintf(stderr, "\n");
}

SSL_CTX* tlsContext(bool server) {
  SSL_CTX* ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // A record's header and body in one read(), not two: the load generator's
  // own syscalls are CPU the engine on the same machine doesn't get.
  SSL_CTX_set_read_ahead(ctx, 1);
  return ctx;
}

// One thread a connection: answer each frame as soon as its end arrives.
[[noreturn]] void echoServer(int port, SSL_CTX* tls) {
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(lfd, 64) != 0) {
    perror("echo: bind/listen");
    std::exit(1);
  }
  std::printf("listening\n");
  std::fflush(stdout);
  for (;;) {
    int fd = accept(lfd, nullptr, nullptr);
    if (fd < 0) continue;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::thread([fd, tls] {
      static const std::string ack =
          "\x0bMSH|^~\\&|ECHO|FAC|LOAD|FAC|20260101120000||ACK|1|P|2.5\rMSA|AA|1\r\x1c\r";
      Conn c{fd};
      if (tls) {
        c.ssl = SSL_new(tls);
        SSL_set_fd(c.ssl, fd);
        if (SSL_accept(c.ssl) != 1) return;
      }
      std::string buf;
      char chunk[8192];
      for (;;) {
        ssize_t n = c.read(chunk, sizeof chunk);
        if (n <= 0) break;
        buf.append(chunk, n);
        size_t end;
        while ((end = buf.find("\x1c\r")) != std::string::npos) {
          buf.erase(0, end + 2);
          if (!c.write(ack)) break;
        }
      }
    }).detach();
  }
}

}  // namespace

int main(int argc, char** argv) {
  // A peer gone mid-write (a TLS close_notify to a closed socket) is an
  // error return, not the end of the program.
  std::signal(SIGPIPE, SIG_IGN);
  if (argc >= 3 && std::string(argv[1]) == "--echo") {
    SSL_CTX* tls = nullptr;
    if (argc == 6 && std::string(argv[3]) == "--tls") {
      tls = tlsContext(true);
      if (SSL_CTX_use_certificate_chain_file(tls, argv[4]) != 1 ||
          SSL_CTX_use_PrivateKey_file(tls, argv[5], SSL_FILETYPE_PEM) != 1) {
        tlsFailed("echo: --tls CERT KEY");
        return 2;
      }
    }
    echoServer(std::atoi(argv[2]), tls);
  }
  if (argc < 5) {
    std::fprintf(stderr,
                 "usage: mllp_load HOST PORT CONNECTIONS TOTAL [--http PATH] [--tls CAFILE]\n"
                 "       mllp_load --echo PORT [--tls CERT KEY]\n");
    return 2;
  }
  const char* host = argv[1];
  int port = std::atoi(argv[2]);
  int conns = std::atoi(argv[3]);
  int total = std::atoi(argv[4]);
  std::string httpPath;
  SSL_CTX* tls = nullptr;
  for (int i = 5; i + 1 < argc; i += 2) {
    std::string opt = argv[i];
    if (opt == "--http") {
      httpPath = argv[i + 1];
    } else if (opt == "--tls") {
      tls = tlsContext(false);
      SSL_CTX_set_verify(tls, SSL_VERIFY_PEER, nullptr);
      if (SSL_CTX_load_verify_locations(tls, argv[i + 1], nullptr) != 1) {
        tlsFailed("--tls CAFILE");
        return 2;
      }
    }
  }
  std::atomic<int> acks{0}, failures{0};
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < conns; ++c) {
    threads.emplace_back([&, c] {
      Conn conn{connectTo(host, port)};
      if (tls) {
        // The server's name is HOST, an address: its certificate must name it.
        conn.ssl = SSL_new(tls);
        X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(conn.ssl), host);
        SSL_set_fd(conn.ssl, conn.fd);
        if (SSL_connect(conn.ssl) != 1) {
          tlsFailed("handshake");
          ++failures;
          return;
        }
      }
      int mine = total / conns + (c < total % conns ? 1 : 0);
      std::string buf;
      char chunk[8192];
      for (int i = 0; i < mine; ++i) {
        std::string id = "B" + std::to_string(c) + "-" + std::to_string(i);
        std::string req;
        if (httpPath.empty()) {
          req = "\x0bMSH|^~\\&|LOAD|FAC|DUCTUS|FAC|20260101120000||ADT^A01|" + id +
                "|P|2.5\rEVN|A01|20260101120000\rPID|1||MRN" + std::to_string(c * 1000 + i % 50) +
                "^^^H^MR||Doe^John^Q||19700101|M|||1 Main St^^Town^ST^12345\rPV1|1|I|W^1^1\r\x1c\r";
        } else {
          std::string body = "{\"id\":\"" + id + "\",\"mrn\":\"MRN" + std::to_string(i % 50) + "\"}";
          req = "POST " + httpPath + " HTTP/1.1\r\nHost: b\r\nContent-Type: application/json\r\n"
                "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
        }
        if (!conn.write(req)) {
          ++failures;
          break;
        }
        // Read one answer.
        for (;;) {
          size_t end = httpPath.empty() ? buf.find("\x1c\r") : buf.find("\r\n\r\n");
          if (end != std::string::npos) {
            std::string answer = buf.substr(0, end);
            size_t consumed = end + 2;
            if (!httpPath.empty()) {
              consumed = end + 4;
              size_t cl = answer.find("Content-Length: ");
              size_t len = cl == std::string::npos ? 0 : std::atoi(answer.c_str() + cl + 16);
              if (buf.size() < consumed + len) goto more;
              consumed += len;
              if (answer.rfind("HTTP/1.1 202", 0) == 0) ++acks; else ++failures;
            } else {
              if (answer.find("MSA|AA|") != std::string::npos || answer.find("MSA|CA|") != std::string::npos)
                ++acks;
              else
                ++failures;
            }
            buf.erase(0, consumed);
            break;
          }
        more:
          ssize_t n = conn.read(chunk, sizeof chunk);
          if (n <= 0) {
            ++failures;
            return;
          }
          buf.append(chunk, n);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("acks=%d failures=%d seconds=%.3f rate=%.0f\n", acks.load(), failures.load(), secs,
              acks / secs);
  return failures ? 1 : 0;
}
