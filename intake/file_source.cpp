#include "intake/file_source.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>

#include "common/hl7/mllp.h"
#include "common/text.h"
#include "intake/intake.h"

namespace ductus::intake {
namespace fs = std::filesystem;

struct FileSource::Job {
  FileSource* owner = nullptr;  // null once the source is gone or gave it up mid-request
  uint64_t seq = 0;             // tells a store's answer for an abandoned job apart
  bool reading = false;         // a uv_fs request (open or read) is in flight
  enum class Step { Open, Header, Read } step = Step::Open;  // what that request is
  bool storing = false;         // a batch's transaction is in flight
  PolledFile file;
  int fd = -1;
  uint64_t readAt = 0;     // next byte to read
  uint64_t committed = 0;  // offset saved with the last committed batch
  int64_t records = 0;
  std::optional<intake::RecordSplitter> splitter;  // split: records
  std::string whole;                                // unsplit
  std::vector<intake::SplitRecord> pending;
  size_t pendingBytes = 0;
  bool atEnd = false;  // the whole file is read (and split)
  std::string buf = std::string(kReadChunk, '\0');
  uv_fs_t req{};
  ~Job() {
    if (fd >= 0) ::close(fd);  // a regular file's close does not wait on the disk
  }
};

namespace {

intake::SplitFormat splitFormatOf(config::Format f) {
  switch (f) {
    case config::Format::Hl7v2: return intake::SplitFormat::Hl7;
    case config::Format::Csv: return intake::SplitFormat::Csv;
    default: return intake::SplitFormat::Lines;
  }
}

// A text column: a name in ISO-8859-1 (or with a NUL) would be refused on
// every poll, and that file never stored.
std::string stateKey(const std::string& name) { return "file:" + asDatabaseText(name); }

}  // namespace

FileSource::FileSource(uv_loop_t* loop, Intake& intake,
                       const config::FileSelection& files, config::Format format,
                       const fs::path& projectRoot, uint64_t maxMessageBytes)
    : loop_(loop), intake_(intake), files_(files), format_(format),
      maxMessageBytes_(std::min(maxMessageBytes, kMaxUnsplitBytes)),
      folder_(fs::path(files.path).is_absolute() ? fs::path(files.path) : projectRoot / files.path),
      moveTo_(files.moveTo.empty() ? fs::path()
              : fs::path(files.moveTo).is_absolute() ? fs::path(files.moveTo)
                                                     : projectRoot / files.moveTo),
      poller_(loop, FilePollerSettings{folder_.string(), files.pattern, ""}) {
  timer_ = makeTimer(loop_, this);
  schedule(0);
}

FileSource::~FileSource() {
  *alive_ = false;
  dropJob();
}

void FileSource::dropJob() {
  // A read in flight still uses the job's buffer and request: hand the job
  // to the read's callback, which frees it.
  if (job_ && job_->reading) {
    job_->owner = nullptr;
    job_.release();
  }
  job_.reset();
}

void FileSource::schedule(uint64_t ms) {
  uv_timer_start(
      timer_.get(),
      [](uv_timer_t* t) {
        if (auto* self = static_cast<FileSource*>(t->data)) self->poll();
      },
      ms, 0);
}

void FileSource::pause() { paused_ = true; }

void FileSource::resume() {
  paused_ = false;
  if (!idle_) return;  // a round or its timer is under way: it carries on
  idle_ = false;
  schedule(0);
}

void FileSource::poll() {
  if (paused_) {
    idle_ = true;
    return;
  }
  auto alive = alive_;
  poller_.poll([this, alive](Result<std::vector<PolledFile>> r) {
    if (!*alive) return;
    if (!r) {
      spdlog::warn("{}: file source: {}", intake_.spec().name, r.error().message);
      return roundDone();
    }
    ready_ = std::move(*r);
    next_ = 0;
    nextFile();
  });
}

void FileSource::roundDone() {
  dropJob();
  schedule(static_cast<uint64_t>(files_.poll.count()));
}

void FileSource::nextFile() {
  if (next_ >= ready_.size()) return roundDone();
  if (!intake_.gate().open()) return roundDone();  // stopping: files wait
  if (paused_) return roundDone();
  const PolledFile f = ready_[next_];
  auto alive = alive_;
  intake_.sourceState(stateKey(f.name),
                        [this, alive, f](Result<std::optional<std::string>> r) {
                          if (!*alive) return;
                          if (!r) return fail(r.error().message);
                          startFile(f, *r);
                        });
}

void FileSource::startFile(const PolledFile& f, std::optional<std::string> state) {
  job_ = std::make_unique<Job>();
  job_->owner = this;
  job_->seq = ++jobSeq_;
  job_->file = f;
  job_->req.data = job_.get();
  bool split = files_.split == config::Split::Records;
  if (state) {
    auto j = nlohmann::json::parse(*state, nullptr, false);
    if (!j.is_discarded() && j.value("size", uint64_t{0}) == f.size &&
        j.value("mtime", int64_t{0}) == f.mtimeNs) {
      if (j.value("done", false)) return finishFile();  // stored; the move was lost
      job_->committed = j.value("offset", uint64_t{0});
      job_->records = j.value("records", int64_t{0});
      spdlog::info("{}: resuming {} at byte {} ({} records already stored)", intake_.spec().name,
                   f.name, job_->committed, job_->records);
    }
  }
  if (!split && f.size > maxMessageBytes_) {
    spdlog::error("{}: {} is {} bytes, over the {} byte limit for a message (max_message_size); "
                  "left in place (use split: records)",
                  intake_.spec().name, f.path, f.size, maxMessageBytes_);
    job_.reset();
    ++next_;
    return nextFile();
  }
  job_->step = Job::Step::Open;
  int rc =
      uv_fs_open(loop_, &job_->req, f.path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW, 0, &FileSource::onFs);
  if (rc < 0) return fail("open " + f.path + ": " + uv_strerror(rc));
  job_->reading = true;
}

// Every uv_fs request of a job ends here, on the loop. A job its source gave
// up meanwhile (handed over by dropJob) is freed here instead.
void FileSource::onFs(uv_fs_t* req) {
  auto* job = static_cast<Job*>(req->data);
  ssize_t n = req->result;
  uv_fs_req_cleanup(req);
  job->reading = false;
  if (job->step == Job::Step::Open && n >= 0) job->fd = static_cast<int>(n);  // the job closes it
  if (!job->owner) {
    std::unique_ptr<Job> orphan(job);  // its source is gone or gave it up
    return;
  }
  switch (job->step) {
    case Job::Step::Open: return job->owner->onOpen(n);
    case Job::Step::Header: return job->owner->onHeader(n);
    case Job::Step::Read: return job->owner->onRead(n);
  }
}

void FileSource::onOpen(ssize_t n) {
  Job& j = *job_;
  if (n < 0) return fail("open " + j.file.path + ": " + uv_strerror(static_cast<int>(n)));
  bool split = files_.split == config::Split::Records;
  if (j.committed == 0)
    spdlog::info("{}: storing {} ({} bytes{})", intake_.spec().name, j.file.name, j.file.size,
                 split ? ", a message per record" : "");
  j.readAt = j.committed;
  if (split && format_ == config::Format::Csv && j.committed > 0) {
    // Resuming: the header is the file's first record; read it again.
    j.step = Job::Step::Header;
    size_t headerBytes = std::min<size_t>(j.buf.size(), 64 * 1024);
    uv_buf_t b = uv_buf_init(j.buf.data(), static_cast<unsigned>(headerBytes));
    int rc = uv_fs_read(loop_, &j.req, j.fd, &b, 1, 0, &FileSource::onFs);
    if (rc < 0) return fail("read " + j.file.path + ": " + uv_strerror(rc));
    j.reading = true;
    return;
  }
  if (split) j.splitter.emplace(splitFormatOf(format_), j.committed, std::nullopt);
  readMore();
}

void FileSource::onHeader(ssize_t n) {
  Job& j = *job_;
  std::optional<std::string> header;
  if (n > 0) header = intake::RecordSplitter::readCsvHeader(std::string_view(j.buf.data(), n));
  if (!header) return fail(j.file.path + ": cannot read the CSV header to resume");
  j.splitter.emplace(splitFormatOf(format_), j.committed, header);
  readMore();
}

void FileSource::readMore() {
  job_->step = Job::Step::Read;
  uv_buf_t b = uv_buf_init(job_->buf.data(), static_cast<unsigned>(job_->buf.size()));
  int rc = uv_fs_read(loop_, &job_->req, job_->fd, &b, 1, static_cast<int64_t>(job_->readAt),
                      &FileSource::onFs);
  if (rc < 0) return fail(std::string("read: ") + uv_strerror(rc));
  job_->reading = true;
}

void FileSource::onRead(ssize_t n) {
  if (n < 0) return fail("read " + job_->file.path + ": " + uv_strerror(static_cast<int>(n)));
  Job& j = *job_;
  if (n == 0) {
    if (j.splitter) j.splitter->finish(j.pending);
    j.atEnd = true;
    return advance();
  }
  j.readAt += static_cast<uint64_t>(n);
  std::string_view chunk(j.buf.data(), static_cast<size_t>(n));
  if (!j.splitter) {
    j.whole.append(chunk);
    return advance();
  }
  size_t before = j.pending.size();
  j.splitter->feed(chunk, j.pending);
  for (size_t i = before; i < j.pending.size(); ++i) j.pendingBytes += j.pending[i].bytes.size();
  advance();
}

// After a read or a committed batch. One batch is stored at a time, so the
// saved progress only ever moves forward over committed records; meanwhile
// the file is read and split ahead, up to two batches, so that work runs
// while the database commits instead of after it.
void FileSource::advance() {
  const uint64_t seq = job_->seq;
  bool batchReady = job_->atEnd || job_->pending.size() >= kBatchRecords ||
                    job_->pendingBytes >= kBatchBytes;
  if (!job_->storing && batchReady) {
    storeBatch();
    if (!job_ || job_->seq != seq) return;  // answered at once, and the job ended
  }
  Job& j = *job_;
  if (!j.reading && !j.atEnd && j.pending.size() < 2 * kBatchRecords &&
      j.pendingBytes < 2 * kBatchBytes)
    readMore();
}

// Stores the first kBatchRecords (or kBatchBytes) of the pending records
// with the file's progress; one read chunk may hold many batches.
void FileSource::storeBatch() {
  Job& j = *job_;
  std::vector<std::string> payloads;
  uint64_t offset = j.committed;
  // A record intake refuses to deliver (RecordSplitter's refusal) is stored
  // alone, quarantined, with the progress past it: a batch ends before it.
  std::optional<std::string> refusal;
  if (j.splitter) {
    size_t take = 0, bytes = 0;
    if (!j.pending.empty() && j.pending.front().refusal) {
      refusal = j.pending.front().refusal;
      bytes = j.pending.front().bytes.size();
      take = 1;
    }
    while (!refusal && take < j.pending.size() && !j.pending[take].refusal &&
           take < kBatchRecords && (take == 0 || bytes < kBatchBytes))
      bytes += j.pending[take++].bytes.size();
    for (size_t i = 0; i < take; ++i) {
      auto& rec = j.pending[i];
      if (rec.bytes.size() > maxMessageBytes_) {
        refusal.reset();
        // Not stored: the file itself keeps it (moved to move_to as read).
        spdlog::error("{}: {}: the record ending at byte {} is {} bytes, over max_message_size "
                      "({}); not stored",
                      intake_.spec().name, j.file.path, rec.endOffset, rec.bytes.size(),
                      maxMessageBytes_);
        continue;
      }
      payloads.push_back(std::move(rec.bytes));
    }
    if (take > 0) offset = j.pending[take - 1].endOffset;
    j.pending.erase(j.pending.begin(), j.pending.begin() + static_cast<std::ptrdiff_t>(take));
    j.pendingBytes -= bytes;
  } else {
    if (format_ == config::Format::Hl7v2)
      if (auto s = hl7::mllp::refuseFramingBytes(j.whole); !s)
        refusal = s.error().message + " (a file that keeps its MLLP framing needs split: records)";
    payloads.push_back(std::move(j.whole));
  }
  bool last = j.atEnd && j.pending.empty();
  if (last) offset = j.file.size;
  int64_t records = j.records + static_cast<int64_t>(payloads.size());
  nlohmann::json state{{"size", j.file.size}, {"mtime", j.file.mtimeNs}, {"offset", offset},
                       {"records", records},   {"done", last}};
  auto alive = alive_;
  uint64_t seq = j.seq;
  auto after = [this, alive, seq, offset, records, last](Status s) {
    if (!*alive || !job_ || job_->seq != seq) return;  // the job was given up meanwhile
    job_->storing = false;
    if (!s) return fail(s.error().message);
    job_->committed = offset;
    job_->records = records;
    if (last) return finishFile();
    advance();
  };
  j.storing = true;
  if (refusal && payloads.size() == 1) {
    spdlog::warn("{}: {}: the message ending at byte {} is quarantined, not delivered: {}",
                 intake_.spec().name, j.file.path, offset, *refusal);
    return intake_.acceptRefused(std::move(payloads.front()), std::move(*refusal),
                                 store::SourceStateWrite{stateKey(j.file.name), state.dump()},
                                 [after](Result<store::StoredMessage> r) {
                                   after(r ? Status() : Status(r.error()));
                                 });
  }
  if (payloads.empty()) {
    return intake_.saveSourceState(stateKey(j.file.name), state.dump(),
                                 after);
  }
  intake_.acceptBatch(std::move(payloads), store::SourceStateWrite{stateKey(j.file.name), state.dump()},
                      [after](Result<store::BatchStored> r) {
                        after(r ? Status() : Status(r.error()));
                      });
}

void FileSource::finishFile() {
  const PolledFile f = job_->file;
  int64_t records = job_->records;
  uint64_t skipped = job_->splitter ? job_->splitter->skippedBytes() : 0;
  dropJob();
  if (skipped > 0) {
    // Moved on like the rest of the file (retrying can't change its
    // bytes), but said loudly: someone may be missing messages.
    spdlog::warn(
        "{}: {}: {} byte(s) outside any HL7 message (no MSH segment before them) were "
        "not stored{}",
        intake_.spec().name, f.name, skipped,
        records == 0 ? "; the file held no message at all" : "");
  }
  // Moving or deleting touches the folder: on a network drop folder that
  // can take long, so it runs on libuv's thread pool.
  struct Move {
    uv_work_t req{};
    fs::path from, moveTo;
    std::error_code ec;
    std::function<void(const std::error_code&)> done;
  };
  auto move = std::make_unique<Move>();
  move->req.data = move.get();
  move->from = f.path;
  move->moveTo = moveTo_;
  auto alive = alive_;
  move->done = [this, alive, f, records](const std::error_code& ec) {
    if (!*alive) return;
    if (ec) {
      // Stored (done is saved), so the next round only retries the move.
      spdlog::error("{}: {} is stored but could not be {}: {}", intake_.spec().name, f.path,
                    moveTo_.empty() ? "deleted" : "moved to " + moveTo_.string(), ec.message());
      return roundDone();
    }
    spdlog::info("{}: {} stored ({} message(s)) and {}", intake_.spec().name, f.name, records,
                 moveTo_.empty() ? "deleted" : "moved");
    poller_.forget(f.name);
    ++next_;
    nextFile();
  };
  int rc = uv_queue_work(
      loop_, &move->req,
      [](uv_work_t* req) {
        auto& m = *static_cast<Move*>(req->data);
        if (m.moveTo.empty()) {
          fs::remove(m.from, m.ec);
          return;
        }
        fs::create_directories(m.moveTo, m.ec);
        fs::path target = m.moveTo / m.from.filename();
        std::error_code exists;
        if (fs::exists(target, exists))
          target +=
              "." + std::to_string(std::chrono::system_clock::now().time_since_epoch().count());
        fs::rename(m.from, target, m.ec);
      },
      [](uv_work_t* req, int) {
        std::unique_ptr<Move> m(static_cast<Move*>(req->data));
        m->done(m->ec);
      });
  if (rc < 0) {
    spdlog::error("{}: {} is stored but its move could not start: {}", intake_.spec().name,
                  f.path, uv_strerror(rc));
    return roundDone();
  }
  move.release();  // freed when the work is done
}

void FileSource::fail(const std::string& why) {
  spdlog::warn("{}: file source: {}; trying again at the next poll", intake_.spec().name, why);
  roundDone();
}

}  // namespace ductus::intake
