#include "runner/external_probes.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "analysis/storage/database.h"
#include "analysis/storage/merge.h"
#include "analysis/storage/sweep_db.h"
#include "sim/config/json_text.h"
#include "sim/format_number.h"

namespace servesim {
namespace {

constexpr size_t kMaxAnswerBytes = size_t{64} << 20;  // an answer is a line per round: a few KB

// One probe's answer from the parent: its database, or the error that kept it from writing one.
struct ProbeAnswer {
  std::optional<std::string> db;
  std::string error;
  bool lost = false;  // the parent could not run it (its task lost): not its configuration's doing
};

// Reads the answer to round `round` for exactly these points.
Result<std::map<int64_t, ProbeAnswer>> parse_answer(const std::string& line, const ProbeRound& round) {
  const std::string where = "the probe driver's answer to round " + std::to_string(round.round);
  nlohmann::json j;
  if (auto failure = parse_json(line, j)) return Error{where + " is not JSON (" + failure->message + ")"};
  if (!j.is_object()) return Error{where + ": expected an object, got " + json_excerpt(j)};
  if (auto e = j.find("error"); e != j.end()) {
    return Error{where + ": " + (e->is_string() ? e->get<std::string>() : json_excerpt(*e))};
  }
  const auto results = j.find("results");
  if (results == j.end() || !results->is_array()) {
    return Error{where + ": expected {\"results\": [...]} or {\"error\": \"...\"}"};
  }
  std::map<int64_t, ProbeAnswer> out;
  for (const nlohmann::json& r : *results) {
    const auto point = r.is_object() ? r.find("point") : r.end();
    if (point == r.end() || !point->is_number_integer()) {
      return Error{where + ": a result without an integer \"point\": " + json_excerpt(r)};
    }
    const int64_t p = point->get<int64_t>();
    if (std::find(round.points.begin(), round.points.end(), p) == round.points.end()) {
      return Error{where + ": point " + std::to_string(p) + " is not a probe of the round"};
    }
    if (out.count(p) != 0) return Error{where + ": point " + std::to_string(p) + " is answered twice"};
    ProbeAnswer a;
    const auto db = r.find("db");
    const auto error = r.find("error");
    if (db != r.end() && db->is_string()) {
      a.db = db->get<std::string>();
    } else if (error != r.end() && error->is_string()) {
      a.error = error->get<std::string>();
      const auto lost = r.find("lost");
      if (lost != r.end() && !lost->is_boolean()) {
        return Error{where + ": point " + std::to_string(p) + ": \"lost\": expected true or false"};
      }
      a.lost = lost != r.end() && lost->get<bool>();
    } else {
      return Error{where + ": point " + std::to_string(p) + ": expected \"db\" or \"error\", a string"};
    }
    out.emplace(p, std::move(a));
  }
  for (const int64_t p : round.points) {
    if (out.count(p) == 0) return Error{where + ": point " + std::to_string(p) + " has no result"};
  }
  return out;
}

// One text column of the first row of `sql` on `db`, with `bind` bound to ?1 ("" when none).
std::string text_of(Database& db, const char* sql, const std::string& bind = "") {
  sqlite3_stmt* st = nullptr;
  std::string out;
  if (sqlite3_prepare_v2(db.handle(), sql, -1, &st, nullptr) == SQLITE_OK) {
    if (!bind.empty()) sqlite3_bind_text(st, 1, bind.c_str(), -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0) != nullptr) {
      out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    }
  }
  sqlite3_finalize(st);
  return out;
}

// Why the run in a probe's database is not probe i's: another name, or a grid value that differs
// from the one probed ("" when it is the probe's).
std::string other_probes_run(const ProbeRound& round, size_t i, const std::string& name, const std::string& config) {
  const toml::node* want = round.tables[i].get("name");
  if (want != nullptr && want->value_or(std::string()) != name) {
    return "holds the run '" + name + "', not this probe's ('" + want->value_or(std::string()) + "')";
  }
  toml::table stored;
  try {
    stored = toml::parse(config);
  } catch (const toml::parse_error&) {
    return "holds a run whose configuration cannot be read";
  }
  for (size_t k = 0; k < round.keys.size() && k < round.values[i].size(); ++k) {
    const toml::node* probed = round.values[i][k];
    const toml::node* ran = stored.at_path(round.keys[k]).node();
    if (probed == nullptr || ran == nullptr || !probed->is_number() || !ran->is_number()) continue;
    const double a = probed->value_or(0.0), b = ran->value_or(0.0);
    if (std::abs(a - b) > 1e-9 * std::max(std::abs(a), std::abs(b))) {
      return "holds a run of " + round.keys[k] + " = " + format_number(b) + ", not the " + format_number(a) +
             " probed";
    }
  }
  return "";
}

// Why the probe's database cannot be merged as probe i ("" when it can): it must hold one run,
// that probe's, and not one the search already holds for another point.
std::string check_probe_db(const std::string& path, const ProbeRound& round, size_t i, Database* target) {
  Result<std::unique_ptr<Database>> opened = Database::open_read_only(path);
  if (!opened.ok()) return opened.error().message;
  Database& probe = *opened.value();
  const std::string count = text_of(probe, "SELECT count(*) FROM runs");
  if (count != "1") {
    return path + ": expected the probe's one run, found " + (count.empty() ? "none readable" : count);
  }
  const std::string name = text_of(probe, "SELECT name FROM runs");
  if (std::string other = other_probes_run(round, i, name, text_of(probe, "SELECT config FROM runs")); !other.empty()) {
    return path + " " + other;
  }
  const std::string uid = text_of(probe, "SELECT uid FROM runs");
  if (target != nullptr && !uid.empty()) {
    const std::string linked =
        text_of(*target, "SELECT sweep_id FROM runs WHERE uid = ?1 AND sweep_id IS NOT NULL LIMIT 1", uid);
    if (!linked.empty()) return path + " holds run " + uid + ", which the database already holds for sweep " + linked;
  }
  return "";
}

// The merged run's status, error and metrics, read back into `o`; it joins the search.
Status read_merged_run(Database& db, int64_t sweep_id, PointOutcome& o) {
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db.handle(), "SELECT status, error FROM runs WHERE id = ?", -1, &st, nullptr) != SQLITE_OK) {
    return storage_error(Error{db.error_message()});
  }
  sqlite3_bind_int64(st, 1, o.run_id);
  if (sqlite3_step(st) == SQLITE_ROW) {
    const auto text = [&](int col) {
      const unsigned char* t = sqlite3_column_text(st, col);
      return t != nullptr ? std::string(reinterpret_cast<const char*>(t)) : std::string();
    };
    o.status = text(0);
    o.error = text(1);
  }
  sqlite3_finalize(st);
  if (o.status != "done" && o.status != "failed" && o.status != "interrupted") {
    o.error = "the probe's run ended '" + o.status + "'" + (o.error.empty() ? "" : ": " + o.error);
    o.status = "failed";
  }
  if (sqlite3_prepare_v2(db.handle(), "SELECT name, value FROM metrics WHERE run_id = ? ORDER BY rowid", -1, &st,
                         nullptr) != SQLITE_OK) {
    return storage_error(Error{db.error_message()});
  }
  sqlite3_bind_int64(st, 1, o.run_id);
  while (sqlite3_step(st) == SQLITE_ROW) {
    const unsigned char* name = sqlite3_column_text(st, 0);
    // A NaN metric is stored as NULL (SQLite has no NaN): read it back as NaN.
    const double value = sqlite3_column_type(st, 1) == SQLITE_NULL ? std::numeric_limits<double>::quiet_NaN()
                                                                    : sqlite3_column_double(st, 1);
    o.metrics.push_back(Metric{name != nullptr ? reinterpret_cast<const char*>(name) : "", value});
  }
  sqlite3_finalize(st);
  const std::string link =
      "UPDATE runs SET sweep_id = " + std::to_string(sweep_id) + " WHERE id = " + std::to_string(o.run_id);
  if (Status s = db.exec(link.c_str()); !s.ok()) return storage_error(s.error());
  return Ok{};
}

// Merges probe i's database into the search's; its outcome in `o`.
void merge_probe(const ProbeRound& round, size_t i, const std::string& path, Database* db, PointOutcome& o) {
  if (std::string bad = check_probe_db(path, round, i, db); !bad.empty()) {
    o.status = "interrupted";  // the parent's doing, not the configuration's: rerun, it may pass
    o.error = "the probe's database " + bad;
    return;
  }
  std::ostringstream quiet;
  Result<MergeOutcome> merged = merge_databases({path}, round.db_path, quiet);
  if (!merged.ok() || merged.value().run_ids.size() != 1 || merged.value().run_ids[0].size() != 1) {
    // A write that failed stops the search, as a local probe's; anything else fails this probe.
    o.storage_failed = !merged.ok() && merged.error().storage;
    o.status = "interrupted";
    o.error = merged.ok() ? "merging " + path + " gave no run" : merged.error().message;
    return;
  }
  o.run_id = merged.value().run_ids[0][0];
  if (db == nullptr) return;
  if (Status s = read_merged_run(*db, round.sweep_id, o); !s.ok()) {
    o.status = "interrupted";
    o.error = "reading the merged run back failed: " + s.error().message;
    o.storage_failed = true;
  }
}

// The outcomes of a round from the parent's answer: each database merged and linked, each row
// recorded, as run_points does for a local round.
std::vector<PointOutcome> merge_round(const ProbeRound& round, const std::map<int64_t, ProbeAnswer>& answers) {
  std::vector<PointOutcome> out(round.points.size());
  Result<std::unique_ptr<Database>> opened = Database::open(round.db_path);
  Database* db = opened.ok() ? opened.value().get() : nullptr;
  bool storage_failed = false;
  for (size_t i = 0; i < out.size(); ++i) {
    PointOutcome& o = out[i];
    o.point = round.points[i];
    const ProbeAnswer& a = answers.at(o.point);
    if (db == nullptr || storage_failed) {
      o.status = "interrupted";
      o.error = db == nullptr ? opened.error().message : "not merged: another probe could not write the database";
      o.storage_failed = true;
      storage_failed = true;
      continue;
    }
    if (a.db) {
      merge_probe(round, i, *a.db, db, o);
    } else {
      // A `sim run` that refused the configuration fails the probe; one the parent lost (its task
      // gone after its retries) is not the configuration's doing: interrupted, as a local probe a
      // signal stopped, not failed (which a search takes as a miss no load would mend).
      o.status = a.lost ? "interrupted" : "failed";
      o.error = a.error;
    }
    if (!o.storage_failed) {
      PointRow row{o.point, o.run_id, o.status, o.error, round.values[i]};
      if (Status s = record_point(*db, round.sweep_id, round.keys, row); !s.ok()) {
        o.status = "interrupted";
        o.error = (o.error.empty() ? "" : o.error + "; ") + "recording the point failed: " + s.error().message;
        o.storage_failed = true;
      }
    }
    storage_failed = storage_failed || o.storage_failed;
  }
  return out;
}

}  // namespace

std::string probe_request_line(const ProbeRound& round) {
  nlohmann::json probes = nlohmann::json::array();
  for (size_t i = 0; i < round.tables.size(); ++i) {
    toml::table config = round.tables[i];
    config.erase("db");  // the parent gives each probe a database of its own
    std::ostringstream text;
    text << toml::toml_formatter(config);
    probes.push_back({{"point", round.points[i]}, {"config", text.str()}});
  }
  const nlohmann::json request = {{"round", round.round}, {"probes", std::move(probes)}};
  return std::string(kProbesLinePrefix) + request.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ProbeExecutor external_probe_executor(ProbeChannel channel) {
  return [channel = std::move(channel)](const ProbeRound& round) -> Result<std::vector<PointOutcome>> {
    if (Status s = channel.send(probe_request_line(round)); !s.ok()) return s.error();
    Result<std::string> line = channel.receive();
    if (!line.ok()) return line.error();
    Result<std::map<int64_t, ProbeAnswer>> answers = parse_answer(line.value(), round);
    if (!answers.ok()) return answers.error();
    return merge_round(round, answers.value());
  };
}

ProbeChannel stream_channel(std::ostream& out, int in_fd, const std::atomic<bool>* stop) {
  auto pending = std::make_shared<std::string>();  // read past the last line returned
  ProbeChannel channel;
  channel.send = [&out](const std::string& line) -> Status {
    out << line << '\n' << std::flush;
    if (!out) return Error{"writing the probes' request to the probe driver failed (stdout closed?)"};
    return Ok{};
  };
  channel.receive = [in_fd, stop, pending]() -> Result<std::string> {
    while (true) {
      if (const size_t end = pending->find('\n'); end != std::string::npos) {
        std::string line = pending->substr(0, end);
        pending->erase(0, end + 1);
        return line;
      }
      if (stop != nullptr && stop->load()) return Error{"interrupted"};
      pollfd p{in_fd, POLLIN, 0};
      const int ready = ::poll(&p, 1, 100);  // a tenth of a second: the stop flag is looked at
      if (ready < 0 && errno != EINTR) {
        return Error{std::string("waiting for the probe driver: ") + std::strerror(errno)};
      }
      if (ready <= 0) continue;
      char buf[65536];
      const ssize_t n = ::read(in_fd, buf, sizeof buf);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n < 0) return Error{std::string("reading the probe driver's answer: ") + std::strerror(errno)};
      if (n == 0) return Error{"the probe driver closed its end (stdin) without answering"};
      pending->append(buf, static_cast<size_t>(n));
      if (pending->size() > kMaxAnswerBytes) return Error{"the probe driver's answer is longer than 64 MiB"};
    }
  };
  return channel;
}

}  // namespace servesim
