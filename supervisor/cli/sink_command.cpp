#include "supervisor/cli/sink_command.h"

#include <signal.h>
#include <uv.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/command_line.h"
#include "common/config/duration.h"
#include "common/hl7/ack.h"
#include "common/hl7/message.h"
#include "common/log.h"
#include "common/net/http_server.h"
#include "common/result.h"
#include "common/text.h"
#include "common/tls/certificates.h"
#include "intake/mllp_listener.h"

namespace ductus::supervisor {
namespace {

namespace fs = std::filesystem;

struct SinkArgs {
  int mllpPort = -1;  // -1: not given
  int httpPort = -1;
  std::string bind = "127.0.0.1";
  std::string out;
  std::string ack = "AA";
  int status = 200;
  std::string maxSize = "64MB";
  bool ackGiven = false;
  bool statusGiven = false;
  // TLS, as an engine listener's tls: { certificate, clients: { ca, subjects } }.
  bool tls = false;
  std::string cert, key;
  std::string clientCa;
  std::vector<std::string> subjects;
};

// HL7 ends segments in CR, which a terminal prints over one line: each
// segment gets a line of its own. Other text is printed as it came.
std::string forTerminal(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() + 1);
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] == '\r') {
      out += '\n';
      if (i + 1 < bytes.size() && bytes[i + 1] == '\n') ++i;
    } else {
      out += bytes[i];
    }
  }
  if (!out.empty() && out.back() != '\n') out += '\n';
  return out;
}

// A saved body's extension, from its Content-Type (or its first bytes).
std::string extensionFor(std::string_view contentType, std::string_view body) {
  std::string type = asciiLower(contentType);
  if (type.find("hl7") != std::string::npos) return ".hl7";
  if (type.find("json") != std::string::npos) return ".json";
  if (type.find("xml") != std::string::npos) return ".xml";
  if (type.empty() && hl7::findMsh(body) == 0) return ".hl7";
  if (type.starts_with("text/")) return ".txt";
  return ".bin";
}

hl7::AckCode ackCode(const std::string& text) {
  if (text == "AE") return hl7::AckCode::Error;
  if (text == "AR") return hl7::AckCode::Reject;
  return hl7::AckCode::Accept;
}

class Sink {
 public:
  Sink(uv_loop_t* loop, const SinkArgs& args, size_t maxBytes, net::ListenerGuard guard)
      : loop_(loop),
        args_(args),
        maxBytes_(maxBytes),
        code_(ackCode(args.ack)),
        guard_(std::move(guard)) {}

  Status start() {
    if (!args_.out.empty())
      if (auto s = prepareFolder(); !s) return s;
    if (args_.mllpPort >= 0) {
      intake::MllpSettings settings;
      settings.name = "ductus sink";  // its errors and log lines start with it
      settings.maxMessageBytes = maxBytes_;
      settings.guard = guard_;
      mllp_ = std::make_unique<intake::MllpListener>(
          loop_, settings,
          [this](const intake::MllpPeer& peer, std::string bytes, intake::MllpAnswer answer) {
            onMessage(peer, bytes, answer);
          });
      if (auto s = mllp_->listen(args_.bind, static_cast<uint16_t>(args_.mllpPort)); !s) return s;
      std::printf("ductus sink: MLLP%s on %s, answering %s; Ctrl-C stops\n", overTls().c_str(),
                  mllp_->address().c_str(), args_.ack.c_str());
    } else {
      net::HttpSettings settings;
      settings.name = "ductus sink";  // its errors and log lines start with it
      settings.maxBodyBytes = maxBytes_;
      settings.guard = guard_;
      http_ = std::make_unique<net::HttpServer>(loop_, settings);
      auto routed =
          http_->addRoute("*", [this](const net::HttpRequest& req, net::HttpRespond respond) {
            onRequest(req, respond);
          });
      if (!routed) return routed;
      if (auto s = http_->listen(args_.bind, static_cast<uint16_t>(args_.httpPort)); !s) return s;
      std::printf("ductus sink: HTTP%s on %s, answering %d; Ctrl-C stops\n", overTls().c_str(),
                  http_->address().c_str(), args_.status);
    }
    std::fflush(stdout);
    return {};
  }

  // Stops listening; done runs once every connection has closed.
  void stop(std::function<void()> done) {
    std::fprintf(stderr, "ductus sink: stopping; %llu received\n",
                 static_cast<unsigned long long>(received_));
    if (mllp_)
      mllp_->close(std::move(done));
    else if (http_)
      http_->close(std::move(done));
    else
      done();
  }

 private:
  // " over TLS (client certificates of CA.pem required)", or "".
  std::string overTls() const {
    if (!guard_.tls) return "";
    if (args_.clientCa.empty()) return " over TLS";
    return " over TLS (client certificates from " + args_.clientCa + " required)";
  }

  // The folder exists, and numbering goes on after the files already in
  // it, so a second run does not write over the first one's.
  Status prepareFolder() {
    std::error_code ec;
    fs::create_directories(args_.out, ec);
    if (ec) return Error{"ductus sink: cannot make the folder " + args_.out + ": " + ec.message()};
    for (auto& e : fs::directory_iterator(args_.out, ec)) {
      std::string stem = e.path().stem().string();
      if (stem.empty() || stem.size() > 18 ||
          !std::all_of(stem.begin(), stem.end(), [](char c) { return c >= '0' && c <= '9'; }))
        continue;
      next_ = std::max<uint64_t>(next_, std::stoull(stem) + 1);
    }
    if (ec) return Error{"ductus sink: cannot read the folder " + args_.out + ": " + ec.message()};
    return {};
  }

  // Saves bytes as <n><ext> in --out; the path, or why not.
  Result<std::string> save(std::string_view bytes, const std::string& ext) {
    fs::path path = fs::path(args_.out) / (std::to_string(next_) + ext);
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    if (f) f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (f) f.close();
    if (!f) return Error::fromErrno("cannot write " + path.string());
    ++next_;
    return path.string();
  }

  void onMessage(const intake::MllpPeer& peer, const std::string& bytes,
                 const intake::MllpAnswer& answer) {
    ++received_;
    hl7::AckCode code = code_;
    std::string text = code == hl7::AckCode::Accept ? "" : "ductus sink answers " + args_.ack;
    std::string where;
    if (!args_.out.empty()) {
      if (auto saved = save(bytes, ".hl7")) {
        where = ", saved as " + *saved;
      } else {
        std::fprintf(stderr, "ductus sink: %s\n", saved.error().message.c_str());
        code = hl7::AckCode::Error;
        text = "ductus sink could not save the message";
      }
    }
    // The listener has checked there is an MSH to read.
    bool enhanced = false;
    if (auto view = hl7::MessageView::parse(std::string_view(bytes)))
      enhanced = hl7::wantsEnhancedAck(*view);
    // Printed before the answer goes: a sender that has its ACK finds the
    // message already on the sink's output.
    std::printf("#%llu from %s, %zu bytes%s, answered %s\n",
                static_cast<unsigned long long>(received_), peer.address.c_str(), bytes.size(),
                where.c_str(), std::string(hl7::ackCodeText(code, enhanced)).c_str());
    if (args_.out.empty()) std::printf("%s\n", forTerminal(bytes).c_str());
    std::fflush(stdout);
    answer(code, text);
  }

  void onRequest(const net::HttpRequest& req, const net::HttpRespond& respond) {
    ++received_;
    int status = args_.status;
    std::string type(req.header("content-type").value_or(""));
    std::string where;
    if (!args_.out.empty()) {
      if (auto saved = save(req.body, extensionFor(type, req.body))) {
        where = ", saved as " + *saved;
      } else {
        std::fprintf(stderr, "ductus sink: %s\n", saved.error().message.c_str());
        status = 500;
      }
    }
    std::string body = status == args_.status
                           ? "ductus sink: received #" + std::to_string(received_) + "\n"
                           : "ductus sink could not save the body\n";
    if (status == 204 || status == 304) body.clear();  // they may not carry one
    std::printf("#%llu %s %s from %s, %s%s%zu bytes%s, answered %d\n",
                static_cast<unsigned long long>(received_), req.method.c_str(), req.path.c_str(),
                req.peer.c_str(), type.c_str(), type.empty() ? "" : ", ", req.body.size(),
                where.c_str(), status);
    if (args_.out.empty() && !req.body.empty()) std::printf("%s\n", forTerminal(req.body).c_str());
    std::fflush(stdout);
    respond(net::HttpResponse{status, {{"Content-Type", "text/plain"}}, body});
  }

  uv_loop_t* loop_;
  SinkArgs args_;
  size_t maxBytes_;
  hl7::AckCode code_;
  net::ListenerGuard guard_;
  std::unique_ptr<intake::MllpListener> mllp_;
  std::unique_ptr<net::HttpServer> http_;
  uint64_t received_ = 0;
  uint64_t next_ = 1;  // the next saved file's number
};

// Signals only record; the loop acts.
struct Runner {
  uv_loop_t loop;
  uv_signal_t sigint, sigterm;
  Sink* sink = nullptr;
  bool stopping = false;
};

void onSignal(uv_signal_t* h, int) {
  auto* r = static_cast<Runner*>(h->data);
  if (r->stopping) {
    // A second Ctrl-C: a connection that will not close is not waited for.
    std::fflush(stdout);
    _exit(0);
  }
  r->stopping = true;
  r->sink->stop([r] {
    uv_close(reinterpret_cast<uv_handle_t*>(&r->sigint), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&r->sigterm), nullptr);
  });
}

int usage(const std::string& what) {
  std::fprintf(stderr, "ductus sink: %s (see `ductus sink --help`)\n", what.c_str());
  return kUsageError;
}

CLI::Validator portNumber() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        int n = std::atoi(text.c_str());
        return n >= 0 && n <= 65535 && text == std::to_string(n)
                   ? ""
                   : "expected a port from 0 to 65535, got `" + text + "`";
      },
      "");
}

// --cert/--key and --client-ca as the engine's certificates: entries
// (loaded and checked the same way) and the listener's tls: built from them
// by the engine's own code, so a sink refuses what an interface would, with
// the same log lines.
Result<net::ListenerGuard> tlsGuard(const SinkArgs& args) {
  std::vector<tls::CertificateSource> sources{
      {.name = "server", .certFile = args.cert, .keyFile = args.key, .at = "--cert, --key"}};
  tls::ListenerTls listener;
  listener.certificate = "server";
  listener.at = "the command line";
  if (!args.clientCa.empty()) {
    sources.push_back({.name = "clients", .caFile = args.clientCa, .at = "--client-ca"});
    listener.clientCa = "clients";
    listener.subjects = args.subjects;
  }
  auto certs = tls::Certificates::load(std::move(sources));
  if (!certs) return certs.error();
  auto server = (*certs)->server(listener);
  if (!server) return server.error();
  net::ListenerGuard guard;
  guard.tls = *server;
  return guard;
}

int runSink(const SinkArgs& args) {
  if ((args.mllpPort >= 0) == (args.httpPort >= 0))
    return usage("say what to receive: --mllp PORT or --http PORT (one of them)");
  if (args.mllpPort < 0 && args.ackGiven) return usage("--ack is for --mllp");
  if (args.httpPort < 0 && args.statusGiven) return usage("--status is for --http");
  auto maxBytes = config::parseSize(args.maxSize);
  if (!maxBytes || *maxBytes == 0)
    return usage("--max-size " + args.maxSize + " is not a size like 64MB or 512KB");
  if (args.tls && (args.cert.empty() || args.key.empty()))
    return usage("--tls needs the sink's certificate: --cert FILE --key FILE");
  if (!args.tls && (!args.cert.empty() || !args.key.empty() || !args.clientCa.empty()))
    return usage("--cert, --key and --client-ca are for --tls");
  if (!args.subjects.empty() && args.clientCa.empty())
    return usage("--subject is checked in client certificates: give --client-ca too");
  net::ListenerGuard guard;
  if (args.tls) {
    auto made = tlsGuard(args);
    if (!made) {
      std::fprintf(stderr, "ductus sink: %s\n", made.error().message.c_str());
      return kUsageError;
    }
    guard = std::move(*made);
  }

  // Warnings (a refused frame, a peer gone mid-message, a refused TLS
  // handshake) go to stderr; what was received goes to stdout. Over TLS the
  // listener's connection lines too, which name each one's TLS version.
  setupLogging(LogFormat::Text, args.tls ? spdlog::level::debug : spdlog::level::warn);
  signal(SIGPIPE, SIG_IGN);
  Runner r;
  uv_loop_init(&r.loop);
  int code = 0;
  {
    Sink sink(&r.loop, args, static_cast<size_t>(*maxBytes), guard);
    r.sink = &sink;
    uv_signal_init(&r.loop, &r.sigint);
    uv_signal_init(&r.loop, &r.sigterm);
    r.sigint.data = r.sigterm.data = &r;
    if (auto s = sink.start(); !s) {
      std::fprintf(stderr, "%s\n", s.error().message.c_str());
      code = 1;
      uv_close(reinterpret_cast<uv_handle_t*>(&r.sigint), nullptr);
      uv_close(reinterpret_cast<uv_handle_t*>(&r.sigterm), nullptr);
    } else {
      uv_signal_start(&r.sigint, onSignal, SIGINT);
      uv_signal_start(&r.sigterm, onSignal, SIGTERM);
    }
    uv_run(&r.loop, UV_RUN_DEFAULT);
  }
  // The listener's handles close after it goes.
  uv_run(&r.loop, UV_RUN_DEFAULT);
  uv_loop_close(&r.loop);
  std::fflush(stdout);
  return code;
}

}  // namespace

void addSinkCommand(CLI::App& ductus, int& exitCode) {
  auto args = std::make_shared<SinkArgs>();
  auto* cmd = ductus.add_subcommand(
      "sink", "receive MLLP or HTTP, answer, and print or save what comes (to try destinations)");
  cmd->add_option("--mllp", args->mllpPort, "receive HL7 over MLLP on this port")
      ->type_name("PORT")
      ->check(portNumber());
  cmd->add_option("--http", args->httpPort, "receive HTTP requests on this port")
      ->type_name("PORT")
      ->check(portNumber());
  cmd->add_option("--bind", args->bind, "the address to listen on")
      ->type_name("ADDR")
      ->capture_default_str();
  cmd->add_option("--out", args->out, "save each message as DIR/<n>.hl7 (or .json, ...)")
      ->type_name("DIR");
  auto* ack = cmd->add_option("--ack", args->ack, "with --mllp: the ACK code every message gets")
                  ->type_name("AA|AE|AR")
                  ->capture_default_str()
                  ->check(CLI::Validator(
                      [](std::string& text) -> std::string {
                        for (char& c : text)
                          c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
                        return text == "AA" || text == "AE" || text == "AR"
                                   ? ""
                                   : "expected AA, AE or AR, got `" + text + "`";
                      },
                      ""));
  auto* status =
      cmd->add_option("--status", args->status, "with --http: the status every request gets")
          ->type_name("N")
          ->capture_default_str()
          ->check(CLI::Validator(
              [](std::string& text) -> std::string {
                int n = std::atoi(text.c_str());
                return n >= 200 && n <= 599 && text == std::to_string(n)
                           ? ""
                           : "expected a status from 200 to 599, got `" + text + "`";
              },
              ""));
  cmd->add_option("--max-size", args->maxSize, "the largest message or body taken")
      ->type_name("SIZE")
      ->capture_default_str();
  cmd->add_flag("--tls", args->tls, "speak TLS 1.2 or 1.3 (needs --cert and --key)");
  cmd->add_option("--cert", args->cert, "with --tls: the sink's certificate (PEM, with its chain)")
      ->type_name("FILE");
  cmd->add_option("--key", args->key, "with --tls: the key of --cert (PEM, not encrypted)")
      ->type_name("FILE");
  cmd->add_option("--client-ca", args->clientCa,
                  "with --tls: require a client certificate from this CA (PEM)")
      ->type_name("FILE");
  cmd->add_option("--subject", args->subjects,
                  "with --client-ca: a client certificate's subject or DNS name must match one "
                  "(repeatable)")
      ->type_name("PATTERN");
  cmd->footer(
      "A receiver to point a destination at while building an interface. Over MLLP\n"
      "each message gets an ACK with the --ack code (CA/CE/CR when the message asks\n"
      "for enhanced mode in MSH-15) and MSA-2 = its MSH-10; over HTTP each request,\n"
      "on any path, gets the --status. Each is printed (HL7 one segment per line)\n"
      "after a line saying where it came from and what was answered, or saved as\n"
      "DIR/<n>.hl7 (.json, .xml, .txt, .bin by Content-Type) with --out, numbered on\n"
      "from the files already there. A frame without MSH or over --max-size is\n"
      "refused as the engine's listener refuses it (AR; 413 over HTTP). Port 0 picks\n"
      "a free port, printed on the first line. Runs until Ctrl-C or SIGTERM, then\n"
      "exits 0.\n"
      "\n"
      "With --tls the sink listens as an interface with tls: does, through the\n"
      "engine's own code: TLS 1.2 and 1.3 only, --cert/--key checked as a\n"
      "certificates: entry (the key must be the certificate's, an expired one is\n"
      "refused; exit 2). --client-ca requires each sender to present a certificate\n"
      "issued by that CA (tls.clients.ca), and each --subject is a pattern of\n"
      "tls.clients.subjects: \"CN=lab-analyzer\", \"O=Hospital,OU=Lab\" (every\n"
      "attribute given must be in the subject), or a DNS name such as\n"
      "\"*.lab.hospital.org\". A refused handshake is logged on stderr in the\n"
      "engine's words (once a minute per address), and each connection's TLS\n"
      "version is logged there as it opens. `ductus cert self-signed` makes a pair\n"
      "to try with.\n"
      "\n"
      "  ductus sink --mllp 2576\n"
      "  ductus sink --mllp 2576 --ack AE         (see how the sender retries)\n"
      "  ductus sink --http 8080 --out received/\n"
      "  ductus sink --mllp 2576 --tls --cert tls/server.pem --key tls/server.key\n"
      "  ductus sink --mllp 2576 --tls --cert tls/server.pem --key tls/server.key \\\n"
      "      --client-ca tls/analyzers-ca.pem --subject CN=lab-analyzer");
  cmd->callback([args, ack, status, &exitCode] {
    args->ackGiven = ack->count() > 0;
    args->statusGiven = status->count() > 0;
    exitCode = runSink(*args);
  });
}

}  // namespace ductus::supervisor
