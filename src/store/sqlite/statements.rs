//! Statements through the connection's cache: each statement of a step is compiled once per connection, not once per step.

use rusqlite::{Connection, Params, Row};

/// How many compiled statements a connection keeps: every statement of the step and commit path
/// (journal, runs, children, reads of a snapshot) with room to spare, so none is evicted and
/// compiled again while a host commits steps.
pub(super) const STATEMENT_CACHE_CAPACITY: usize = 64;

/// `execute` and `query_row` through `prepare_cached`: SQLite's statement compiler was half of a
/// durable step's instructions when every step compiled its three statements afresh.
pub(super) trait CachedStatements {
    fn execute_cached<P: Params>(&self, sql: &str, parameters: P) -> rusqlite::Result<usize>;

    fn query_row_cached<T, P, F>(&self, sql: &str, parameters: P, read: F) -> rusqlite::Result<T>
    where
        P: Params,
        F: FnOnce(&Row<'_>) -> rusqlite::Result<T>;
}

impl CachedStatements for Connection {
    fn execute_cached<P: Params>(&self, sql: &str, parameters: P) -> rusqlite::Result<usize> {
        self.prepare_cached(sql)?.execute(parameters)
    }

    fn query_row_cached<T, P, F>(&self, sql: &str, parameters: P, read: F) -> rusqlite::Result<T>
    where
        P: Params,
        F: FnOnce(&Row<'_>) -> rusqlite::Result<T>,
    {
        self.prepare_cached(sql)?.query_row(parameters, read)
    }
}
