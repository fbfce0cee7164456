// errorResponse: the one place an Error's kind becomes an HTTP status and
// the JSON `error` name a client decides on.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "api/auth/handler_support.h"

namespace ductus::api::test {
namespace {

std::string errorName(const net::HttpResponse& r) {
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  return j.is_object() && j.contains("error") ? j["error"].get<std::string>() : "";
}

bool hasHeader(const net::HttpResponse& r, std::string_view name) {
  for (auto& [k, v] : r.headers)
    if (k == name) return true;
  return false;
}

TEST(ErrorResponse, EachKindHasItsStatusAndName) {
  struct Case {
    ErrorKind kind;
    int status;
    const char* name;
  };
  for (auto c : {Case{ErrorKind::Invalid, 400, "invalid"},
                 Case{ErrorKind::WeakPassword, 400, "weak_password"},
                 Case{ErrorKind::Unauthenticated, 401, "unauthenticated"},
                 Case{ErrorKind::PasswordChangeRequired, 403, "password_change_required"},
                 Case{ErrorKind::TotpRequired, 403, "totp_required"},
                 Case{ErrorKind::NotFound, 404, "not_found"},
                 Case{ErrorKind::Exists, 409, "exists"}, Case{ErrorKind::Conflict, 409, "conflict"},
                 Case{ErrorKind::NothingToChange, 409, "nothing_to_change"},
                 Case{ErrorKind::StillPending, 409, "still_pending"},
                 Case{ErrorKind::NotRunHere, 409, "not_run_here"},
                 Case{ErrorKind::Code, 422, "code"}, Case{ErrorKind::Busy, 503, "unavailable"},
                 Case{ErrorKind::Unavailable, 503, "unavailable"}}) {
    auto r = errorResponse(Error{"why", c.kind});
    EXPECT_EQ(r.status, c.status) << kindName(c.kind);
    EXPECT_EQ(errorName(r), c.name) << kindName(c.kind);
  }
}

TEST(ErrorResponse, TheDatabaseUnableToServeIs503ItsMistakeIs500) {
  for (const char* busy : {"40001", "40P01", "08006", "57P01", "53100", "P0001"}) {
    auto r = errorResponse(Error{"postgres said no", ErrorKind::Database, busy});
    EXPECT_EQ(r.status, 503) << busy;
    EXPECT_TRUE(hasHeader(r, "Retry-After")) << busy;
  }
  for (const char* mistake : {"42P01", "42601", "22P02", "23505", "XX000"}) {
    auto r = errorResponse(Error{"postgres said no", ErrorKind::Database, mistake});
    EXPECT_EQ(r.status, 500) << mistake;
  }
}

TEST(ErrorResponse, AnInternalErrorIs500AndNeverItsText) {
  auto r = errorResponse(Error{"secret detail of a bug"});
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(r.body.find("secret detail"), std::string::npos) << r.body;
}

}  // namespace
}  // namespace ductus::api::test
