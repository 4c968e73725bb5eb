#include "analysis/storage/request_rows.h"

#include <sqlite3.h>

#include "analysis/storage/database.h"

namespace servesim {
namespace {

double column_or(sqlite3_stmt* s, int c, double absent) {
  return sqlite3_column_type(s, c) == SQLITE_NULL ? absent : sqlite3_column_double(s, c);
}

}  // namespace

Result<std::vector<RequestRow>> read_request_rows(Database& db, int64_t run_id) {
  std::vector<RequestRow> out;
  sqlite3_stmt* s = nullptr;
  const char* sql =
      "SELECT arrival, scheduled, first_token, finished, prompt_tokens, output_tokens, cached_tokens, "
      "preemptions, status FROM requests WHERE run_id = ? ORDER BY arrival, id";
  if (sqlite3_prepare_v2(db.handle(), sql, -1, &s, nullptr) != SQLITE_OK) return Error{db.error_message()};
  sqlite3_bind_int64(s, 1, run_id);
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    RequestRow r;
    r.arrival = column_or(s, 0, 0);
    r.scheduled = column_or(s, 1, -1);
    r.first_token = column_or(s, 2, -1);
    r.finished = column_or(s, 3, -1);
    r.prompt_tokens = sqlite3_column_int64(s, 4);
    r.output_tokens = sqlite3_column_int64(s, 5);
    r.cached_tokens = sqlite3_column_int64(s, 6);
    r.preemptions = sqlite3_column_int64(s, 7);
    const auto* status = reinterpret_cast<const char*>(sqlite3_column_text(s, 8));
    const std::string_view st = status != nullptr ? std::string_view(status) : std::string_view();
    r.finished_ok = st == "finished" && r.finished >= 0;
    r.rejected = st == "rejected";
    out.push_back(r);
  }
  sqlite3_finalize(s);
  if (rc != SQLITE_DONE) return Error{db.error_message()};
  return out;
}

std::optional<double> request_latency(const RequestRow& r, std::string_view latency) {
  if (!r.finished_ok) return std::nullopt;
  if (latency == "e2el") return r.finished - r.arrival;
  if (latency == "queue") return r.scheduled >= 0 ? std::optional<double>(r.scheduled - r.arrival) : std::nullopt;
  if (r.first_token < 0) return std::nullopt;
  if (latency == "ttft") return r.first_token - r.arrival;
  if (latency == "tpot" && r.output_tokens > 1) {
    return (r.finished - r.first_token) / static_cast<double>(r.output_tokens - 1);
  }
  return std::nullopt;
}

std::vector<double> latency_values(std::span<const RequestRow> rows, std::string_view latency) {
  std::vector<double> v;
  for (const RequestRow& r : rows) {
    if (std::optional<double> x = request_latency(r, latency)) v.push_back(*x);
  }
  return v;
}

}  // namespace servesim
