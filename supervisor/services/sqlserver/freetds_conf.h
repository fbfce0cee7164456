// The TLS settings of SQL Server connections, as FreeTDS needs them.
//
// FreeTDS's ODBC driver (1.3, Debian 12) takes only Encryption= from a
// connection string: the CA to verify the server against and the check
// of the server's name exist only as freetds.conf settings ("ca file",
// "check certificate hostname"), read for the section a connection names
// with SERVERNAME=. Without "ca file" the driver verifies nothing. So the
// engine writes a freetds.conf of its own (a private 0700 folder, the file
// 0600), one section per distinct host, port and TLS choice, and points
// FREETDSCONF at it. The user and password stay in the connection string.
#pragma once

#include <string>

#include "common/result.h"

namespace ductus::supervisor::services::sqlserver {

struct ConnectSettings;

class FreetdsConf {
 public:
  // Sets FREETDSCONF for the process, once. Called on the loop before any
  // connection thread starts (SqlServerPool's constructor), because setenv
  // is not safe while another thread reads the environment.
  static Status prepare();

  // The section name (for SERVERNAME=) of these settings, written to the
  // file first if it is new. Sections are only added, and the file is
  // replaced whole (rename), so a connection reading it never sees half.
  // Invalid when a value cannot be written as a freetds.conf line.
  static Result<std::string> sectionFor(const ConnectSettings& settings);

  // The file's text for one section (exposed for the tests).
  static Result<std::string> sectionText(const std::string& name, const ConnectSettings& settings);
};

}  // namespace ductus::supervisor::services::sqlserver
