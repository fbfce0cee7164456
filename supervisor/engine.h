// Engine: one running project. It owns the store, the workers, every
// interface's intake and sources, and one delivery loop per (slot,
// destination), all on one libuv loop.
//
// Start: migrate -> connect the store -> partitions -> register interfaces
// and destinations -> claim them (supervisor/ownership.h: refused when
// another live engine owns one) -> reconcile what is waiting -> workers load the code ->
// intakes and delivery loops -> listeners last, so nothing is acknowledged
// before the engine can deliver it; the REST API after them. Stop: close
// every gate and listener, wait for the stores in flight to be answered,
// stop the delivery loops (each flushes what it finished), stop the
// workers, close the store; the API answers (/health: 503) until the end.
#pragma once

#include <uv.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/config/model.h"
#include "common/histogram.h"
#include "common/net/listener_guard.h"
#include "common/result.h"
#include "common/uv_handle.h"
#include "schema/conninfo.h"
#include "schema/interface_stops.h"
#include "schema/store_types.h"

namespace ductus::store {
class Store;
class PgConnection;
}
namespace ductus::api {
class ApiServer;
class PasswordHasher;
class AuditLog;
class StoreAuthenticator;
struct AuthDeps;
class Directory;
class DirectoryRefresh;
class OidcClient;
class Authenticator;
class ApiHousekeeping;
struct EngineInstance;
class LocalAuthenticator;
class Router;
}  // namespace ductus::api
namespace ductus::intake {
class Intake;
class MllpListener;
class ScheduleSource;
class FileSource;
}  // namespace ductus::intake
namespace ductus::net {
class AllowNames;
class CurlMulti;
class HttpServer;
}  // namespace ductus::net
namespace ductus::senders {
class Sender;
}
namespace ductus::delivery {
class DeliveryLoop;
class ActivityCounters;
class ActivityReporter;
}  // namespace ductus::delivery

namespace ductus::supervisor {

namespace services {
class HttpFetch;
}
class WorkerPool;
class Systemd;
class ProjectServices;
class EngineViewAdapter;
class Monitor;
class EngineActions;
class RetentionJob;
class ControlSocket;
class Ownership;
class CertificateWatch;
class EventRecorder;

struct EngineOptions {
  std::string databaseUrl;
  std::string binary = "/proc/self/exe";  // the ductus binary, for workers
  size_t poolSize = 8;
  // Who calls the REST API; must outlive the engine. Null: nobody can sign
  // in, so everything but the anonymous operations answers 401.
  api::Authenticator* authenticator = nullptr;
  // systemd's sockets and notifications (supervisor/systemd.h); must
  // outlive the engine. Null: listeners bind, nothing is told.
  Systemd* systemd = nullptr;
  // The control socket for ductusctl (supervisor/control_socket.h); "": none.
  // Required: a failure to open it fails the start (--control given), else
  // it is logged and the engine runs without.
  std::string controlPath;
  bool controlRequired = false;
  // Another engine claimed one of this engine's interfaces while its
  // ownership lock was lost (supervisor/ownership.h): the engine must stop
  // and the run exit kExitOwnedElsewhere. Null: it is only logged.
  std::function<void(const Error&)> onOwnershipTaken;
  // A handover's new engine (supervisor/handover.h): start() prepares
  // (workers, intakes, listeners on the inherited sockets, the API) with
  // nothing claimed and delivery, files and schedules held, refused as a
  // start is when an engine other than `predecessor` owns an interface;
  // takeCharge() does the rest once the old engine has released.
  bool takeover = false;
  std::string predecessor;  // the old engine's id
  // `ductus run --standby`: start() prepares as a takeover does (workers,
  // code, delivery held, the API and control socket) but claims nothing,
  // refuses nobody and opens no source; standBy() then tries every
  // standbyPoll to claim every interface, and takes charge once no live
  // engine owns any (supervisor/ownership.h).
  bool standby = false;
  std::chrono::milliseconds standbyPoll{1000};
  // The old engine's API and control sockets by name (listeningSockets());
  // the descriptor, now the engine's, or -1. Null: none.
  std::function<int(const std::string& name)> inheritedSocket;
  // The control socket's `handover` request: answer with the new engine's
  // pid, or why not. Null: refused.
  std::function<void(std::function<void(Result<int64_t>)> answer)> handover;
  // resources.yaml's certificates:, loaded (and checked) before the
  // database. Null: start() loads them from the project itself.
  std::shared_ptr<tls::Certificates> certificates;
};

class Engine {
 public:
  Engine(uv_loop_t* loop, config::Project project, EngineOptions options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  void start(std::function<void(Status)> done);
  void stop(std::function<void()> done);
  // A takeover's second half (EngineOptions::takeover): claims, the lanes
  // guard, reconcile, the pauses read, then delivery, files and schedules
  // go.
  void takeCharge(std::function<void(Status)> done);
  // A standby's wait (EngineOptions::standby), after start(): `charged`
  // hears once it has claimed every interface, reconciled, and opened its
  // sources (an error: it could not, and should stop).
  void standBy(std::function<void(Status)> charged);
  // The old engine's stop in a handover: listeners close first (what is
  // in flight answered; the new engine accepts on the same sockets), then
  // as stop() but without STOPPING=1; `released` once the loops stopped
  // and the claims are released, `done` at the end.
  void handOver(std::function<void()> released, std::function<void()> done);
  // Every listening socket by name ("mllp-HOST-PORT", "http-...", "api-...",
  // "control"), still the engine's: what a handover passes on.
  std::vector<std::pair<std::string, int>> listeningSockets() const;
  std::string engineId() const;
  bool stopping() const { return stopping_; }

  // "mllp adt-feed 127.0.0.1:2575" for each open listener.
  const std::vector<std::string>& listeners() const { return listenerLines_; }
  // "127.0.0.1:7700" once started; "" when ductus.yaml says api: { listen: off }.
  std::string apiAddress() const;

 private:
  struct Iface;
  // Every listener's guard (guards_), from the project and the loaded
  // certificates; errors name the listener.
  Status buildGuards();
  // Runs next once allow:'s host names have first answered (at once when
  // they have, or there are none).
  void whenNamesResolved(std::function<void()> next);
  // Runs next with the workers' verdict on every interface's code, once
  // they have given it (started beside the database's steps).
  void whenWorkersLoaded(std::function<void(Status)> next);
  // Runs next with startRetention's outcome, once known and the stopped
  // intakes are read too (both started beside the claims and reconcile).
  void whenTiersApplied(std::function<void(Status)> next);
  void tryStandbyCharge();
  void migrate(std::function<void(Status)> next);
  // Ids for every queued interface and destination.
  void registerAll(std::function<void(Status)> next);
  // A shorter tier confirmed through the API (its row is written): the
  // interface's intake stores into it from now on.
  Status retentionConfirmed(const std::string& interface, const std::string& tier);
  void switchTier(Iface& f, store::Tier tier, const char* why);
  void reconcile(std::function<void(Status)> next);
  // Starts the workers; `next` hears once every interface's code loaded,
  // or every load error.
  void startWorkers(std::function<void(Status)> next);
  Status buildDelivery();
  Status openSources();
  Status openSource(Iface& f);
  std::unique_ptr<intake::MllpListener> makeMllp(Iface& f) const;
  // A drain (EngineActions) closes the MLLP listeners: each connection is
  // answered and closed, and new ones are refused, so senders fail over to
  // another engine instead of hearing AE. Its end listens again on the same
  // addresses (retried every 5 s while that fails).
  void closeMllpForDrain();
  // Listens again on every closed MLLP listener's address but those of
  // interfaces whose intake an operator stopped.
  void reopenMllp();
  // Closes mllp_[i] (what is in flight is answered first) and forgets its
  // socket; `why` is for the log.
  void closeMllp(size_t i, const char* why);
  // The intake stops (schema/interface_stops.h): read beside retention's
  // tiers at start (whenTiersApplied waits for both), applied (applyStops)
  // just before the sources open, so a stopped interface's listener never
  // opens; a standby reads them again when it takes charge.
  void readStops(std::function<void(Status)> next);
  void applyStops();
  // An operator's stop of one interface's intake (EngineActions) and its
  // end: the MLLP listener closes or listens again, the HTTP path answers
  // 503 or stores again, a file or schedule source pauses or resumes.
  void closeIntake(Iface& f);
  void openIntake(Iface& f);
  Status openApi();
  Status openControl();
  void wake(Iface& f, int32_t lane);
  void maintainPartitions();
  // Ownership (supervisor/ownership.h): the lock and the claims before
  // reconcile; the check, and delivery, files and schedules held while the
  // lock is lost, from the end of the start.
  void claimInterfaces(std::function<void(Status)> next);
  void watchOwnership();
  void holdForOwnership(bool hold);
  // After the start (or the takeover): retention, the ownership check,
  // engine.start in the audit log.
  void startRunning();
  // A stop's phases, in order. runStopPhase() runs the current one and,
  // once all its work has answered, the next: one function drives the
  // whole stop, plain (stop()) or a handover's (handOver()).
  enum class StopPhase {
    // A handover only: the listeners close first. Each connection is
    // answered and closed, its sender reconnects to the same socket, which
    // the new engine serves, and none hears a closed gate's AE or 503.
    CloseListeners,
    // No new messages: every gate closes (and, in a plain stop, every
    // listener, and those a drain closed); the stores in flight are
    // answered first.
    CloseGates,
    // The delivery loops finish the message in hand and flush; then each
    // interface's settler settles what they finished (5 s at most).
    StopLoops,
    // A handover only: the claims go as soon as the loops stopped and
    // settled (the new engine waits for them); then `released`.
    ReleaseClaims,
    StopWorkers,
    CloseSenders,  // their connections
    RecordStop,    // engine.stop in the audit log, 3 s at most
    // The API closes last: /health says 503 all through the stop.
    CloseApi,
    // A plain stop only: the claims go last, once nothing of this engine
    // touches the queues.
    ReleaseOwnership,
    Done,  // `done`
  };
  struct StopState {
    StopPhase phase = StopPhase::CloseListeners;
    bool handover = false;
    std::function<void()> released, done;
  };
  void beginStop(bool handover, std::function<void()> released, std::function<void()> done);
  void runStopPhase();
  // Who this run is in the audit log (host, project folder, version, pid).
  api::EngineInstance instance() const;
  // Writes engine.stop, then `then` (after 3 s without an answer, anyway).
  void recordStop(std::function<void()> then);
  // Settles each interface's retention tier (a shorter one waits for a
  // confirmation) and creates the retention job (supervisor/retention_job.h).
  void startRetention(std::function<void(Status)> next);

  uv_loop_t* loop_;
  config::Project project_;
  EngineOptions options_;
  // The database CA's file for libpq, when written (outlives every
  // connection below).
  store::DatabaseTls databaseTls_;
  // The engine's events (supervisor/monitor/event_recorder.h): made first
  // and gone last, since every part below may record one.
  std::unique_ptr<EventRecorder> events_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<ProjectServices> services_;
  std::unique_ptr<WorkerPool> workers_;
  std::unique_ptr<net::CurlMulti> curl_;
  // What happened to messages, per interface and destination (the delivery
  // loops and intakes count into it; gone after them).
  std::unique_ptr<delivery::ActivityCounters> activity_;
  std::vector<std::unique_ptr<Iface>> ifaces_;
  std::map<std::string, Iface*> byName_;
  // Null while a drain has closed it; mllpAt_ says where each listens.
  std::vector<std::unique_ptr<intake::MllpListener>> mllp_;
  std::vector<std::pair<Iface*, config::HostPort>> mllpAt_;  // parallel to mllp_
  // Closed by a drain, until their connections have been answered.
  std::vector<std::unique_ptr<intake::MllpListener>> mllpClosing_;
  UvHandle<uv_timer_t> mllpRetry_;  // listening again after a drain failed
  std::map<std::string, std::unique_ptr<net::HttpServer>> http_;  // by host:port
  // Each listener's allow: and tls: with its counts, by its name (an MLLP
  // interface's, an HTTP port's host:port, "api"): built once, so a drain's
  // reopened listener keeps counting where it was.
  std::map<std::string, net::ListenerGuard> guards_;
  std::shared_ptr<tls::Certificates> certificates_;
  std::shared_ptr<net::AllowNames> allowNames_;  // allow:'s host names, for every list
  bool namesResolved_ = false;
  std::function<void()> afterNames_;
  std::unique_ptr<store::PgConnection> migrationConn_;  // until the store takes it
  bool claimsAsked_ = false;
  // standBy(): the try timer, a try in flight, the last error said, and
  // who hears once charged.
  UvHandle<uv_timer_t> standbyTimer_;
  bool standbyTrying_ = false;
  std::string standbyLastError_;
  std::function<void(Status)> standbyCharged_;  // reconcile() claims first, once
  std::optional<Status> tiersApplied_;          // startRetention's outcome, once known
  std::function<void(Status)> afterTiers_;
  std::optional<Status> workersLoaded_;
  std::function<void(Status)> afterWorkers_;
  std::unique_ptr<CertificateWatch> certificateWatch_;
  std::vector<store::InterfaceStop> stops_;  // as read, until applied
  std::optional<Status> stopsRead_;          // readStops' outcome at start, once known
  // Files and schedules held while the ownership lock is lost (or before
  // a takeover has taken charge): a started intake resumes them only after.
  bool sourcesHeld_ = false;
  std::vector<std::unique_ptr<intake::ScheduleSource>> schedules_;
  std::vector<std::unique_ptr<intake::FileSource>> files_;
  std::vector<std::string> listenerLines_;
  std::map<std::string, int> socketFds_;  // listeners' sockets by name, for a handover
  UvHandle<uv_timer_t> partitionTimer_;
  // sweepWaiting()'s round: the longest a delivery whose wake was lost waits.
  static constexpr std::chrono::milliseconds kSweepEvery{30'000};
  UvHandle<uv_timer_t> sweepTimer_;
  // Also settles what an interface left pending with every delivery done.
  void sweepWaiting();
  void settleLeftPending(Iface& f);
  std::unique_ptr<RetentionJob> retention_;  // drops and dedupe purges: 5 s after start, hourly
  std::unique_ptr<delivery::ActivityReporter> activityReporter_;  // a summary a minute
  std::chrono::system_clock::time_point startedAt_;
  // Start-up's steps, each said at debug with its time ("start-up: ..."):
  // what scripts/bench-startup.sh prints under its table.
  std::chrono::steady_clock::time_point stepStart_;
  void stepDone(const char* what);
  // The API's auth, declared before api_ so the server goes first.
  std::unique_ptr<api::PasswordHasher> hasher_;
  std::unique_ptr<api::AuditLog> audit_;
  // auth: { ldap: }: directory sign-in and the round that ends the access
  // of those who left (api/auth/directory*.h); null without it.
  std::unique_ptr<api::Directory> directory_;
  std::unique_ptr<api::DirectoryRefresh> directoryRefresh_;
  // auth: { oidc: }: the console's single sign-on and its requests to the
  // provider (api/auth/oidc.h); null without it.
  std::unique_ptr<services::HttpFetch> oidcFetch_;
  std::unique_ptr<api::OidcClient> oidc_;
  std::unique_ptr<api::StoreAuthenticator> storeAuthenticator_;
  std::unique_ptr<api::AuthDeps> authDeps_;
  // Pause / resume, restart, drain (supervisor/engine_actions.h); holds
  // the loops, so it goes before them and after the view.
  std::unique_ptr<EngineActions> actions_;
  std::unique_ptr<EngineViewAdapter> view_;
  // Health, last activity, alerts: built with delivery, started when the
  // engine runs (supervisor/monitor/monitor.h).
  std::unique_ptr<Monitor> monitor_;
  std::unique_ptr<api::ApiServer> api_;
  // ductusctl's way to the API's operations (control_socket.h), declared
  // after what its routes use.
  std::unique_ptr<api::LocalAuthenticator> localAuthenticator_;
  std::unique_ptr<api::Router> controlRouter_;
  Histogram apiRequestTimes_;  // the API's answers, for GET /metrics
  // Audit rows past audit.keep and ended sessions deleted, hourly.
  std::unique_ptr<api::ApiHousekeeping> housekeeping_;
  UvHandle<uv_timer_t> stopRecordTimer_;
  std::function<void()> afterStopRecord_;
  std::unique_ptr<ControlSocket> control_;
  std::unique_ptr<Ownership> ownership_;
  bool stopping_ = false;
  StopState stop_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ductus::supervisor
