// http_load: the API's load generator for scripts/bench-api.sh. CONNECTIONS
// keep-alive connections each GET PATH one request at a time (as a console
// or a Prometheus scrape does) for SECONDS, and it prints
// "requests=<n> errors=<n> rate=<n/s> p50_ms=<ms> p99_ms=<ms> max_ms=<ms>".
// Any answer but 200 counts as an error (and is printed once).
//
//   http_load HOST PORT PATH SECONDS CONNECTIONS [TOKEN]
//   http_load --serve PORT
//
// With --serve it is the other end instead: an HTTP server on
// 127.0.0.1:PORT that answers every request with a fixed 200 at once, a
// thread a connection; the round trip a client can't do better than.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/bench/raw_socket.h"

using ductus::bench::connectTo;
using ductus::bench::writeAll;

namespace {

// Reads one response: head, then Content-Length bytes of body. `buf` keeps
// what was read past it. Returns the status, or -1 on a closed connection
// or a response without Content-Length (the API always sends one).
int readResponse(int fd, std::string& buf) {
  size_t headEnd;
  char chunk[65536];
  while ((headEnd = buf.find("\r\n\r\n")) == std::string::npos) {
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n <= 0) return -1;
    buf.append(chunk, static_cast<size_t>(n));
  }
  int status = std::atoi(buf.c_str() + 9);
  std::string head = buf.substr(0, headEnd);
  for (auto& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  size_t cl = head.find("\r\ncontent-length:");
  if (cl == std::string::npos) return -1;
  size_t length = std::strtoull(head.c_str() + cl + 17, nullptr, 10);
  size_t total = headEnd + 4 + length;
  while (buf.size() < total) {
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n <= 0) return -1;
    buf.append(chunk, static_cast<size_t>(n));
  }
  buf.erase(0, total);
  return status;
}

[[noreturn]] void serve(int port) {
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(lfd, 128) != 0) {
    perror("serve: bind/listen");
    std::exit(1);
  }
  std::printf("listening\n");
  std::fflush(stdout);
  for (;;) {
    int fd = accept(lfd, nullptr, nullptr);
    if (fd < 0) continue;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::thread([fd] {
      const std::string answer =
          "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 15\r\n\r\n"
          "{\"status\":\"ok\"}";
      std::string buf;
      char chunk[16384];
      for (;;) {
        size_t end;
        while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
          ssize_t n = read(fd, chunk, sizeof chunk);
          if (n <= 0) {
            close(fd);
            return;
          }
          buf.append(chunk, static_cast<size_t>(n));
        }
        buf.erase(0, end + 4);  // GETs: no body
        if (!writeAll(fd, answer)) break;
      }
      close(fd);
    }).detach();
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--serve") == 0) serve(std::atoi(argv[2]));
  if (argc < 6) {
    std::fprintf(stderr,
                 "usage: http_load HOST PORT PATH SECONDS CONNECTIONS [TOKEN]\n"
                 "       http_load --serve PORT\n");
    return 2;
  }
  const char* host = argv[1];
  int port = std::atoi(argv[2]);
  std::string path = argv[3];
  double seconds = std::atof(argv[4]);
  int conns = std::atoi(argv[5]);
  std::string auth = argc > 6 ? std::string("Authorization: Bearer ") + argv[6] + "\r\n" : "";
  std::string request = "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\n" + auth + "\r\n";

  using Clock = std::chrono::steady_clock;
  auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(seconds));
  std::vector<std::vector<double>> latencies(static_cast<size_t>(conns));
  std::atomic<long> errors{0};
  std::once_flag saidError;
  std::vector<std::thread> threads;
  auto t0 = Clock::now();
  for (int c = 0; c < conns; ++c)
    threads.emplace_back([&, c] {
      int fd = connectTo(host, port);
      std::string buf;
      auto& mine = latencies[static_cast<size_t>(c)];
      while (Clock::now() < until) {
        auto start = Clock::now();
        if (!writeAll(fd, request)) break;
        int status = readResponse(fd, buf);
        if (status < 0) {
          // The server closed: a fresh connection, counted as an error.
          ++errors;
          close(fd);
          fd = connectTo(host, port);
          buf.clear();
          continue;
        }
        mine.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
        if (status != 200) {
          ++errors;
          std::call_once(saidError, [&] {
            std::fprintf(stderr, "http_load: %s answered %d\n", path.c_str(), status);
          });
        }
      }
      close(fd);
    });
  for (auto& t : threads) t.join();
  double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  std::vector<double> all;
  for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  auto pct = [&](double p) {
    if (all.empty()) return 0.0;
    size_t i = static_cast<size_t>(p * static_cast<double>(all.size() - 1) + 0.5);
    return all[std::min(i, all.size() - 1)];
  };
  std::printf("requests=%zu errors=%ld rate=%.0f p50_ms=%.2f p99_ms=%.2f max_ms=%.2f\n",
              all.size(), errors.load(), static_cast<double>(all.size()) / elapsed, pct(0.5),
              pct(0.99), all.empty() ? 0.0 : all.back());
  return 0;
}
