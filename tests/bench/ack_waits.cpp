// ack_waits: for scripts/bench-retention.sh. N MLLP connections send one
// message at a time for SECONDS, waiting for each ACK as a sender does, and
// write one line per ACK to OUT: "<sent at, epoch µs> <wait µs> <AA|AE|..>",
// so the script can pick out the ACKs that were in flight during something
// (a partition drop) and take their longest wait. It stops after SECONDS,
// or as soon as the file OUT.stop exists.
//
//   ack_waits HOST PORT CONNECTIONS SECONDS OUT
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

struct Ack {
  long long sentUs;
  long long waitUs;
  std::string code;
};

long long epochUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: ack_waits HOST PORT CONNECTIONS SECONDS OUT\n");
    return 2;
  }
  const char* host = argv[1];
  int port = std::atoi(argv[2]);
  int conns = std::atoi(argv[3]);
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(std::atoi(argv[4]));
  std::string stopFile = std::string(argv[5]) + ".stop";
  std::atomic<bool> stop{false};
  std::thread watcher([&] {
    while (!stop && std::chrono::steady_clock::now() < until) {
      if (access(stopFile.c_str(), F_OK) == 0) stop = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    stop = true;
  });
  std::vector<std::vector<Ack>> acks(static_cast<size_t>(conns));
  std::vector<std::thread> threads;
  for (int c = 0; c < conns; ++c) {
    threads.emplace_back([&, c] {
      int fd = connectTo(host, port);
      std::string buf;
      char chunk[8192];
      for (int i = 0; !stop; ++i) {
        std::string id = "R" + std::to_string(c) + "-" + std::to_string(i);
        std::string req = "\x0bMSH|^~\\&|LOAD|FAC|DUCTUS|FAC|20260101120000||ADT^A01|" + id +
                          "|P|2.5\rEVN|A01|20260101120000\rPID|1||MRN" +
                          std::to_string(c * 1000 + i % 50) +
                          "^^^H^MR||Doe^John^Q||19700101|M\rPV1|1|I|W^1^1\r\x1c\r";
        long long sent = epochUs();
        auto t0 = std::chrono::steady_clock::now();
        if (!writeAll(fd, req)) break;
        size_t end;
        while ((end = buf.find("\x1c\r")) == std::string::npos) {
          ssize_t n = read(fd, chunk, sizeof chunk);
          if (n <= 0) {
            close(fd);
            return;
          }
          buf.append(chunk, static_cast<size_t>(n));
        }
        auto wait = std::chrono::duration_cast<std::chrono::microseconds>(
                        std::chrono::steady_clock::now() - t0)
                        .count();
        std::string answer = buf.substr(0, end);
        buf.erase(0, end + 2);
        size_t msa = answer.find("MSA|");
        std::string code = msa == std::string::npos ? "??" : answer.substr(msa + 4, 2);
        acks[static_cast<size_t>(c)].push_back({sent, wait, code});
      }
      close(fd);
    });
  }
  for (auto& t : threads) t.join();
  stop = true;
  watcher.join();
  FILE* out = std::fopen(argv[5], "w");
  if (!out) {
    perror(argv[5]);
    return 1;
  }
  size_t n = 0;
  for (auto& per : acks)
    for (auto& a : per) {
      std::fprintf(out, "%lld %lld %s\n", a.sentUs, a.waitUs, a.code.c_str());
      ++n;
    }
  std::fclose(out);
  std::printf("acks=%zu\n", n);
  return 0;
}
