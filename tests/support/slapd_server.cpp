#include "tests/support/slapd_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "tests/support/ports.h"
#include "tests/support/test_env.h"

namespace ductus::test {
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

constexpr const char* kRootDn = "cn=admin,dc=hospital,dc=test";
constexpr const char* kRootPassword = "root-Secret-1";

Status written(const fs::path& file, const std::string& text) {
  std::ofstream out(file);
  out << text;
  return out ? Status{} : Status{Error{"writing " + file.string()}};
}

}  // namespace

std::string SlapdServer::personDn(const std::string& uid) {
  return "uid=" + uid + ",ou=people," + kBase;
}

std::string SlapdServer::person(const std::string& uid, const std::string& password) {
  return "dn: " + personDn(uid) + "\nobjectClass: inetOrgPerson\nuid: " + uid + "\ncn: " + uid +
         "\nsn: " + uid + "\nuserPassword: " + password + "\n\n";
}

std::string SlapdServer::group(const std::string& cn, const std::vector<std::string>& uids) {
  // groupOfNames needs a member: the service account stands in for none.
  std::string g =
      "dn: cn=" + cn + ",ou=groups," + kBase + "\nobjectClass: groupOfNames\ncn: " + cn + "\n";
  if (uids.empty()) g += std::string("member: ") + kServiceDn + "\n";
  for (const auto& u : uids) g += "member: " + personDn(u) + "\n";
  return g + "\n";
}

SlapdServer::~SlapdServer() {
  stop();
  if (!root_.empty()) {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
}

Status SlapdServer::start(const std::string& ldif, const TestCa* ca) {
  if (root_.empty()) {
    char tmpl[] = "/tmp/ductus-slapd.XXXXXX";
    if (!mkdtemp(tmpl)) return Error::fromErrno("mkdtemp");
    root_ = tmpl;
    fs::create_directories(root_ / "db");
    port_ = freePort();
    tls_ = ca != nullptr;
    std::string conf =
        "include /etc/ldap/schema/core.schema\n"
        "include /etc/ldap/schema/cosine.schema\n"
        "include /etc/ldap/schema/inetorgperson.schema\n"
        "include /etc/ldap/schema/nis.schema\n"
        "modulepath /usr/lib/ldap\n"
        "moduleload back_mdb\n"
        "pidfile " +
        (root_ / "slapd.pid").string() + "\n";
    if (ca) {
      tlsPort_ = freePort();
      auto leaf = ca->issue("slapd", "/CN=localhost", {"localhost"}, {"127.0.0.1"}, 30, false);
      conf += "TLSCACertificateFile " + ca->cert().string() + "\n" + "TLSCertificateFile " +
              leaf.cert.string() + "\n" + "TLSCertificateKeyFile " + leaf.key.string() + "\n";
    }
    conf += std::string("database mdb\nmaxsize 10485760\nsuffix \"") + kBase + "\"\n" +
            "rootdn \"" + kRootDn + "\"\nrootpw " + kRootPassword + "\n" + "directory " +
            (root_ / "db").string() + "\n" +
            "access to attrs=userPassword by anonymous auth by * none\n"
            "access to * by users read by * none\n";
    if (auto st = written(root_ / "slapd.conf", conf); !st) return st;
    std::string base = std::string("dn: ") + kBase +
                       "\nobjectClass: dcObject\nobjectClass: organization\no: hospital\n"
                       "dc: hospital\n\n"
                       "dn: ou=people," +
                       kBase +
                       "\nobjectClass: organizationalUnit\nou: people\n\n"
                       "dn: ou=groups," +
                       kBase +
                       "\nobjectClass: organizationalUnit\nou: groups\n\n"
                       "dn: ou=svc," +
                       kBase +
                       "\nobjectClass: organizationalUnit\nou: svc\n\n"
                       "dn: " +
                       kServiceDn +
                       "\nobjectClass: organizationalRole\nobjectClass: simpleSecurityObject\n"
                       "cn: ductus\nuserPassword: " +
                       kServicePassword + "\n\n";
    if (auto st = written(root_ / "data.ldif", base + ldif); !st) return st;
    auto added = runSplit({"/usr/sbin/slapadd", "-q", "-f", (root_ / "slapd.conf").string(), "-l",
                           (root_ / "data.ldif").string()});
    if (added.code != 0) return Error{"slapadd: " + added.err + added.out};
  }
  std::string urls = url() + "/";
  if (tls_) urls += " ldaps://127.0.0.1:" + std::to_string(tlsPort_) + "/";
  pid_ = fork();
  if (pid_ < 0) return Error::fromErrno("fork");
  if (pid_ == 0) {
    int devnull = ::open("/dev/null", O_RDWR);
    dup2(devnull, 0);
    int log = ::open((root_ / "slapd.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    dup2(log, 1);
    dup2(log, 2);
    // -d: in the foreground, logging connections and binds to stderr.
    execl("/usr/sbin/slapd", "/usr/sbin/slapd", "-d", "256", "-f", (root_ / "slapd.conf").c_str(),
          "-h", urls.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  for (auto until = std::chrono::steady_clock::now() + 10s;
       std::chrono::steady_clock::now() < until;) {
    if (accepts(port_) && (!tls_ || accepts(tlsPort_))) return {};
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return Error{"slapd exited at start: " + log()};
    }
    std::this_thread::sleep_for(20ms);
  }
  return Error{"slapd did not accept on " + url() + " in 10 s: " + log()};
}

void SlapdServer::stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  for (int i = 0; i < 100 && accepts(port_); ++i) std::this_thread::sleep_for(10ms);
}

Status SlapdServer::restart() {
  stop();
  return start("");
}

Status SlapdServer::modify(const std::string& ldif) const {
  fs::path file = root_ / "change.ldif";
  if (auto st = written(file, ldif); !st) return st;
  auto r = runSplit(
      {"ldapmodify", "-x", "-H", url(), "-D", kRootDn, "-w", kRootPassword, "-f", file.string()});
  if (r.code != 0) return Error{"ldapmodify: " + r.err + r.out};
  return {};
}

std::string SlapdServer::log() const { return root_.empty() ? "" : fileText(root_ / "slapd.log"); }

}  // namespace ductus::test
