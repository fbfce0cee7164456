// `ductus dev` keeps its throwaway cluster in a state folder, by default in
// world-writable /var/tmp, and as root chowns it to postgres. A folder
// someone else prepared there must be refused before anything is created
// in it or chowned. The real binary, without starting PostgreSQL.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "tests/support/exit_status.h"
#include "tests/support/test_env.h"

namespace ductus::test {
namespace {

namespace fs = std::filesystem;

class DevStateFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ductus-dev-folder.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  ChildOutput dev(const fs::path& dataDir) {
    std::string project = std::string(DUCTUS_SOURCE_DIR) + "/examples/adt-feed";
    return runChild({"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>&1", ductusBinary(), "dev", project,
                     "--data-dir", dataDir.string()});
  }
  fs::path root_;
};

TEST_F(DevStateFolder, ALinkInPlaceOfTheStateFolderIsRefusedAndNotFollowed) {
  fs::create_directory(root_ / "elsewhere");
  fs::create_symlink(root_ / "elsewhere", root_ / "state");
  auto r = dev(root_ / "state");
  EXPECT_TRUE(exitedWith(r.exitStatus, 1)) << r.out;
  EXPECT_NE(r.out.find("is a symbolic link"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::is_empty(root_ / "elsewhere")) << "nothing was made through the link";
}

TEST_F(DevStateFolder, AHolderOthersMayWriteToIsRefused) {
  fs::create_directory(root_ / "open");
  chmod((root_ / "open").c_str(), 0777);
  auto r = dev(root_ / "open" / "state");
  EXPECT_TRUE(exitedWith(r.exitStatus, 1)) << r.out;
  EXPECT_NE(r.out.find("is writable by others"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace ductus::test
