// TLS as a project writes it: the certificates: entries of resources.yaml,
// a listener's tls:, an outbound connection's tls: and an allow: list. Plain
// data, read by common/config (which checks names and kinds) and used by
// common/tls (which loads and serves them) and common/net (which admits).
// Written once here so the loader and the engine cannot disagree on a
// field. Never logged whole: PEM text may be a secret.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace ductus::tls {

// One certificates: entry. Either a pair (a certificate chain and its key:
// cert_file/key_file, or cert/key PEM text, usually ${secret:...}) or a CA
// alone (ca_file or ca). A pair may name a CA too (its clients' CA when a
// listener names the pair as clients.ca).
struct CertificateSource {
  std::string name{};
  std::filesystem::path certFile{};  // resolved against the project folder
  std::filesystem::path keyFile{};
  std::filesystem::path caFile{};
  std::string certPem{};  // PEM text as given (after substitution)
  std::string keyPem{};
  std::string caPem{};
  // Where the entry is written ("resources.yaml:12"), for messages.
  std::string at{};

  bool isPair() const {
    return !certFile.empty() || !certPem.empty() || !keyFile.empty() || !keyPem.empty();
  }
  bool hasCa() const { return !caFile.empty() || !caPem.empty(); }
  // Whether the entry comes from files, so a renewal can be noticed.
  bool fromFiles() const { return !certFile.empty() || !keyFile.empty() || !caFile.empty(); }
};

// A listener's tls: { certificate: server, clients: { ca: analyzers,
// subjects: ["CN=lab-analyzer"] } }. Without clients no client certificate
// is asked for; with clients one is required, verified against the CA
// named, and (when subjects is not empty) its subject or one of its DNS
// names must match one of them.
struct ListenerTls {
  std::string certificate;  // a pair entry
  std::string clientCa;     // an entry with a CA; empty: no client certificates
  // "CN=lab-analyzer", "O=Hospital,OU=Lab", "lab-gw.hospital.org",
  // "*.lab.hospital.org": every attribute given must be in the subject
  // (DN attributes: CN, O, OU, C, L, ST, DC); a pattern without '=' matches
  // a DNS name (a leading "*." one label).
  std::vector<std::string> subjects;
  std::string at;  // "interfaces/lab/interface.yaml:7", for messages
};

// An outbound connection's tls: true | { ca, certificate } (MLLP
// destinations), or ca:/certificate: beside a URL (apis:, HTTP
// destinations), or a database's. Verified against the system's roots
// plus the CA named; the host name is checked against the server's
// certificate; the pair named is presented as the client certificate.
struct ConnectTls {
  bool enabled = false;
  std::string ca{};           // an entry with a CA; empty: the system's roots alone
  std::string certificate{};  // a pair entry; empty: no client certificate
  std::string at{};

  bool operator==(const ConnectTls& o) const {
    return enabled == o.enabled && ca == o.ca && certificate == o.certificate;
  }
};

// allow: [10.1.2.3, 10.20.0.0/16, lab-gw.hospital.org, "2001:db8::/32"]:
// who may connect to a listener. Empty: everyone. Addresses and networks
// are kept as written; names are resolved by the engine (common/net's
// Admission).
struct AllowList {
  std::vector<std::string> entries;
  std::string at;
  bool empty() const { return entries.empty(); }
};

}  // namespace ductus::tls
