// handover_load: the client halves of scripts/bench-handover.sh.
//
//   handover_load send HOST PORT SENDERS RATE OUT
//     SENDERS MLLP connections send RATE messages a second in all, each on
//     a steady schedule, one at a time, waiting for each ACK as a sender
//     does. A connection the engine closes is opened again and the message
//     sent again. One line per message acknowledged AA in OUT: "<first sent,
//     epoch µs> <wait until its AA, µs> <control id>". Stops once OUT.stop
//     exists; prints "refused=N" (connects that failed) and "acked=N".
//   handover_load receive PORT OUT
//     The destination: answers AA to every message, one line per arrival in
//     OUT ("<epoch µs> <control id>"), until OUT.stop exists.
//   handover_load launch PORT FDNAME TRIGGER -- COMMAND...
//     Plays systemd's socket passing for a plain restart: binds and listens
//     on 127.0.0.1:PORT, then runs COMMAND with the socket as fd 3
//     (LISTEN_FDS=1, LISTEN_FDNAMES=FDNAME, LISTEN_PID its pid). When the
//     file TRIGGER appears (deleted then), SIGTERM, wait, start again;
//     TRIGGER.stop: SIGTERM, wait, exit.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

long long epochUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

int connectTo(const char* host, int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, host, &a.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

bool writeAll(int fd, const std::string& s) {
  for (size_t off = 0; off < s.size();) {
    ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// One framed message from `buf`/`fd`: its text, or "" when the peer closed.
std::string readFrame(int fd, std::string& buf) {
  char chunk[8192];
  size_t end;
  while ((end = buf.find("\x1c\r")) == std::string::npos) {
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n <= 0) return "";
    buf.append(chunk, static_cast<size_t>(n));
  }
  std::string frame = buf.substr(0, end);
  buf.erase(0, end + 2);
  if (!frame.empty() && frame[0] == '\x0b') frame.erase(0, 1);
  return frame;
}

std::string field(const std::string& msg, const std::string& segment, int index) {
  size_t at = msg.find(segment + "|");
  if (at == std::string::npos) return "";
  size_t end = msg.find('\r', at);
  std::string seg = msg.substr(at, end == std::string::npos ? std::string::npos : end - at);
  size_t pos = 0;
  for (int i = 0; i < index; ++i) {
    pos = seg.find('|', pos);
    if (pos == std::string::npos) return "";
    ++pos;
  }
  return seg.substr(pos, seg.find('|', pos) - pos);
}

int sendMode(char** argv) {
  const char* host = argv[0];
  int port = std::atoi(argv[1]);
  int senders = std::atoi(argv[2]);
  double rate = std::atof(argv[3]);
  std::string out = argv[4];
  std::string stopFile = out + ".stop";
  std::atomic<bool> stop{false};
  std::atomic<long> refused{0};
  std::mutex mu;
  std::vector<std::string> lines;
  auto interval = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(senders / rate));
  std::vector<std::thread> threads;
  for (int s = 0; s < senders; ++s)
    threads.emplace_back([&, s] {
      int fd = -1;
      std::string buf;
      // Staggered, so the senders' messages interleave evenly.
      auto next = Clock::now() + interval * s / senders;
      for (long i = 0; !stop; ++i) {
        std::this_thread::sleep_until(next);
        next += interval;
        std::string id = "H" + std::to_string(s) + "-" + std::to_string(i);
        std::string msg = "\x0bMSH|^~\\&|LOAD|FAC|DUCTUS|FAC|20260101120000||ADT^A01|" + id +
                          "|P|2.5\rEVN|A01|20260101120000\rPID|1||MRN" +
                          std::to_string(s * 1000 + i % 50) +
                          "^^^H^MR||Doe^John^Q||19700101|M\rPV1|1|I|W^1^1\r\x1c\r";
        long long first = epochUs();
        auto t0 = Clock::now();
        for (;;) {
          if (stop) break;
          if (fd < 0) {
            fd = connectTo(host, port);
            if (fd < 0) {
              ++refused;
              std::this_thread::sleep_for(std::chrono::milliseconds(5));
              continue;
            }
            buf.clear();
          }
          std::string ack;
          if (writeAll(fd, msg)) ack = readFrame(fd, buf);
          if (ack.empty()) {  // closed: again on a new connection
            close(fd);
            fd = -1;
            continue;
          }
          if (field(ack, "MSA", 1) == "AA") {
            auto wait = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0);
            std::lock_guard lock(mu);
            lines.push_back(std::to_string(first) + " " + std::to_string(wait.count()) + " " + id);
            break;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(5));  // AE: again
        }
        if (Clock::now() > next + std::chrono::seconds(1)) next = Clock::now();  // fell behind
      }
      if (fd >= 0) close(fd);
    });
  while (!exists(stopFile)) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  stop = true;
  for (auto& t : threads) t.join();
  FILE* f = std::fopen(out.c_str(), "w");
  if (!f) return perror(out.c_str()), 1;
  for (auto& l : lines) std::fprintf(f, "%s\n", l.c_str());
  std::fclose(f);
  std::printf("refused=%ld\nacked=%zu\n", refused.load(), lines.size());
  return 0;
}

int listenOn(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd, 1024) != 0) {
    perror("listen");
    std::exit(1);
  }
  return fd;
}

int receiveMode(char** argv) {
  int port = std::atoi(argv[0]);
  std::string out = argv[1];
  int server = listenOn(port);
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::vector<std::string> lines;
  std::vector<std::thread> conns;
  std::thread acceptor([&] {
    while (!stop) {
      pollfd p{server, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      int fd = accept4(server, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      conns.emplace_back([&, fd] {
        std::string buf;
        for (;;) {
          std::string msg = readFrame(fd, buf);
          if (msg.empty()) break;
          long long at = epochUs();
          std::string id = field(msg, "MSH", 9);
          {
            std::lock_guard lock(mu);
            lines.push_back(std::to_string(at) + " " + id);
          }
          std::string ack = "\x0bMSH|^~\\&|R|F|S|F|20260101120000||ACK|" + id + "|P|2.5\rMSA|AA|" +
                            id + "\r\x1c\r";
          if (!writeAll(fd, ack)) break;
        }
        close(fd);
      });
    }
  });
  while (!exists(out + ".stop")) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  stop = true;
  acceptor.join();
  for (auto& c : conns) c.detach();  // blocked in read on an engine's connection
  std::lock_guard lock(mu);
  FILE* f = std::fopen(out.c_str(), "w");
  if (!f) return perror(out.c_str()), 1;
  for (auto& l : lines) std::fprintf(f, "%s\n", l.c_str());
  std::fclose(f);
  std::fflush(nullptr);
  _exit(0);
}

pid_t spawnWithSocket(int sock, const std::string& name, char** command) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  if (sock != 3) {
    dup2(sock, 3);
  } else {
    fcntl(3, F_SETFD, 0);
  }
  setenv("LISTEN_FDS", "1", 1);
  setenv("LISTEN_FDNAMES", name.c_str(), 1);
  setenv("LISTEN_PID", std::to_string(getpid()).c_str(), 1);
  execv(command[0], command);
  perror("execv");
  _exit(127);
}

int launchMode(int argc, char** argv) {
  if (argc < 5 || std::strcmp(argv[3], "--") != 0) return 2;
  int port = std::atoi(argv[0]);
  std::string name = argv[1];
  std::string trigger = argv[2];
  char** command = argv + 4;
  int sock = listenOn(port);
  auto stopChild = [](pid_t pid) {
    kill(pid, SIGTERM);
    waitpid(pid, nullptr, 0);
  };
  pid_t child = spawnWithSocket(sock, name, command);
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (exists(trigger + ".stop")) {
      stopChild(child);
      return 0;
    }
    if (exists(trigger)) {
      unlink(trigger.c_str());
      stopChild(child);
      child = spawnWithSocket(sock, name, command);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "send" && argc == 7) return sendMode(argv + 2);
  if (mode == "receive" && argc == 4) return receiveMode(argv + 2);
  if (mode == "launch" && argc >= 7) return launchMode(argc - 2, argv + 2);
  std::fprintf(stderr,
               "usage: handover_load send HOST PORT SENDERS RATE OUT\n"
               "       handover_load receive PORT OUT\n"
               "       handover_load launch PORT FDNAME TRIGGER -- COMMAND...\n");
  return 2;
}
