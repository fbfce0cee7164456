// A file source's test bench: a migrated database, an Intake of HL7
// records on the StoreTest's loop, and ways to run that loop for a while.
// Shared by file_source_test.cpp (a folder in memory) and
// sftp_source_test.cpp (a real sshd).
#pragma once

#include <gtest/gtest.h>
#include <uv.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "intake/file_source.h"
#include "intake/intake.h"
#include "tests/schema/store_fixture.h"

namespace ductus::intake::test {

// n HL7 messages of one segment, control ids <prefix>1..<prefix>n.
inline std::string hl7Records(int n, const std::string& prefix, int from = 1) {
  std::string out;
  for (int i = from; i < from + n; ++i)
    out += "MSH|^~\\&|LAB|H|EMR|H|20240101120000||ORU^R01|" + prefix + std::to_string(i) +
           "|P|2.5\r";
  return out;
}

class FileSourceTest : public store::test::StoreTest {
 protected:
  void SetUp() override {
    StoreTest::SetUp();
    IntakeSpec spec;
    spec.name = "drop";
    spec.interfaceId = iface_;
    spec.destinationIds = {destA_};
    spec.keys.format = config::Format::Hl7v2;
    intake_ = std::make_unique<Intake>(*store_, spec, [](int32_t) {});
  }
  void TearDown() override {
    intake_.reset();
    StoreTest::TearDown();
  }

  // split: records, move_to: done/, a poll every pollMs_.
  config::FileSelection selection() const {
    config::FileSelection files;
    files.path = "outbox";
    files.moveTo = "done";
    files.split = config::Split::Records;
    files.poll = std::chrono::milliseconds(pollMs_);
    return files;
  }
  std::unique_ptr<FileSource> makeSource(std::unique_ptr<DropFolder> folder) {
    return std::make_unique<FileSource>(&loop_, *intake_, std::move(folder), selection(),
                                        config::Format::Hl7v2);
  }

  // Runs the loop until done() or `limit`; whether done() came true.
  bool runUntil(const std::function<bool()>& done, std::chrono::milliseconds limit) {
    auto end = std::chrono::steady_clock::now() + limit;
    uv_timer_t tick;  // wakes the loop to look at the clock and done()
    uv_timer_init(&loop_, &tick);
    uv_timer_start(&tick, [](uv_timer_t*) {}, 20, 20);
    bool ok = false;
    while (!(ok = done()) && std::chrono::steady_clock::now() < end) uv_run(&loop_, UV_RUN_ONCE);
    uv_close(reinterpret_cast<uv_handle_t*>(&tick), nullptr);
    uv_run(&loop_, UV_RUN_NOWAIT);  // the close callback, before `tick` goes
    return ok;
  }
  void runFor(std::chrono::milliseconds d) { runUntil([] { return false; }, d); }

  int pollMs_ = 50;
  std::unique_ptr<Intake> intake_;
};

}  // namespace ductus::intake::test
