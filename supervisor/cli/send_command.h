// `ductus send FILE... --to HOST:PORT | --http URL`: sends messages from
// files to an interface (or any receiver) the way a sending system would,
// for people building interfaces. Over MLLP each HL7 message of each file
// goes in its own frame, one at a time, and the ACK's MSA line is printed;
// over HTTP each message (or a whole non-HL7 file) is one POST and the
// status line and body are printed. Exit code 0 when everything was
// accepted, 1 when an answer refused a message or a connection failed, 2 on
// a usage error (a file that is missing or holds no message included:
// nothing is sent then).
//
// A command-line tool, not the engine: it uses blocking sockets (poll() for
// the time limits) and libcurl's easy API.
#pragma once

namespace CLI {
class App;
}

namespace ductus::supervisor {

// See common/command_line.h for how commands are added and run.
void addSendCommand(CLI::App& ductus, int& exitCode);

}  // namespace ductus::supervisor
