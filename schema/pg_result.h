// PgResult: the owner of one PGresult (PQclear on destruction).
#pragma once

#include <libpq-fe.h>

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace ductus::store {

class PgResult {
 public:
  PgResult() = default;
  explicit PgResult(PGresult* r) : r_(r) {}

  PGresult* get() const { return r_.get(); }
  int rows() const { return r_ ? PQntuples(r_.get()) : 0; }
  int columns() const { return r_ ? PQnfields(r_.get()) : 0; }
  bool isNull(int row, int col) const { return PQgetisnull(r_.get(), row, col) != 0; }
  std::string_view text(int row, int col) const {
    return {PQgetvalue(r_.get(), row, col),
            static_cast<size_t>(PQgetlength(r_.get(), row, col))};
  }
  std::optional<std::string> optText(int row, int col) const {
    if (isNull(row, col)) return std::nullopt;
    return std::string(text(row, col));
  }
  long long integer(int row, int col) const {
    return std::strtoll(PQgetvalue(r_.get(), row, col), nullptr, 10);
  }
  // Rows changed by an INSERT/UPDATE/DELETE.
  long long affected() const {
    const char* s = r_ ? PQcmdTuples(r_.get()) : "";
    return *s ? std::strtoll(s, nullptr, 10) : 0;
  }

 private:
  struct Clear {
    void operator()(PGresult* r) const { PQclear(r); }
  };
  std::unique_ptr<PGresult, Clear> r_;
};

}  // namespace ductus::store
