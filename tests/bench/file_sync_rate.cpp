// The disk's limit for file destinations, for scripts/bench-fanout.sh: how
// many small files per second can be made durable the way the file sender
// makes them, WINDOW files in flight at once. Prints "rate=N".
//
//   file_sync_rate DIR [FILES] [WINDOW] [each|group]
//
// each: WINDOW threads, each writing a temporary file, fsync, close,
//   rename, then an fsync of the folder (sync: each).
// group (sync: group): WINDOW files written to their temporary names, one
//   syncfs, the renames, one syncfs; again until FILES (the sender gathers
//   what arrives while a sync runs, so a group is about its window).
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

const std::string kBody(300, 'x');  // an HL7 message's size

bool writeTemp(const std::string& tmp, int* fdOut) {
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  *fdOut = fd;
  return fd >= 0 && ::write(fd, kBody.data(), kBody.size()) == static_cast<ssize_t>(kBody.size());
}

bool each(const std::string& dir, int files, int window) {
  bool failed = false;
  std::vector<std::thread> ts;
  for (int t = 0; t < window; ++t) {
    ts.emplace_back([&, t] {
      int folder = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      for (int i = t; i < files && folder >= 0; i += window) {
        std::string tmp = dir + "/." + std::to_string(i) + ".tmp",
                    fin = dir + "/" + std::to_string(i);
        int fd = -1;
        if (!writeTemp(tmp, &fd) || ::fsync(fd) != 0 || ::close(fd) != 0 ||
            ::rename(tmp.c_str(), fin.c_str()) != 0 || ::fsync(folder) != 0) {
          failed = true;
          break;
        }
      }
      if (folder < 0)
        failed = true;
      else
        ::close(folder);
    });
  }
  for (auto& t : ts) t.join();
  return !failed;
}

bool group(const std::string& dir, int files, int window) {
  for (int first = 0; first < files; first += window) {
    int last = std::min(files, first + window);
    std::vector<int> fds;
    for (int i = first; i < last; ++i) {
      int fd = -1;
      if (!writeTemp(dir + "/." + std::to_string(i) + ".tmp", &fd)) return false;
      fds.push_back(fd);
    }
    if (::syncfs(fds.front()) != 0) return false;
    for (int i = first; i < last; ++i) {
      std::string tmp = dir + "/." + std::to_string(i) + ".tmp",
                  fin = dir + "/" + std::to_string(i);
      if (::rename(tmp.c_str(), fin.c_str()) != 0) return false;
    }
    if (::syncfs(fds.front()) != 0) return false;
    for (int fd : fds) ::close(fd);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: file_sync_rate DIR [FILES] [WINDOW] [each|group]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const int files = argc > 2 ? std::atoi(argv[2]) : 3000;
  const int window = argc > 3 ? std::max(1, std::atoi(argv[3])) : 16;
  const bool grouped = argc > 4 && std::strcmp(argv[4], "group") == 0;
  auto t0 = std::chrono::steady_clock::now();
  bool ok = grouped ? group(dir, files, window) : each(dir, files, window);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!ok) {
    std::perror("file_sync_rate");
    return 1;
  }
  std::printf("rate=%.0f\n", files / secs);
  return 0;
}
