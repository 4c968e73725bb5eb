// Reading runs for `sim report --html`, and the page of one or several runs.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "analysis/reports/html_report_data.h"
#include "analysis/reports/html_report_sections.h"
#include "analysis/storage/run_status.h"
#include "sim/request.h"

namespace servesim::html {

Query::Query(Database& db, const std::string& sql) {
  if (sqlite3_prepare_v2(db.handle(), sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK) {
    message_ = db.error_message();
    sqlite3_finalize(stmt_);
    stmt_ = nullptr;
  }
}

Query& Query::bind(int index, int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}

Query& Query::bind(int index, const std::string& value) {
  sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
  return *this;
}

std::string Query::text(int c) const {
  const unsigned char* t = sqlite3_column_text(stmt_, c);
  return t != nullptr ? reinterpret_cast<const char*>(t) : "";
}

bool has_table(Database& db, const std::string& name) {
  Query q(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?");
  return q.ok() && q.bind(1, name).step();
}

int64_t count_rows(Database& db, const std::string& table, int64_t run_id) {
  Query q(db, "SELECT count(*) FROM " + table + " WHERE run_id = ?");
  return q.ok() && q.bind(1, run_id).step() ? q.integer(0) : 0;
}

std::string format_number(double v) {
  char buf[64];
  if (!std::isfinite(v)) return v > 0 ? "inf" : v < 0 ? "-inf" : "-";
  if ((v == std::floor(v) || std::fabs(v) >= 1e4) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", v);  // 11420, not 1.142e+04
  } else {
    std::snprintf(buf, sizeof buf, "%.4g", v);
  }
  return buf;
}

std::optional<double> ReportRun::metric(std::string_view metric_name) const {
  return find_metric(metrics, metric_name);
}

std::string ReportRun::label() const {
  return "run " + std::to_string(id) + (name.empty() ? "" : " (" + name + ")");
}

namespace {

// "1-3, 5, 7-8": the ids that exist, for the unknown-run message (as `sim report` words it).
std::string id_ranges(const std::vector<int64_t>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    out += (out.empty() ? "" : ", ") + std::to_string(ids[i]) + (j > i ? "-" + std::to_string(ids[j]) : "");
    i = j + 1;
  }
  return out;
}

Result<ReportRun> read_one(Database& db, int64_t id) {
  ReportRun r;
  Query q(db,
          "SELECT id, name, status, error, policy, backend, hardware, model, workload, "
          "replicas, tp, host, pid, started_at FROM runs WHERE id = ?");
  if (!q.ok()) return q.error();
  if (!q.bind(1, id).step()) return Error{"no run " + std::to_string(id) + " in " + db.path()};
  r.id = q.integer(0);
  r.name = q.text(1);
  r.status = q.text(2);
  r.error = q.text(3);
  r.policy = q.text(4);
  r.backend = q.text(5);
  r.hardware = q.text(6);
  r.model = q.text(7);
  r.workload = q.text(8);
  if (!q.null(9)) r.replicas = static_cast<int32_t>(q.integer(9));
  if (!q.null(10)) r.tp = static_cast<int32_t>(q.integer(10));
  // A run recorded as running whose process is gone was cut off (SIGKILL, a crash): say so.
  if (r.status == "running") {
    const std::string gone = abandoned_reason(q.text(11), q.null(12) ? 0 : q.integer(12), q.text(13));
    if (!gone.empty()) {
      r.status = "abandoned";
      if (r.error.empty()) r.error = gone + " before the run ended; what it logged is kept";
    }
  }
  Query m(db, "SELECT name, value FROM metrics WHERE run_id = ? ORDER BY name");
  if (!m.ok()) return m.error();
  m.bind(1, id);
  while (m.step()) {
    if (!m.null(1)) r.metrics.push_back({m.text(0), m.real(1)});  // SQLite stores NaN as NULL
  }
  const auto names = metric_names();
  auto rank = [&](const Metric& x) { return std::find(names.begin(), names.end(), x.name) - names.begin(); };
  std::stable_sort(r.metrics.begin(), r.metrics.end(),
                   [&](const Metric& a, const Metric& b) { return rank(a) < rank(b); });
  return r;
}

// Rejections by cause, one bar group per cause and a bar per run; a note when nothing was rejected.
Card rejected_card(const std::vector<ReportRun>& runs) {
  Card card{.title = "Rejected requests by reason"};
  bool any = false;
  for (const ReportRun& r : runs) any = any || r.metric("rejected").value_or(0) > 0;
  if (!any) {
    card.note = runs.size() == 1 ? "No request was rejected." : "No request of these runs was rejected.";
    return card;
  }
  card.chart = make_chart("bar", "reason", "requests rejected");
  for (int c = 1; c < kNumRejectCauses; ++c) {
    card.chart["x"]["labels"].push_back(reject_cause_name(static_cast<RejectCause>(c)));
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    nlohmann::json s = make_series(runs[i].label(), static_cast<int>(i), "bar");
    for (int c = 1; c < kNumRejectCauses; ++c) {
      const std::string cause = reject_cause_name(static_cast<RejectCause>(c));
      s["y"].push_back(runs[i].metric("rejected_" + cause).value_or(0));
    }
    s.erase("x");
    card.chart["series"].push_back(std::move(s));
  }
  card.caption =
      "Requests that can never be served: a prompt at the model's context length "
      "(context_length), more KV blocks than a replica has (kv_capacity), a prompt over "
      "the iteration's token budget without chunking (batch_tokens), or a follow-up of a "
      "rejected request (parent).";
  return card;
}

}  // namespace

Result<std::vector<ReportRun>> read_report_runs(Database& db, const std::vector<int64_t>& ids) {
  std::vector<int64_t> all;
  Query q(db, "SELECT id FROM runs ORDER BY id");
  if (!q.ok()) return q.error();
  while (q.step()) all.push_back(q.integer(0));
  if (all.empty()) return Error{"no runs in " + db.path() + "; run `sim --trace ...` first"};
  std::vector<int64_t> wanted = ids.empty() ? std::vector<int64_t>{all.back()} : ids;
  std::vector<int64_t> missing;
  for (const int64_t id : wanted) {
    if (!std::binary_search(all.begin(), all.end(), id)) missing.push_back(id);
  }
  if (!missing.empty()) {
    std::string list;
    for (const int64_t id : missing) list += (list.empty() ? "" : ", ") + std::to_string(id);
    return Error{std::string(missing.size() == 1 ? "no run " : "no runs ") + list + " in " + db.path() +
                 "; its runs are " + id_ranges(all)};
  }
  std::vector<ReportRun> out;
  std::set<int64_t> seen;
  for (const int64_t id : wanted) {
    if (!seen.insert(id).second) continue;  // --run 3 --run 3 shows run 3 once
    Result<ReportRun> r = read_one(db, id);
    if (!r.ok()) return r.error();
    out.push_back(std::move(r).value());
  }
  return out;
}

Result<Page> runs_page(Database& db, const std::vector<ReportRun>& runs) {
  Page page;
  std::string ids;
  for (const ReportRun& r : runs) ids += (ids.empty() ? "" : ", ") + std::to_string(r.id);
  page.title = "servesim report: " + std::string(runs.size() == 1 ? "run " : "runs ") + ids;
  if (runs.size() == 1 && !runs[0].name.empty()) page.title += " (" + runs[0].name + ")";
  page.subtitle = "Database " + db.path() + "; servesim " SERVESIM_VERSION ".";
  page.banners = run_banners(runs);
  page.tables = summary_tables(runs);

  // Latencies need a run that completed a request (a banner says when none did); a failed or
  // interrupted run's time series and iterations still show what it did until it stopped.
  bool served = false;
  for (const ReportRun& r : runs) served = served || r.metric("completed").value_or(0) > 0;
  for (auto* build : {&latency_section, &timeline_section, &iterations_section}) {
    if (build == &latency_section && !served) continue;
    Result<Section> s = (*build)(db, runs);
    if (!s.ok()) return s.error();
    page.sections.push_back(std::move(s).value());
  }
  page.sections.push_back(Section{.title = "Rejections", .cards = {rejected_card(runs)}});
  return page;
}

}  // namespace servesim::html
