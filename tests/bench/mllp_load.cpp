// mllp_load: a load generator for scripts/bench-*.sh. N connections each
// send their share of M HL7 messages, one at a time, waiting for each ACK
// (as an MLLP sender does), and it prints "acks=<n> seconds=<s> rate=<n/s>".
//
//   mllp_load HOST PORT CONNECTIONS TOTAL [--http PATH]
//   mllp_load --echo PORT
//
// With --http it POSTs JSON to PATH over keep-alive connections instead and
// counts 202s. With --echo it is the other end instead: an MLLP server on
// 127.0.0.1:PORT that answers every frame with an AA at once, storing
// nothing, until killed; the round trip a sender can't do better than.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tests/bench/raw_socket.h"

using ductus::bench::connectTo;
using ductus::bench::writeAll;

namespace {

// One thread a connection: answer each frame as soon as its end arrives.
[[noreturn]] void echoServer(int port) {
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
    std::thread([fd] {
      static const std::string ack =
          "\x0bMSH|^~\\&|ECHO|FAC|LOAD|FAC|20260101120000||ACK|1|P|2.5\rMSA|AA|1\r\x1c\r";
      std::string buf;
      char chunk[8192];
      for (;;) {
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n <= 0) break;
        buf.append(chunk, n);
        size_t end;
        while ((end = buf.find("\x1c\r")) != std::string::npos) {
          buf.erase(0, end + 2);
          if (!writeAll(fd, ack)) break;
        }
      }
      close(fd);
    }).detach();
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--echo") echoServer(std::atoi(argv[2]));
  if (argc < 5) {
    std::fprintf(stderr, "usage: mllp_load HOST PORT CONNECTIONS TOTAL [--http PATH]\n"
                         "       mllp_load --echo PORT\n");
    return 2;
  }
  const char* host = argv[1];
  int port = std::atoi(argv[2]);
  int conns = std::atoi(argv[3]);
  int total = std::atoi(argv[4]);
  std::string httpPath = argc >= 7 && std::string(argv[5]) == "--http" ? argv[6] : "";
  std::atomic<int> acks{0}, failures{0};
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < conns; ++c) {
    threads.emplace_back([&, c] {
      int fd = connectTo(host, port);
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
        if (!writeAll(fd, req)) {
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
          ssize_t n = read(fd, chunk, sizeof chunk);
          if (n <= 0) {
            ++failures;
            close(fd);
            return;
          }
          buf.append(chunk, n);
        }
      }
      close(fd);
    });
  }
  for (auto& t : threads) t.join();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("acks=%d failures=%d seconds=%.3f rate=%.0f\n", acks.load(), failures.load(), secs,
              acks / secs);
  return failures ? 1 : 0;
}
