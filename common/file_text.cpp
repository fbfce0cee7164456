#include "common/file_text.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>

#include "common/fd.h"

namespace ductus {

Result<std::string> readFileBounded(const std::filesystem::path& file, std::uintmax_t limit) {
  std::error_code ec;
  auto size = std::filesystem::file_size(file, ec);
  if (ec) return Error{file.string() + ": " + ec.message()};
  if (size > limit)
    return Error{file.string() + ": too large (" + std::to_string(size) + " bytes, at most " +
                 std::to_string(limit) + ")"};
  std::ifstream in(file, std::ios::binary);
  if (!in) return Error::fromErrno("cannot read " + file.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

Status replaceFile(const std::filesystem::path& file, const std::string& text, unsigned mode) {
  std::filesystem::path tmp = file;
  tmp += ".tmp";
  Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode));
  if (!fd.valid()) return Error::fromErrno("cannot write " + tmp.string());
  size_t off = 0;
  while (off < text.size()) {
    ssize_t n = ::write(fd.get(), text.data() + off, text.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error::fromErrno("cannot write " + tmp.string());
    }
    off += static_cast<size_t>(n);
  }
  if (::fsync(fd.get()) != 0) return Error::fromErrno("fsync() of " + tmp.string());
  fd.reset();
  if (::rename(tmp.c_str(), file.c_str()) != 0)
    return Error::fromErrno("cannot replace " + file.string());
  return {};
}

}  // namespace ductus
