#include "analysis/storage/row_source.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <string>
#include <vector>

namespace servesim {
namespace {

struct Row {
  int64_t n;
  double x;
  std::string text;  // "" stands for NULL
};

void row_value(sqlite3_context* c, const Row& r, int column) {
  switch (column) {
    case 0: return sqlite3_result_int64(c, r.n);
    case 1: return sqlite3_result_double(c, r.x);
    default:
      if (r.text.empty()) return sqlite3_result_null(c);
      return sqlite3_result_text(c, r.text.data(), static_cast<int>(r.text.size()), SQLITE_STATIC);
  }
}

using Source = SpanRowSource<Row, void (*)(sqlite3_context*, const Row&, int)>;

class RowSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(sqlite3_open(":memory:", &db_), SQLITE_OK);
    exec("CREATE TABLE t(run INTEGER, n INTEGER PRIMARY KEY, x REAL, text TEXT)");
  }
  void TearDown() override { sqlite3_close(db_); }
  int exec(const std::string& sql) { return sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr); }
  // The rows of a query, "a|b|c" each (NULL as "NULL").
  std::vector<std::string> rows(const std::string& sql) {
    std::vector<std::string> out;
    sqlite3_stmt* s = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr), SQLITE_OK) << sqlite3_errmsg(db_);
    while (sqlite3_step(s) == SQLITE_ROW) {
      std::string row;
      for (int i = 0; i < sqlite3_column_count(s); ++i) {
        const auto* text = sqlite3_column_text(s, i);
        row += (i ? "|" : "") + std::string(text ? reinterpret_cast<const char*>(text) : "NULL");
      }
      out.push_back(row);
    }
    sqlite3_finalize(s);
    return out;
  }
  sqlite3* db_ = nullptr;
};

// The rows it is shown, in order, with their types and NULLs, are what INSERT ... SELECT stores;
// shown other rows, the same statement stores those; shown none, nothing.
TEST_F(RowSourceTest, InsertSelectStoresTheRowsShown) {
  Source source(row_value);
  ASSERT_TRUE(add_row_source(db_, "rows_t", "n, x, text", &source).ok());
  sqlite3_stmt* insert = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db_, "INSERT INTO t(run, n, x, text) SELECT ?1, * FROM rows_t", -1, &insert,
                               nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(db_);
  const std::vector<Row> first = {{3, 0.5, "a"}, {1, -2.25, ""}, {2, 1e300, "with, comma"}};
  const std::vector<Row> second = {{7, 7, "x"}};
  for (const auto* batch : {&first, &second, static_cast<const std::vector<Row>*>(nullptr)}) {
    source.show(batch ? std::span<const Row>(*batch) : std::span<const Row>());
    sqlite3_bind_int64(insert, 1, 42);
    EXPECT_EQ(sqlite3_step(insert), SQLITE_DONE) << sqlite3_errmsg(db_);
    sqlite3_reset(insert);
  }
  sqlite3_finalize(insert);
  // n is the key, so the rowid: the rows read back in n's order.
  EXPECT_EQ(rows("SELECT run, n, x, text, typeof(x), typeof(text) FROM t ORDER BY rowid"),
            (std::vector<std::string>{"42|1|-2.25|NULL|real|null", "42|2|1.0e+300|with, comma|real|text",
                                      "42|3|0.5|a|real|text", "42|7|7.0|x|real|text"}));
  remove_row_source(db_, "rows_t");
  EXPECT_NE(exec("SELECT * FROM rows_t"), SQLITE_OK);  // gone
}

// With OR FAIL, a row that breaks the key stops the statement: the rows before it stay, the rows
// after it are not stored.
TEST_F(RowSourceTest, OrFailKeepsTheRowsBeforeAFailure) {
  Source source(row_value);
  ASSERT_TRUE(add_row_source(db_, "rows_t", "n, x, text", &source).ok());
  const std::vector<Row> batch = {{1, 0, "a"}, {2, 0, "b"}, {1, 0, "again"}, {3, 0, "c"}};
  source.show(batch);
  EXPECT_NE(exec("INSERT OR FAIL INTO t(run, n, x, text) SELECT 0, * FROM rows_t"), SQLITE_OK);
  EXPECT_NE(std::string(sqlite3_errmsg(db_)).find("UNIQUE constraint failed"), std::string::npos);
  EXPECT_EQ(rows("SELECT n, text FROM t ORDER BY n"), (std::vector<std::string>{"1|a", "2|b"}));
  remove_row_source(db_, "rows_t");
}

// It is a table of the connection only: nothing is written into the database's schema.
TEST_F(RowSourceTest, LeavesNothingInTheSchema) {
  Source source(row_value);
  ASSERT_TRUE(add_row_source(db_, "rows_t", "n, x, text", &source).ok());
  EXPECT_EQ(rows("SELECT count(*) FROM rows_t"), (std::vector<std::string>{"0"}));
  EXPECT_EQ(rows("SELECT name FROM sqlite_schema"), (std::vector<std::string>{"t"}));
  remove_row_source(db_, "rows_t");
}

}  // namespace
}  // namespace servesim
