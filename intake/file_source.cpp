#include "intake/file_source.h"

#include <nlohmann/json.hpp>

#include "common/hl7/mllp.h"
#include "common/log.h"
#include "common/text.h"
#include "intake/intake.h"
#include "intake/local_folder.h"

namespace ductus::intake {
namespace fs = std::filesystem;

// The file being read. A read or a store answered for a job the source gave
// up meanwhile is told apart by seq and dropped.
struct FileSource::Job {
  uint64_t seq = 0;
  bool reading = false;  // a read is in flight
  bool storing = false;  // a batch's transaction is in flight
  PolledFile file;
  uint64_t readAt = 0;     // next byte to read
  uint64_t committed = 0;  // offset saved with the last committed batch
  int64_t records = 0;
  std::optional<intake::RecordSplitter> splitter;  // split: records
  std::string whole;                                // unsplit
  std::vector<intake::SplitRecord> pending;
  size_t pendingBytes = 0;
  bool atEnd = false;  // the whole file is read (and split)
  // A read that failed while a batch was committing: the round ends once
  // that commit is answered, so the next round's resume reads progress
  // that includes it (else it could store that batch again).
  std::optional<Error> failed;
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

namespace {

fs::path underProject(const fs::path& root, const std::string& p) {
  if (p.empty()) return {};
  return fs::path(p).is_absolute() ? fs::path(p) : root / p;
}

}  // namespace

FileSource::FileSource(uv_loop_t* loop, Intake& intake,
                       const config::FileSelection& files, config::Format format,
                       const fs::path& projectRoot, uint64_t maxMessageBytes)
    : FileSource(loop, intake,
                 std::make_unique<LocalFolder>(loop, underProject(projectRoot, files.path),
                                               underProject(projectRoot, files.moveTo)),
                 files, format, maxMessageBytes) {}

FileSource::FileSource(uv_loop_t* loop, Intake& intake, std::unique_ptr<DropFolder> folder,
                       const config::FileSelection& files, config::Format format,
                       uint64_t maxMessageBytes)
    : loop_(loop), intake_(intake), files_(files), format_(format),
      maxMessageBytes_(std::min(maxMessageBytes, kMaxUnsplitBytes)),
      folder_(std::move(folder)),
      poller_(*folder_, FilePollerSettings{files.pattern, ""}) {
  timer_ = makeTimer(loop_, this);
  schedule(0);
}

FileSource::~FileSource() {
  *alive_ = false;
  dropJob();
}

void FileSource::dropJob() {
  // A read in flight answers into nothing: its job's seq is gone.
  job_.reset();
  folder_->release();
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
      if (r.error().kind == ErrorKind::Denied) refused(r.error());
      else spdlog::warn("{}: file source: {}", intake_.spec().name, r.error().message);
      return roundDone();
    }
    if (!lastRefusal_.empty())
      spdlog::info("{}: file source: {} is reachable again", intake_.spec().name,
                   folder_->describe());
    lastRefusal_.clear();
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
  job_->seq = ++jobSeq_;
  job_->file = f;
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
  Job& j = *job_;
  if (j.committed == 0)
    spdlog::info("{}: storing {} ({} bytes{})", intake_.spec().name, j.file.name, j.file.size,
                 split ? ", a message per record" : "");
  j.readAt = j.committed;
  if (split && format_ == config::Format::Csv && j.committed > 0) {
    // Resuming: the header is the file's first record; read it again.
    auto alive = alive_;
    uint64_t seq = j.seq;
    j.reading = true;
    folder_->read(j.file.name, 0, 64 * 1024, [this, alive, seq](Result<std::string> r) {
      if (!*alive || !job_ || job_->seq != seq) return;  // the job was given up meanwhile
      job_->reading = false;
      onHeader(std::move(r));
    });
    return;
  }
  if (split) j.splitter.emplace(splitFormatOf(format_), j.committed, std::nullopt);
  readMore();
}

void FileSource::onHeader(Result<std::string> r) {
  if (!r) return fail(r.error());
  Job& j = *job_;
  std::optional<std::string> header;
  if (!r->empty()) header = intake::RecordSplitter::readCsvHeader(*r);
  if (!header) return fail(j.file.path + ": cannot read the CSV header to resume");
  j.splitter.emplace(splitFormatOf(format_), j.committed, header);
  readMore();
}

void FileSource::readMore() {
  auto alive = alive_;
  uint64_t seq = job_->seq;
  job_->reading = true;
  folder_->read(job_->file.name, job_->readAt, kReadChunk,
                [this, alive, seq](Result<std::string> r) {
                  if (!*alive || !job_ || job_->seq != seq) return;  // given up meanwhile
                  job_->reading = false;
                  onRead(std::move(r));
                });
}

void FileSource::onRead(Result<std::string> r) {
  if (!r) return fail(r.error());
  Job& j = *job_;
  if (r->empty()) {
    if (j.splitter) j.splitter->finish(j.pending);
    j.atEnd = true;
    return advance();
  }
  j.readAt += r->size();
  if (!j.splitter) {
    j.whole.append(*r);
    return advance();
  }
  size_t before = j.pending.size();
  j.splitter->feed(*r, j.pending);
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
    if (job_->failed) return fail(Error(*job_->failed));
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
  auto alive = alive_;
  folder_->finish(f.name, [this, alive, f, records](Status s) {
    if (!*alive) return;
    if (!s) {
      // Stored (done is saved), so the next round only retries the move.
      spdlog::error("{}: {} is stored but could not be {}: {}", intake_.spec().name, f.path,
                    folder_->finishDescribe(), s.error().message);
      return roundDone();
    }
    spdlog::info("{}: {} stored ({} message(s)) and {}", intake_.spec().name, f.name, records,
                 files_.moveTo.empty() ? "deleted" : "moved");
    poller_.forget(f.name);
    ++next_;
    nextFile();
  });
}

void FileSource::fail(const std::string& why) {
  if (job_ && job_->storing) return fail(Error{why});
  spdlog::warn("{}: file source: {}; trying again at the next poll", intake_.spec().name, why);
  roundDone();
}

void FileSource::fail(const Error& e) {
  if (job_ && job_->storing) {
    job_->failed = e;  // the round ends when the commit in flight is answered
    return;
  }
  if (e.kind == ErrorKind::Denied) {
    refused(e);
    return roundDone();
  }
  fail(e.message);
}

// Retrying changes nothing until the project does, so the same refusal is
// said once, not at every poll; a different one is said again.
void FileSource::refused(const Error& e) {
  if (e.message == lastRefusal_) return;
  lastRefusal_ = e.message;
  spdlog::error("{}: file source: {}: {}; nothing is taken until this is fixed",
                intake_.spec().name, folder_->describe(), e.message);
}

}  // namespace ductus::intake
