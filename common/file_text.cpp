#include "common/file_text.h"

#include <fstream>
#include <sstream>

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

}  // namespace ductus
