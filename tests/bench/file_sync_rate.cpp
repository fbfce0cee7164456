// The disk's limit for file destinations, for scripts/bench-fanout.sh: how
// many small files per second can be made durable the way the file sender
// makes them, WINDOW files in flight at once. Prints "rate=N".
//
//   file_sync_rate DIR [FILES] [WINDOW] [each|group|datasync]
//
// each: WINDOW threads, each writing an unnamed file (O_TMPFILE), fsync,
//   link to its name, close, then an fsync of the folder (sync: each);
//   a temporary name and a rename where there are no unnamed files.
// group (sync: group): WINDOW files written unnamed (O_TMPFILE), one
//   syncfs, each linked to its name, one syncfs; again until FILES (the
//   sender gathers what arrives while a sync runs, so a group is about its
//   window). Where the file system makes no unnamed files, temporary names
//   and renames, as the sender does there.
// datasync: the other group sequence, measured against group once (the
//   figures are in docs/architecture.md, "Fan-out"): WINDOW files written,
//   each one's fdatasync issued together on up to 8 threads, the renames,
//   one fsync of the folder.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

const std::string kBody(300, 'x');  // an HL7 message's size

// Whether dir's file system makes unnamed files (O_TMPFILE); where it
// doesn't, the sender names a temporary file and renames it, and so do
// each and group here.
bool unnamedFiles(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

std::string temporaryName(const std::string& dir, int i) {
  return dir + "/." + std::to_string(i) + ".tmp";
}

// File i written, unnamed or under its temporary name: its fd, or -1.
int writeFile(const std::string& dir, int i, bool unnamed) {
  int fd = unnamed ? ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644)
                   : ::open(temporaryName(dir, i).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                            0644);
  if (fd < 0) return -1;
  if (::write(fd, kBody.data(), kBody.size()) != static_cast<ssize_t>(kBody.size())) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// File i given its final name: an unnamed one linked through its fd, a
// temporary one renamed.
bool nameFile(const std::string& dir, int i, int fd, bool unnamed) {
  std::string fin = dir + "/" + std::to_string(i);
  if (!unnamed) return ::rename(temporaryName(dir, i).c_str(), fin.c_str()) == 0;
  std::string proc = "/proc/self/fd/" + std::to_string(fd);
  return ::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, fin.c_str(), AT_SYMLINK_FOLLOW) == 0;
}

bool each(const std::string& dir, int files, int window) {
  const bool unnamed = unnamedFiles(dir);
  std::atomic<bool> failed = false;
  std::vector<std::thread> ts;
  for (int t = 0; t < window; ++t) {
    ts.emplace_back([&, t] {
      int folder = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      for (int i = t; i < files && folder >= 0; i += window) {
        int fd = writeFile(dir, i, unnamed);
        bool ok = fd >= 0 && ::fsync(fd) == 0 && nameFile(dir, i, fd, unnamed);
        ok = (fd < 0 || ::close(fd) == 0) && ok;
        if (!ok || ::fsync(folder) != 0) {
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
  const bool unnamed = unnamedFiles(dir);
  for (int first = 0; first < files; first += window) {
    int last = std::min(files, first + window);
    std::vector<int> fds;
    for (int i = first; i < last; ++i) {
      int fd = writeFile(dir, i, unnamed);
      if (fd < 0) return false;
      fds.push_back(fd);
    }
    if (::syncfs(fds.front()) != 0) return false;
    for (int i = first; i < last; ++i)
      if (!nameFile(dir, i, fds[i - first], unnamed)) return false;
    if (::syncfs(fds.front()) != 0) return false;
    for (int fd : fds) ::close(fd);
  }
  return true;
}

bool datasync(const std::string& dir, int files, int window) {
  int folder = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (folder < 0) return false;
  for (int first = 0; first < files; first += window) {
    int last = std::min(files, first + window);
    std::vector<int> fds;
    for (int i = first; i < last; ++i) {
      int fd = writeFile(dir, i, false);
      if (fd < 0) return false;
      fds.push_back(fd);
    }
    int threads = std::min<int>(8, fds.size());
    std::vector<std::thread> ts;
    std::atomic<bool> failed = false;
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        for (size_t i = t; i < fds.size(); i += threads)
          if (::fdatasync(fds[i]) != 0) failed = true;
      });
    for (auto& t : ts) t.join();
    if (failed) return false;
    for (int i = first; i < last; ++i)
      if (!nameFile(dir, i, fds[i - first], false)) return false;
    if (::fsync(folder) != 0) return false;
    for (int fd : fds) ::close(fd);
  }
  ::close(folder);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: file_sync_rate DIR [FILES] [WINDOW] [each|group|datasync]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const int files = argc > 2 ? std::atoi(argv[2]) : 3000;
  const int window = argc > 3 ? std::max(1, std::atoi(argv[3])) : 16;
  const std::string mode = argc > 4 ? argv[4] : "each";
  if (mode != "each" && mode != "group" && mode != "datasync") {
    std::fprintf(stderr, "file_sync_rate: unknown mode %s (each, group or datasync)\n",
                 mode.c_str());
    return 2;
  }
  auto t0 = std::chrono::steady_clock::now();
  bool ok = mode == "group"      ? group(dir, files, window)
            : mode == "datasync" ? datasync(dir, files, window)
                                 : each(dir, files, window);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!ok) {
    std::perror("file_sync_rate");
    return 1;
  }
  std::printf("rate=%.0f\n", files / secs);
  return 0;
}
