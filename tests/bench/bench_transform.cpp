// bench_transform: what the process boundary costs a transform. The same
// ORU^R01 transform (parse, change three fields, re-encode) runs
//   in-process:  the worker's ScriptHost called directly, no IPC, one thread;
//   worker, one at a time: through WorkerPool to one real, confined worker,
//                each call sent when the previous one answered (like with
//                like: one thread's work either way, nothing overlaps);
//   worker, pipelined: the same with up to 512 calls waiting, as a delivery
//                loop uses a worker (the worker and the supervisor's side of
//                the pipe then run at once, on two cores);
// and a no-op call's round trip both ways. CPU is counted on both sides of
// the pipe: the worker's (its process clock) and the supervisor's (this
// process's clock while only the worker path runs), so the IPC overhead
// includes the encoding, the pipe and the event loop the supervisor pays.
// Prints a table; the ratios are the point (scripts/bench-transform.sh).
#include <uv.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <unistd.h>
#include <algorithm>
#include <functional>
#include <memory>
#include <vector>
#include <optional>
#include <string>

#include "common/uv_handle.h"
#include "supervisor/workers/worker_pool.h"
#include "worker/script_host.h"
#include "worker/v8_isolate.h"
#include "worker/v8_platform.h"
#include "tests/support/run_until.h"

namespace {

constexpr int kPipelined = 512;

using Clock = std::chrono::steady_clock;
using namespace ductus;

const char* kTransform =
    "export function transform(msg) {\n"
    "  msg.set('MSH.3', 'DUCTUS');\n"
    "  msg.set('PID.5.1', msg.get('PID.5.1').toUpperCase());\n"
    "  msg.set('OBX[3].5', 'corrected');\n"
    "  return msg;\n"
    "}\n"
    "export function noop(m) { return m; }\n";

// A realistic ~3 KB ORU^R01: header, patient, visit, order, 24 results.
std::string oru() {
  std::string m =
      "MSH|^~\\&|LABSYS|CENTRAL LAB|EHR|GENERAL HOSPITAL|20240315083000||ORU^R01^ORU_R01|"
      "LAB202403150001|P|2.5.1|||AL|NE||8859/1\r"
      "PID|1||123456789^^^GH^MR~987654^^^STATE^SS||Mustermann^Max^Johann^^Dr.||19650412|M|||"
      "Hauptstra\xDF" "e 12^^M\xFCnchen^BY^80331^DE||(089)123456|||M||ACC0001234\r"
      "PV1|1|I|W3^312^1^GH||||12345^Schmidt^Anna^^^Dr.|||MED||||||||IP|V000123|||||||||||||||||||||||||"
      "20240314120000\r"
      "ORC|RE|ORD448811|LAB77221||CM||||20240315070000|||12345^Schmidt^Anna^^^Dr.\r"
      "OBR|1|ORD448811|LAB77221|24331-1^Lipid panel^LN|||20240315070000|||||||20240315071500|"
      "BLD&Blood&HL70070|12345^Schmidt^Anna^^^Dr.||||||20240315082900|||F\r";
  const char* tests[] = {"2093-3^Cholesterol", "2571-8^Triglyceride", "2085-9^HDL",
                         "13457-7^LDL calc",   "2345-7^Glucose",      "2160-0^Creatinine",
                         "3094-0^Urea N",      "2951-2^Sodium",       "2823-3^Potassium",
                         "2075-0^Chloride",    "2028-9^CO2",          "17861-6^Calcium",
                         "2885-2^Protein",     "1751-7^Albumin",      "1975-2^Bilirubin",
                         "6768-6^ALP",         "1742-6^ALT",          "1920-8^AST",
                         "718-7^Hemoglobin",   "4544-3^Hematocrit",   "6690-2^WBC",
                         "789-8^RBC",          "777-3^Platelets",     "4548-4^HbA1c"};
  int i = 1;
  for (const char* t : tests) {
    m += "OBX|" + std::to_string(i) + "|NM|" + t + "^LN||" + std::to_string(50 + i * 7) +
         "|mg/dL^mg/dL^UCUM|10-200|N|||F|||20240315082900||LABTECH01\r";
    ++i;
  }
  m += "NTE|1|L|Specimen received at 07:15, processed within SLA.\r";
  return m;
}

class CountingOutput : public worker::HostOutput {
 public:
  void loaded(uint32_t, const Status& s) override {
    if (!s) std::fprintf(stderr, "load failed: %s\n", s.error().message.c_str());
  }
  void outcome(uint64_t, worker::OutcomeKind kind, std::string_view data) override {
    ++outcomes;
    if (kind != worker::OutcomeKind::Output) {
      ++failures;
      lastError = std::string(data);
    }
    bytes += data.size();
  }
  void service(const proto::ServiceRequest&) override {}
  void log(uint64_t, std::string_view, std::string_view) override {}
  uint64_t outcomes = 0, failures = 0, bytes = 0;
  std::string lastError;
};

// All threads of this process (V8's background threads included, as the
// worker's own clock includes its own). Also the supervisor's side of the
// worker rounds: WorkerPool runs on the loop thread alone, so this counts
// all of it, and at worst a little of the in-process isolate's background
// work left from the round before (an overcount, against the worker).
double processCpuMicros() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

// utime + stime of another process, from /proc/<pid>/stat (clock ticks).
double procStatCpuMicros(pid_t pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/stat";
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return 0;
  char buf[2048];
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = 0;
  const char* p = std::strrchr(buf, ')');
  if (!p) return 0;
  // After the command comes field 3 (state); utime is field 14, stime 15.
  unsigned long utime = 0, stime = 0;
  int field = 3;
  for (const char* q = p + 2; *q && field < 15; ++q) {
    if (*q == ' ') {
      ++field;
      if (field == 14) utime = std::strtoul(q + 1, nullptr, 10);
      if (field == 15) stime = std::strtoul(q + 1, nullptr, 10);
    }
  }
  return (utime + stime) * 1e6 / sysconf(_SC_CLK_TCK);
}

// All threads of another process: its process CPU clock (nanoseconds, the
// same clock processCpuMicros reads here); /proc's clock ticks (10 ms) where
// the kernel won't give that clock.
double childCpuMicros(pid_t pid) {
  clockid_t id;
  timespec ts;
  if (clock_getcpuclockid(pid, &id) == 0 && clock_gettime(id, &ts) == 0)
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
  return procStatCpuMicros(pid);
}

// One measured stretch of calls.
struct Round {
  double perSecond = 0;
  // CPU time per call: what the figures would be on an idle core (the
  // machine running the bench is usually shared).
  double cpuMicros = 0;            // in-process: this process; worker: the worker
  double supervisorCpuMicros = 0;  // worker only: this (supervisor) process
  double bothCpuMicros() const { return cpuMicros + supervisorCpuMicros; }
};

// The worker's ScriptHost called directly: no IPC.
class InProcess {
 public:
  bool start(const char* argv0, const std::string& msg) {
    msg_ = msg;
    // BENCH_V8_FLAGS=--perf-basic-prof lets `perf report` name JIT frames.
    if (const char* flags = std::getenv("BENCH_V8_FLAGS")) v8::V8::SetFlagsFromString(flags);
    if (auto s = worker::initV8(argv0); !s) return false;
    auto iso = worker::Isolate::create(size_t{config::kDefaultHeapMb} << 20);
    if (!iso) {
      std::fprintf(stderr, "%s\n", iso.error().message.c_str());
      return false;
    }
    iso_ = std::move(*iso);
    auto host = worker::ScriptHost::create(iso_->get(), out_);
    if (!host) {
      std::fprintf(stderr, "%s\n", host.error().message.c_str());
      return false;
    }
    host_ = std::move(*host);
    worker::InterfaceDef def;
    def.interfaceId = 1;
    def.name = "bench";
    def.entry = "interfaces/bench/transform.js";
    def.modules[def.entry] = kTransform;
    def.functions = {{"transform", "hl7v2", "hl7v2", "", "auto", 1},
                     {"noop", "hl7v2", "hl7v2", "", "auto", 2}};
    if (!host_->load(def)) return false;
    round(2000);  // warm up
    return true;
  }
  // One call after the other on this thread: the only way in-process runs.
  Round round(int n, uint32_t fn = 1) {
    Round r;
    auto t0 = Clock::now();
    double cpu0 = processCpuMicros();
    for (int i = 0; i < n; ++i) host_->invoke(nextId_++, fn, msg_, {});
    r.perSecond = n / std::chrono::duration<double>(Clock::now() - t0).count();
    r.cpuMicros = (processCpuMicros() - cpu0) / n;
    return r;
  }
  Round noop(int n) { return round(n, 2); }
  void stop() {
    if (out_.failures) std::fprintf(stderr, "in-process failures: %s\n", out_.lastError.c_str());
    host_.reset();
    iso_.reset();
  }

 private:
  std::string msg_;
  CountingOutput out_;
  std::unique_ptr<worker::Isolate> iso_;
  std::unique_ptr<worker::ScriptHost> host_;
  uint64_t nextId_ = 1;
};

class NoServices : public supervisor::ServiceHandler {
 public:
  void call(const supervisor::ServiceCall&, std::function<void(Result<std::string>)> r) override {
    r(Error{"no services in the benchmark"});
  }
};

// A benchmark waits as long as it takes.
bool runUntil(uv_loop_t* loop, const std::function<bool()>& pred) {
  return ductus::test::runUntil(loop, pred, std::chrono::hours(1));
}

// Through WorkerPool to one real, confined worker, calls pipelined.
class ThroughWorker {
 public:
  ThroughWorker() { uv_loop_init(&loop_); }
  ~ThroughWorker() {
    if (pool_) {
      bool down = false;
      pool_->shutdown([&] { down = true; });
      runUntil(&loop_, [&] { return down; });
      pool_.reset();
    }
    uv_run(&loop_, UV_RUN_NOWAIT);
    uv_loop_close(&loop_);
  }
  bool start(const char* binary, const std::string& project, const std::string& msg) {
    msg_ = msg;
    supervisor::WorkerPool::Options o;
    o.binary = binary;
    o.sharedWorkers = 1;
    pool_ = std::make_unique<supervisor::WorkerPool>(&loop_, o, none_);
    supervisor::InterfaceSpec spec;
    spec.name = "bench";
    spec.dir = project + "/interfaces/bench";
    spec.functions = {{"transform", "hl7v2", "hl7v2", "d"}, {"noop", "hl7v2", "hl7v2", "d"}};
    auto modules = supervisor::readInterfaceModules(spec);
    if (!modules) {
      std::fprintf(stderr, "%s\n", modules.error().message.c_str());
      return false;
    }
    std::optional<Status> loaded;
    auto ids = pool_->addInterface(spec, std::move(*modules), [&](Status s) { loaded = s; });
    runUntil(&loop_, [&] { return loaded.has_value(); });
    if (!*loaded) {
      std::fprintf(stderr, "%s\n", loaded->error().message.c_str());
      return false;
    }
    transform_ = (*ids)[0];
    noop_ = (*ids)[1];
    worker_ = pool_->workerPids("bench").at(0);
    round(2000, kPipelined);  // warm up
    return true;
  }
  // n calls of fn with at most `depth` waiting. Pipelined (kPipelined) as a
  // delivery loop uses a worker: a bounded number waiting (twice the pool's
  // window, so the worker never runs dry), each answer sending the next.
  // Queuing all n calls up front would time the copying of n payloads into
  // the backlog, which no engine does. Depth 1: each call sent from the
  // previous one's answer, so the worker and this side never run at once.
  Round round(int n, int depth, bool noop = false) {
    Round r;
    int done = 0, sent = 0;
    auto fn = noop ? noop_ : transform_;
    double workerCpu0 = childCpuMicros(worker_), ownCpu0 = processCpuMicros();
    auto t0 = Clock::now();
    std::function<void(supervisor::Outcome)> next = [&](supervisor::Outcome out) {
      ++done;
      if (out.kind != supervisor::Outcome::Kind::Output) ++failed_;
      if (sent < n) {
        ++sent;
        pool_->invoke(fn, msg_, {}, next);
      }
    };
    while (sent < std::min(n, depth)) {
      ++sent;
      pool_->invoke(fn, msg_, {}, next);
    }
    runUntil(&loop_, [&] { return done == n; });
    r.perSecond = n / std::chrono::duration<double>(Clock::now() - t0).count();
    r.cpuMicros = (childCpuMicros(worker_) - workerCpu0) / n;
    r.supervisorCpuMicros = (processCpuMicros() - ownCpu0) / n;
    return r;
  }
  int failed() const { return failed_; }

 private:
  uv_loop_t loop_;
  NoServices none_;
  std::unique_ptr<supervisor::WorkerPool> pool_;
  std::string msg_;
  supervisor::WorkerPool::FunctionId transform_ = 0, noop_ = 0;
  pid_t worker_ = 0;
  int failed_ = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// The rounds of one way of calling: rates as medians, CPU per call as the
// mean over all rounds (a short round's CPU is too coarse on its own where
// the kernel gives only /proc's clock ticks).
struct Series {
  std::vector<double> rate, ratio;
  double cpu = 0, supervisorCpu = 0;
  void add(const Round& r, double baseline) {
    rate.push_back(r.perSecond);
    ratio.push_back(r.perSecond / baseline);
    cpu += r.cpuMicros;
    supervisorCpu += r.supervisorCpuMicros;
  }
  void average(int rounds) { cpu /= rounds, supervisorCpu /= rounds; }
  double both() const { return cpu + supervisorCpu; }
};

double perCore(double cpuMicros) { return cpuMicros > 0 ? 1e6 / cpuMicros : 0.0; }
double over(double a, double b) { return b > 0 ? a / b : 0.0; }

void rowRate(const char* what, double in, double w, double ratio) {
  std::printf("%-40s %14.0f %14.0f %7.2fx\n", what, in, w, ratio);
}
void rowMicros(const char* what, double in, double w, bool withRatio) {
  if (in < 0)
    std::printf("%-40s %14s %13.1fus\n", what, "-", w);
  else if (withRatio)
    std::printf("%-40s %13.1fus %13.1fus %7.2fx\n", what, in, w, over(w, in));
  else
    std::printf("%-40s %13.1fus %13.1fus\n", what, in, w);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_transform DUCTUS_BINARY SCRATCH_DIR [CALLS] [ROUNDS]\n");
    return 2;
  }
  int n = argc > 3 ? std::atoi(argv[3]) : 50000;
  int rounds = argc > 4 ? std::max(1, std::atoi(argv[4])) : 7;
  std::string project = argv[2];
  std::string dir = project + "/interfaces/bench";
  std::string cmd = "mkdir -p '" + dir + "'";
  if (std::system(cmd.c_str()) != 0) return 2;
  if (FILE* f = std::fopen((dir + "/transform.js").c_str(), "w")) {
    std::fputs(kTransform, f);
    std::fclose(f);
  }
  std::string msg = oru();
  // The worker first: the in-process half starts V8 in this process, and
  // uv_spawn would fork it.
  ThroughWorker w;
  if (!w.start(argv[1], project, msg)) return 1;
  InProcess p;
  if (!p.start(argv[0], msg)) return 1;
  // The three take turns, round by round, in-process in the middle: this
  // machine's speed drifts (other tenants), and a ratio of neighbouring
  // stretches cancels most of the drift that long runs one after the other
  // would each see differently.
  int perRound = std::max(1000, n / rounds);
  Series in, one, piped;
  for (int r = 0; r < rounds; ++r) {
    Round wr1 = w.round(perRound, 1);
    Round pr = p.round(perRound);
    Round wrp = w.round(perRound, kPipelined);
    in.add(pr, pr.perSecond);
    one.add(wr1, pr.perSecond);
    piped.add(wrp, pr.perSecond);
  }
  in.average(rounds), one.average(rounds), piped.average(rounds);
  int noops = std::max(1000, n / 20);
  Round wNoop = w.round(noops, 1, true), pNoop = p.noop(noops);
  p.stop();
  if (w.failed()) std::fprintf(stderr, "%d calls through the worker failed\n", w.failed());

  double pr = median(in.rate);
  double oneRate = median(one.rate), oneRatio = median(one.ratio);
  double pipedRate = median(piped.rate), pipedRatio = median(piped.ratio);
  std::printf("ORU^R01 of %zu bytes, 1 worker, %d rounds; each round runs %d calls one at a "
              "time\nthrough the worker, %d in-process, %d pipelined through the worker, in "
              "turn.\nRates: medians of the rounds; CPU: per call, mean of the rounds, the "
              "worker's\nprocess and the supervisor's (this process) counted apart.\n\n",
              msg.size(), rounds, perRound, perRound, perRound);

  std::printf("ONE CALL AT A TIME: one in-process thread vs one worker, each call sent when\n"
              "the previous one answered (like with like: nothing overlaps)\n");
  std::printf("%-40s %14s %14s %8s\n", "", "in-process", "worker (IPC)", "ratio");
  rowRate("ORU transforms/s, wall clock", pr, oneRate, oneRatio);
  rowMicros("CPU per ORU, script side (worker)", in.cpu, one.cpu, true);
  rowMicros("CPU per ORU, supervisor side", -1, one.supervisorCpu, false);
  rowMicros("CPU per ORU, both sides", in.cpu, one.both(), true);
  rowRate("ORU/s per busy core (1e6 / both)", perCore(in.cpu), perCore(one.both()),
          over(perCore(one.both()), perCore(in.cpu)));
  rowMicros("no-op call round trip, wall clock", 1e6 / pNoop.perSecond, 1e6 / wNoop.perSecond,
            true);
  rowMicros("no-op call, CPU both sides", pNoop.cpuMicros, wNoop.bothCpuMicros(), true);

  std::printf("\nPIPELINED: up to %d calls waiting, as a delivery loop uses a worker (the\n"
              "worker and the supervisor's side run at once, on two cores; in-process is\n"
              "still one thread on one)\n",
              kPipelined);
  std::printf("%-40s %14s %14s %8s\n", "", "in-process", "worker (IPC)", "ratio");
  rowRate("ORU transforms/s, wall clock", pr, pipedRate, pipedRatio);
  rowMicros("CPU per ORU, script side (worker)", in.cpu, piped.cpu, true);
  rowMicros("CPU per ORU, supervisor side", -1, piped.supervisorCpu, false);
  rowMicros("CPU per ORU, both sides", in.cpu, piped.both(), true);
  rowRate("ORU/s per busy core (1e6 / both)", perCore(in.cpu), perCore(piped.both()),
          over(perCore(piped.both()), perCore(in.cpu)));

  std::printf("\nworker / in-process, each round's wall-clock rates:\n%-40s", "  one call at a time");
  for (double x : one.ratio) std::printf(" %.2f", x);
  std::printf("\n%-40s", "  pipelined");
  for (double x : piped.ratio) std::printf(" %.2f", x);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  double load[1] = {0};
  getloadavg(load, 1);
  std::printf(
      "\n\nIPC overhead, one call at a time: %.1f%% on wall-clock throughput (median of the "
      "rounds' ratios),\n%.1f%% on CPU per transform, the worker's and the supervisor's together "
      "(target < 20%%)\npipelined: %.0f ORU/s wall clock through one worker (%.2fx one "
      "in-process thread), %.0f ORU/s\nper busy core counting both sides, %.1f%% more CPU per "
      "transform than in-process (target >= 15000/s)\nmachine: %ld cores, load average %.1f "
      "while measuring\n",
      (1.0 - oneRatio) * 100.0, (over(one.both(), in.cpu) - 1.0) * 100.0, pipedRate, pipedRatio,
      perCore(piped.both()), (over(piped.both(), in.cpu) - 1.0) * 100.0, cores, load[0]);
  return 0;
}
