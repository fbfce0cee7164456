// bench_transform: what the process boundary costs a transform. The same
// ORU^R01 transform (parse, change three fields, re-encode) runs
//   in-process: the worker's ScriptHost called directly, no IPC;
//   worker:     through WorkerPool to one real, confined worker, pipelined;
// and a no-op call's round trip both ways. Prints a table; the ratio is the
// point (scripts/bench-transform.sh).
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
    if (kind != worker::OutcomeKind::OUTPUT) {
      ++failures;
      lastError = std::string(data);
    }
    bytes += data.size();
  }
  void service(uint64_t, uint64_t, worker::ServiceKind, std::string_view, std::string_view,
               std::string_view, uint32_t) override {}
  void log(uint64_t, std::string_view, std::string_view) override {}
  uint64_t outcomes = 0, failures = 0, bytes = 0;
  std::string lastError;
};

double processCpuMicros() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

// utime + stime of another process, from /proc/<pid>/stat.
double childCpuMicros(pid_t pid) {
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

// One measured stretch of calls.
struct Round {
  double perSecond = 0;
  // CPU time per transform: what the figures would be on an idle core
  // (the machine running the bench is usually shared).
  double cpuMicros = 0;            // in-process: this process; worker: the worker
  double supervisorCpuMicros = 0;  // worker only: this (supervisor) process
};

// The worker's ScriptHost called directly: no IPC.
class InProcess {
 public:
  bool start(const char* argv0, const std::string& msg) {
    msg_ = msg;
    // BENCH_V8_FLAGS=--perf-basic-prof lets `perf report` name JIT frames.
    if (const char* flags = std::getenv("BENCH_V8_FLAGS")) v8::V8::SetFlagsFromString(flags);
    if (auto s = worker::initV8(argv0); !s) return false;
    auto iso = worker::Isolate::create(size_t{256} << 20);
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
    def.functions = {{1, "transform", "hl7v2", "hl7v2", "auto"}, {2, "noop", "hl7v2", "hl7v2", "auto"}};
    if (!host_->load(def)) return false;
    round(2000);  // warm up
    return true;
  }
  Round round(int n) {
    Round r;
    auto t0 = Clock::now();
    double cpu0 = processCpuMicros();
    for (int i = 0; i < n; ++i) host_->invoke(nextId_++, 1, msg_, {});
    r.perSecond = n / std::chrono::duration<double>(Clock::now() - t0).count();
    r.cpuMicros = (processCpuMicros() - cpu0) / n;
    return r;
  }
  double noopMicros(int n) {
    auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) host_->invoke(nextId_++, 2, msg_, {});
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / n;
  }
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
    round(2000);  // warm up
    return true;
  }
  Round round(int n) {
    Round r;
    int done = 0, sent = 0;
    double workerCpu0 = childCpuMicros(worker_), ownCpu0 = processCpuMicros();
    auto t0 = Clock::now();
    // As a delivery loop uses a worker: a bounded number of calls waiting
    // (twice the pool's window, so the worker never runs dry), each answer
    // sending the next. Queuing all n calls up front would time the copying
    // of n payloads into the backlog, which no engine does.
    std::function<void(supervisor::Outcome)> next = [&](supervisor::Outcome out) {
      ++done;
      if (out.kind != supervisor::Outcome::Kind::Output) ++failed_;
      if (sent < n) {
        ++sent;
        pool_->invoke(transform_, msg_, {}, next);
      }
    };
    while (sent < std::min(n, 512)) {
      ++sent;
      pool_->invoke(transform_, msg_, {}, next);
    }
    runUntil(&loop_, [&] { return done == n; });
    r.perSecond = n / std::chrono::duration<double>(Clock::now() - t0).count();
    r.cpuMicros = (childCpuMicros(worker_) - workerCpu0) / n;
    r.supervisorCpuMicros = (processCpuMicros() - ownCpu0) / n;
    return r;
  }
  // One call at a time.
  double noopMicros(int n) {
    auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) {
      bool done = false;
      pool_->invoke(noop_, msg_, {}, [&](supervisor::Outcome) { done = true; });
      runUntil(&loop_, [&] { return done; });
    }
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / n;
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
  // The two take turns, round by round: this machine's speed drifts (other
  // tenants), and a ratio of neighbouring rounds cancels most of the drift
  // that two long runs one after the other would each see differently.
  int perRound = std::max(1000, n / rounds);
  std::vector<double> wRate, pRate, ratio, wCpu, pCpu, supCpu;
  for (int r = 0; r < rounds; ++r) {
    Round wr = w.round(perRound);
    Round pr = p.round(perRound);
    wRate.push_back(wr.perSecond);
    pRate.push_back(pr.perSecond);
    ratio.push_back(wr.perSecond / pr.perSecond);
    wCpu.push_back(wr.cpuMicros);
    pCpu.push_back(pr.cpuMicros);
    supCpu.push_back(wr.supervisorCpuMicros);
  }
  double wNoop = w.noopMicros(std::max(1000, n / 20)), pNoop = p.noopMicros(std::max(1000, n / 20));
  p.stop();
  if (w.failed()) std::fprintf(stderr, "%d calls through the worker failed\n", w.failed());

  double wr = median(wRate), pr = median(pRate), rr = median(ratio);
  // CPU from /proc is counted in clock ticks: summed over all rounds.
  double wc = 0, pc = 0, sc = 0;
  for (int r = 0; r < rounds; ++r) wc += wCpu[r], pc += pCpu[r], sc += supCpu[r];
  wc /= rounds, pc /= rounds, sc /= rounds;
  std::printf("ORU^R01 of %zu bytes, %d rounds of %d calls each way, 1 worker (medians)\n\n",
              msg.size(), rounds, perRound);
  std::printf("%-34s %14s %14s %8s\n", "", "in-process", "worker (IPC)", "ratio");
  std::printf("%-34s %14.0f %14.0f %7.2fx\n", "ORU transforms/s (parse, 3 sets)", pr, wr, rr);
  std::printf("%-34s %13.1fus %13.1fus %7.2fx\n", "no-op call round trip", pNoop, wNoop,
              pNoop > 0 ? wNoop / pNoop : 0.0);
  std::printf("%-34s %13.1fus %13.1fus %7.2fx\n", "CPU per ORU transform (script side)", pc, wc,
              pc > 0 ? wc / pc : 0.0);
  std::printf("%-34s %14s %13.1fus\n", "CPU per ORU transform (supervisor)", "-", sc);
  std::printf("%-34s %14.0f %14.0f %7.2fx\n", "ORU/s per busy core (1e6 / CPU)",
              pc > 0 ? 1e6 / pc : 0.0, wc > 0 ? 1e6 / wc : 0.0, pc > 0 && wc > 0 ? pc / wc : 0.0);
  std::printf("%-34s", "worker / in-process, each round");
  for (double x : ratio) std::printf(" %.2f", x);
  double overhead = (1.0 - rr) * 100.0;
  double cpuOverhead = pc > 0 ? (wc / pc - 1.0) * 100.0 : 0.0;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  double load[1] = {0};
  getloadavg(load, 1);
  std::printf(
      "\n\nIPC overhead: %.1f%% on wall-clock throughput (median of the rounds' ratios), %.1f%% "
      "on the worker's CPU per transform (target < 20%%)\nworker: %.0f ORU/s wall clock, %.0f "
      "ORU/s per busy core (target >= 15000/s)\nmachine: %ld cores, load average %.1f while "
      "measuring\n",
      overhead, cpuOverhead, wr, wc > 0 ? 1e6 / wc : 0.0, cores, load[0]);
  return 0;
}
