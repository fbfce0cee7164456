#include "api/auth/directory.h"

#include <ldap.h>
#include <openssl/crypto.h>

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "common/detached_threads.h"
#include "common/loop_mailbox.h"

namespace ductus::api {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

timeval toTimeval(std::chrono::milliseconds d) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(d.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((d.count() % 1000) * 1000);
  return tv;
}

// Where a server that can't be asked and one that answered "no" part.
bool unreachable(int rc) {
  return rc == LDAP_SERVER_DOWN || rc == LDAP_TIMEOUT || rc == LDAP_CONNECT_ERROR ||
         rc == LDAP_UNAVAILABLE || rc == LDAP_BUSY || rc == LDAP_TIMELIMIT_EXCEEDED;
}

struct Search {
  std::string dn;
  std::vector<std::string> cn;
};

// One connection to the server, on a directory thread; unbound when it goes.
class Connection {
 public:
  ~Connection() {
    if (ld_) ldap_unbind_ext_s(ld_, nullptr, nullptr);
  }

  static Result<std::unique_ptr<Connection>> open(const ldap::DirectorySettings& s,
                                                  const std::filesystem::path& caFile) {
    auto c = std::unique_ptr<Connection>(new Connection(s));
    if (int rc = ldap_initialize(&c->ld_, s.url.c_str()); rc != LDAP_SUCCESS)
      return Error{"the directory's url `" + s.url + "`: " + ldap_err2string(rc),
                   ErrorKind::Unavailable};
    int version = LDAP_VERSION3;
    ldap_set_option(c->ld_, LDAP_OPT_PROTOCOL_VERSION, &version);
    // Active Directory answers a search at a domain's root with referrals
    // to other servers; following them would bind anonymously elsewhere.
    ldap_set_option(c->ld_, LDAP_OPT_REFERRALS, LDAP_OPT_OFF);
    timeval tv = toTimeval(s.timeout);
    ldap_set_option(c->ld_, LDAP_OPT_NETWORK_TIMEOUT, &tv);
    ldap_set_option(c->ld_, LDAP_OPT_TIMEOUT, &tv);
    if (s.tls.enabled) {
      // The server's certificate must chain to the CA (or the system's
      // roots) and name the host of the url; a context of this connection's
      // own, so no other TLS setting of the process applies.
      int demand = LDAP_OPT_X_TLS_DEMAND;
      ldap_set_option(c->ld_, LDAP_OPT_X_TLS_REQUIRE_CERT, &demand);
      std::string ca = caFile.empty() ? "/etc/ssl/certs/ca-certificates.crt" : caFile.string();
      ldap_set_option(c->ld_, LDAP_OPT_X_TLS_CACERTFILE, ca.c_str());
      int newContext = 0;
      if (int rc = ldap_set_option(c->ld_, LDAP_OPT_X_TLS_NEWCTX, &newContext);
          rc != LDAP_OPT_SUCCESS)
        return Error{"the directory's TLS settings: " + std::string(ldap_err2string(rc)),
                     ErrorKind::Unavailable};
      if (s.startTls) {
        if (int rc = ldap_start_tls_s(c->ld_, nullptr, nullptr); rc != LDAP_SUCCESS)
          return c->failure("StartTLS with " + s.url, rc);
      }
    }
    return c;
  }

  // The service account's bind (an anonymous one without bind: dn).
  Status bindService() {
    if (s_.bindDn.empty()) return bind("", "", "an anonymous bind to " + s_.url, false);
    return bind(s_.bindDn, s_.bindPassword, "the service account's bind (auth.ldap.bind)", false);
  }

  // Binds as `dn`; a refused password is Denied when `person`.
  Status bind(const std::string& dn, const std::string& password, const std::string& what,
              bool person) {
    berval cred{};
    cred.bv_val = const_cast<char*>(password.data());
    cred.bv_len = password.size();
    int rc = ldap_sasl_bind_s(ld_, dn.c_str(), LDAP_SASL_SIMPLE, &cred, nullptr, nullptr, nullptr);
    if (rc == LDAP_SUCCESS) return {};
    if (person && rc == LDAP_INVALID_CREDENTIALS)
      return Error{"the directory refused the password", ErrorKind::Denied};
    return failure(what, rc);
  }

  // Entries under `base` matching `filter`, with the values of `cn` (when
  // asked); more than `limit` is an error of kind Exists.
  Result<std::vector<Search>> search(const std::string& base, const std::string& filter,
                                     bool withCn, int limit) {
    char cnAttr[] = "cn";
    char noAttrs[] = LDAP_NO_ATTRS;
    char* attrs[] = {withCn ? cnAttr : noAttrs, nullptr};
    timeval tv = toTimeval(s_.timeout);
    LDAPMessage* res = nullptr;
    int rc = ldap_search_ext_s(ld_, base.c_str(), LDAP_SCOPE_SUBTREE, filter.c_str(), attrs, 0,
                               nullptr, nullptr, &tv, limit, &res);
    std::unique_ptr<LDAPMessage, int (*)(LDAPMessage*)> held(res, ldap_msgfree);
    if (rc == LDAP_SIZELIMIT_EXCEEDED)
      return Error{
          "more than " + std::to_string(limit) + " entries match " + filter + " under " + base,
          ErrorKind::Exists};
    // A base that does not exist finds no one.
    if (rc == LDAP_NO_SUCH_OBJECT) return std::vector<Search>{};
    if (rc != LDAP_SUCCESS) return failure("a search under " + base, rc);
    std::vector<Search> out;
    for (LDAPMessage* e = ldap_first_entry(ld_, res); e; e = ldap_next_entry(ld_, e)) {
      Search found;
      if (char* dn = ldap_get_dn(ld_, e)) {
        found.dn = dn;
        ldap_memfree(dn);
      }
      if (withCn) {
        if (berval** values = ldap_get_values_len(ld_, e, "cn")) {
          for (int i = 0; values[i]; ++i)
            found.cn.emplace_back(values[i]->bv_val, values[i]->bv_len);
          ldap_value_free_len(values);
        }
      }
      out.push_back(std::move(found));
    }
    return out;
  }

  // The person's entry and groups (with the service bind); nullopt when
  // users.filter finds no one. More than one entry is an error (Denied).
  Result<std::optional<DirectoryEntry>> find(const std::string& name) {
    auto people = search(s_.usersBase, fillFilter(s_.usersFilter, name, ""), false, 2);
    if (!people && people.error().kind == ErrorKind::Exists)
      return Error{"users.filter finds more than one entry for `" + name + "`", ErrorKind::Denied};
    if (!people) return people.error();
    if (people->empty()) return std::optional<DirectoryEntry>{};
    DirectoryEntry entry;
    entry.dn = people->front().dn;
    // A bind with an empty DN is an anonymous one, which succeeds.
    if (entry.dn.empty())
      return Error{"users.filter found an entry without a DN", ErrorKind::Denied};
    auto groups = search(s_.groupsBase, fillFilter(s_.groupsFilter, name, entry.dn), true, 1000);
    if (!groups) return groups.error();
    std::vector<std::string> cns, dns;
    for (auto& g : *groups) {
      dns.push_back(g.dn);
      for (auto& cn : g.cn) cns.push_back(cn);
      entry.groups.push_back(g.cn.empty() ? g.dn : g.cn.front());
    }
    entry.role = roleOfGroups(s_.roles, cns, dns);
    return std::optional<DirectoryEntry>(std::move(entry));
  }

 private:
  explicit Connection(const ldap::DirectorySettings& s) : s_(s) {}

  Error failure(const std::string& what, int rc) {
    std::string text = what + ": " + ldap_err2string(rc);
    char* diag = nullptr;
    if (ldap_get_option(ld_, LDAP_OPT_DIAGNOSTIC_MESSAGE, &diag) == LDAP_OPT_SUCCESS && diag) {
      // GnuTLS's failures reach libldap without words of their own.
      if (*diag && std::string_view(diag) != "(unknown error code)")
        text += " (" + std::string(diag) + ")";
      ldap_memfree(diag);
    }
    bool down = unreachable(rc) || rc == LDAP_INVALID_CREDENTIALS;  // the service bind's
    if (unreachable(rc)) text += " (" + s_.url + ")";
    if (rc == LDAP_SERVER_DOWN || rc == LDAP_CONNECT_ERROR)
      if (s_.tls.enabled)
        text += "; with TLS: is the server's certificate signed by " +
                (s_.tls.ca.empty() ? std::string("a root the system trusts")
                                   : "auth.ldap.ca (" + s_.tls.ca + ")") +
                ", and for the url's host? (libldap checks \"localhost\" against the "
                "machine's own name)";
    return Error{text, down ? ErrorKind::Unavailable : ErrorKind::Conflict};
  }

  const ldap::DirectorySettings& s_;
  LDAP* ld_ = nullptr;
};

}  // namespace

std::string escapeFilterValue(std::string_view value) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(value.size());
  for (unsigned char c : value) {
    if (c == '*' || c == '(' || c == ')' || c == '\\' || c == '\0') {
      out += '\\';
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string fillFilter(std::string_view filter, std::string_view name, std::string_view dn) {
  std::string out;
  for (size_t i = 0; i < filter.size();) {
    if (filter.compare(i, 6, "{name}") == 0) {
      out += escapeFilterValue(name);
      i += 6;
    } else if (filter.compare(i, 4, "{dn}") == 0) {
      out += escapeFilterValue(dn);
      i += 4;
    } else {
      out += filter[i++];
    }
  }
  return out;
}

std::optional<Role> roleOfGroups(const std::map<std::string, std::string>& roles,
                                 const std::vector<std::string>& groupCns,
                                 const std::vector<std::string>& groupDns) {
  std::optional<Role> best;
  auto consider = [&](const std::string& group) {
    auto it = roles.find(lower(group));
    if (it == roles.end()) return;
    auto role = roleFromName(it->second);
    if (role && (!best || static_cast<int>(*role) > static_cast<int>(*best))) best = role;
  };
  for (auto& g : groupCns) consider(g);
  for (auto& g : groupDns) consider(g);
  return best;
}

struct Directory::Shared {
  struct Job {
    uint64_t id;
    std::function<std::shared_ptr<void>()> work;
  };

  Shared(uv_loop_t* loop, ldap::DirectorySettings s, std::filesystem::path ca)
      : settings(std::move(s)), caFile(std::move(ca)), mailbox(loop) {}

  const ldap::DirectorySettings settings;
  const std::filesystem::path caFile;

  std::mutex mutex;
  std::condition_variable wake;
  std::deque<Job> jobs;
  size_t threads = 0;
  size_t idle = 0;
  bool stopping = false;
  LoopMailbox mailbox;
  // By job id, touched on the loop only (SqlServerPool's reason: what a
  // callback holds is never freed on a directory thread).
  std::map<uint64_t, std::function<void(std::shared_ptr<void>)>> callbacks;
  uint64_t nextId = 0;

  void answer(uint64_t id, std::shared_ptr<void> r) {
    auto it = callbacks.find(id);
    if (it == callbacks.end()) return;
    auto done = std::move(it->second);
    callbacks.erase(it);
    done(std::move(r));
  }

  void runThread() {
    std::unique_lock lock(mutex);
    for (;;) {
      ++idle;
      bool got =
          wake.wait_for(lock, std::chrono::minutes(1), [&] { return stopping || !jobs.empty(); });
      --idle;
      if (stopping || !got) break;
      Job job = std::move(jobs.front());
      jobs.pop_front();
      lock.unlock();
      auto result = job.work();
      job.work = nullptr;  // what it holds (a password) goes here, not on the loop
      mailbox.post([this, id = job.id, result = std::move(result)]() mutable {
        answer(id, std::move(result));
      });
      lock.lock();
    }
    --threads;
  }
};

Directory::Directory(uv_loop_t* loop, ldap::DirectorySettings settings,
                     std::filesystem::path caFile)
    : shared_(std::make_shared<Shared>(loop, std::move(settings), std::move(caFile))) {}

Directory::~Directory() {
  {
    std::lock_guard lock(shared_->mutex);
    shared_->stopping = true;
    shared_->jobs.clear();
  }
  shared_->wake.notify_all();
  shared_->mailbox.close();
  shared_->callbacks.clear();
}

const ldap::DirectorySettings& Directory::settings() const { return shared_->settings; }

void Directory::submit(std::function<std::shared_ptr<void>()> work,
                       std::function<void(std::shared_ptr<void>)> done,
                       std::function<void(Error)> refused) {
  std::unique_lock lock(shared_->mutex);
  if (shared_->jobs.size() >= kMaxWaiting) {
    lock.unlock();
    return refused(Error{
        "the directory has " + std::to_string(kMaxWaiting) + " requests waiting; try again shortly",
        ErrorKind::Busy});
  }
  uint64_t id = shared_->nextId++;
  shared_->callbacks.emplace(id, std::move(done));
  shared_->jobs.push_back({id, std::move(work)});
  if (shared_->idle < shared_->jobs.size() && shared_->threads < kThreads) {
    ++shared_->threads;
    std::thread([s = shared_] {
      DetachedThreads::Running running;
      s->runThread();
    }).detach();
  }
  lock.unlock();
  shared_->wake.notify_one();
}

void Directory::signIn(std::string name, std::string password,
                       std::function<void(Result<DirectoryEntry>)> done) {
  using R = Result<DirectoryEntry>;
  if (password.empty())
    return done(Error{"an empty password is refused before any bind", ErrorKind::Denied});
  auto work = [s = shared_, name = std::move(name),
               password = std::make_shared<std::string>(std::move(password))]() {
    auto run = [&]() -> R {
      auto conn = Connection::open(s->settings, s->caFile);
      if (!conn) return conn.error();
      if (auto b = (*conn)->bindService(); !b) return b.error();
      auto found = (*conn)->find(name);
      if (!found) return found.error();
      if (!*found) return Error{"no entry in the directory", ErrorKind::Denied};
      DirectoryEntry entry = std::move(**found);
      if (auto b = (*conn)->bind(entry.dn, *password, "the bind as " + entry.dn, true); !b)
        return b.error();
      return entry;
    };
    auto r = std::make_shared<R>(run());
    OPENSSL_cleanse(password->data(), password->size());
    return std::shared_ptr<void>(r);
  };
  auto answer = [done](std::shared_ptr<void> r) { done(std::move(*static_cast<R*>(r.get()))); };
  submit(std::move(work), std::move(answer), [done](Error e) { done(std::move(e)); });
}

void Directory::lookUp(std::vector<std::string> names,
                       std::function<void(Result<std::vector<DirectoryLookup>>)> done) {
  using R = Result<std::vector<DirectoryLookup>>;
  using Outcome = DirectoryLookup::Outcome;
  auto work = [s = shared_, names = std::move(names)]() {
    auto run = [&]() -> R {
      auto conn = Connection::open(s->settings, s->caFile);
      if (!conn) return conn.error();
      if (auto b = (*conn)->bindService(); !b) return b.error();
      std::vector<DirectoryLookup> out;
      for (const auto& name : names) {
        {
          std::lock_guard lock(s->mutex);
          if (s->stopping) return Error{"the engine is stopping", ErrorKind::Unavailable};
        }
        auto found = (*conn)->find(name);
        DirectoryLookup one;
        if (found && *found) {
          one.outcome = Outcome::Found;
          one.entry = std::move(**found);
        } else if (found || found.error().kind == ErrorKind::Denied) {
          // No entry, or two for one name: not one person any more.
          one.outcome = Outcome::Gone;
        } else if (found.error().kind == ErrorKind::Conflict ||
                   found.error().kind == ErrorKind::Exists) {
          one.error = found.error().message;
        } else {
          return found.error();
        }
        out.push_back(std::move(one));
      }
      return out;
    };
    return std::shared_ptr<void>(std::make_shared<R>(run()));
  };
  auto answer = [done](std::shared_ptr<void> r) { done(std::move(*static_cast<R*>(r.get()))); };
  submit(std::move(work), std::move(answer), [done](Error e) { done(std::move(e)); });
}

}  // namespace ductus::api
