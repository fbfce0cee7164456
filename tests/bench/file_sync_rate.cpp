// The disk's limit for file destinations, for scripts/bench-fanout.sh: how
// many small files per second can be made durable the way the file sender
// makes them (write to a temporary name, fsync, rename), by THREADS writers
// at once. Prints "rate=N".
//
//   file_sync_rate DIR [FILES] [THREADS]
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: file_sync_rate DIR [FILES] [THREADS]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const int files = argc > 2 ? std::atoi(argv[2]) : 3000;
  const int threads = argc > 3 ? std::atoi(argv[3]) : 16;
  const std::string body(300, 'x');  // an HL7 message's size
  bool failed = false;
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      for (int i = t; i < files; i += threads) {
        std::string tmp = dir + "/." + std::to_string(i) + ".tmp",
                    fin = dir + "/" + std::to_string(i);
        int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || ::write(fd, body.data(), body.size()) != static_cast<ssize_t>(body.size()) ||
            ::fsync(fd) != 0 || ::close(fd) != 0 || ::rename(tmp.c_str(), fin.c_str()) != 0) {
          failed = true;
          return;
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (failed) {
    std::perror("file_sync_rate");
    return 1;
  }
  std::printf("rate=%.0f\n", files / secs);
  return 0;
}
