#include "analysis/storage/row_source.h"

#include <new>

namespace servesim {
namespace {

// What a source's module carries: its columns (for the table's declaration) and the rows.
struct Source {
  std::string declaration;  // CREATE TABLE x(...)
  const RowSource* rows;
};

// SQLite's table and cursor, each with what this code keeps beside them.
struct Table {
  sqlite3_vtab base;  // first: SQLite casts between the two
  const Source* source;
};
struct Cursor {
  sqlite3_vtab_cursor base;  // first, as above
  size_t row;
};

const RowSource& rows_of(sqlite3_vtab_cursor* cursor) {
  return *reinterpret_cast<Table*>(cursor->pVtab)->source->rows;
}

int table_connect(sqlite3* db, void* aux, int /*argc*/, const char* const* /*argv*/, sqlite3_vtab** out,
            char** /*error*/) {
  const auto* source = static_cast<const Source*>(aux);
  if (const int rc = sqlite3_declare_vtab(db, source->declaration.c_str()); rc != SQLITE_OK) return rc;
  auto* table = new (std::nothrow) Table{};
  if (table == nullptr) return SQLITE_NOMEM;
  table->source = source;
  *out = &table->base;
  return SQLITE_OK;
}

int table_disconnect(sqlite3_vtab* table) {
  delete reinterpret_cast<Table*>(table);
  return SQLITE_OK;
}

// Every row, in order: no constraint is used.
int table_best_index(sqlite3_vtab* /*table*/, sqlite3_index_info* info) {
  info->estimatedCost = 1e6;
  return SQLITE_OK;
}

int cursor_open(sqlite3_vtab* /*table*/, sqlite3_vtab_cursor** out) {
  auto* cursor = new (std::nothrow) Cursor{};
  if (cursor == nullptr) return SQLITE_NOMEM;
  *out = &cursor->base;
  return SQLITE_OK;
}

int cursor_close(sqlite3_vtab_cursor* cursor) {
  delete reinterpret_cast<Cursor*>(cursor);
  return SQLITE_OK;
}

int cursor_filter(sqlite3_vtab_cursor* cursor, int /*index*/, const char* /*index_name*/, int /*argc*/,
           sqlite3_value** /*argv*/) {
  reinterpret_cast<Cursor*>(cursor)->row = 0;
  return SQLITE_OK;
}

int cursor_next(sqlite3_vtab_cursor* cursor) {
  ++reinterpret_cast<Cursor*>(cursor)->row;
  return SQLITE_OK;
}

int cursor_eof(sqlite3_vtab_cursor* cursor) {
  return reinterpret_cast<Cursor*>(cursor)->row >= rows_of(cursor).size() ? 1 : 0;
}

int cursor_column(sqlite3_vtab_cursor* cursor, sqlite3_context* context, int n) {
  rows_of(cursor).value(context, reinterpret_cast<Cursor*>(cursor)->row, n);
  return SQLITE_OK;
}

int cursor_rowid(sqlite3_vtab_cursor* cursor, sqlite3_int64* out) {
  *out = static_cast<sqlite3_int64>(reinterpret_cast<Cursor*>(cursor)->row);
  return SQLITE_OK;
}

// Eponymous only (no xCreate): the table exists under the module's name, and CREATE VIRTUAL TABLE
// cannot make one in the database.
const sqlite3_module kModule = [] {
  sqlite3_module m{};
  m.xConnect = table_connect;
  m.xBestIndex = table_best_index;
  m.xDisconnect = table_disconnect;
  m.xOpen = cursor_open;
  m.xClose = cursor_close;
  m.xFilter = cursor_filter;
  m.xNext = cursor_next;
  m.xEof = cursor_eof;
  m.xColumn = cursor_column;
  m.xRowid = cursor_rowid;
  return m;
}();

}  // namespace

Status add_row_source(sqlite3* db, const std::string& name, const std::string& columns,
                      const RowSource* source) {
  auto* aux = new Source{"CREATE TABLE x(" + columns + ")", source};
  const int rc = sqlite3_create_module_v2(db, name.c_str(), &kModule, aux,
                                          [](void* p) { delete static_cast<Source*>(p); });
  // On failure SQLite has already called the destructor on aux.
  if (rc != SQLITE_OK) return Error{"cannot add the row source " + name + ": " + sqlite3_errstr(rc)};
  return Ok{};
}

void remove_row_source(sqlite3* db, const std::string& name) {
  (void)sqlite3_create_module_v2(db, name.c_str(), nullptr, nullptr, nullptr);
}

}  // namespace servesim
