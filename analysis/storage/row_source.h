// Rows in memory as a table that SQLite reads: `INSERT INTO t(...) SELECT ?1, * FROM name` stores a
// whole batch of them in one statement, SQLite taking each value straight from the caller's rows.
// Binding a prepared INSERT's values and stepping it once per row costs a call per value and per
// row; the writer of a run spends most of its time there (bench/replay_100k.py, docs/benchmarks.md).
// The table is SQLite's eponymous kind: nothing is created in the database.
#pragma once

#include <sqlite3.h>

#include <cstddef>
#include <span>
#include <string>
#include <utility>

#include "sim/result.h"

namespace servesim {

class RowSource {
 public:
  virtual ~RowSource() = default;
  // How many rows the table holds now.
  virtual size_t size() const = 0;
  // Gives SQLite column `column` of row `row` through sqlite3_result_*(context, ...). Text and
  // blobs may be given SQLITE_STATIC: the rows stay put while a statement reads them.
  virtual void value(sqlite3_context* context, size_t row, int column) const = 0;
};

// Makes `source` readable on `db` as the table `name`, with `columns` (their names, comma-separated,
// in the order value() numbers them from 0), until remove_row_source. Statements that read it must
// be finalized before then. `source` must outlive that.
Status add_row_source(sqlite3* db, const std::string& name, const std::string& columns,
                      const RowSource* source);
void remove_row_source(sqlite3* db, const std::string& name);

// A RowSource over a span of `Row`s that it is shown (show() before each statement that reads it),
// whose values `Value` (callable as value(context, row, column)) gives.
template <typename Row, typename Value>
class SpanRowSource final : public RowSource {
 public:
  explicit SpanRowSource(Value values) : values_(std::move(values)) {}
  void show(std::span<const Row> rows) { rows_ = rows; }
  size_t size() const override { return rows_.size(); }
  void value(sqlite3_context* context, size_t row, int column) const override {
    values_(context, rows_[row], column);
  }

 private:
  std::span<const Row> rows_;
  Value values_;
};

}  // namespace servesim
