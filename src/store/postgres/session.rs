//! One connection or transaction of the PostgreSQL store, its statements prepared once per connection and its errors naming the database and the operation.

use std::cell::RefCell;
use std::collections::HashMap;

use tokio_postgres::types::ToSql;
use tokio_postgres::{GenericClient, Row, Statement};

use super::wait;
use crate::store::StoreError;
use crate::store::codec::Codec;

/// Statements on `client` (the connection, or a transaction on it).
pub(super) struct Session<'a, C> {
    pub(super) client: &'a C,
    pub(super) statements: &'a RefCell<HashMap<String, Statement>>,
    pub(super) codec: &'a Codec,
}

/// A PostgreSQL error as the store's: the database, the operation, the server's message.
pub(super) fn failed(codec: &Codec, operation: &str, error: tokio_postgres::Error) -> StoreError {
    StoreError::Database {
        database: codec.location(),
        operation: operation.to_string(),
        source: Box::new(error),
    }
}

impl<C: GenericClient + Sync> Session<'_, C> {
    /// `sql` prepared on this connection: once, then from the cache.
    fn statement(&self, sql: &str) -> Result<Statement, tokio_postgres::Error> {
        if let Some(statement) = self.statements.borrow().get(sql) {
            return Ok(statement.clone());
        }
        let statement = wait(self.client.prepare(sql))?;
        self.statements
            .borrow_mut()
            .insert(sql.to_string(), statement.clone());
        Ok(statement)
    }

    /// Runs `sql`; the number of rows it changed.
    pub(super) fn execute(
        &self,
        operation: &dyn Fn() -> String,
        sql: &str,
        parameters: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, StoreError> {
        self.statement(sql)
            .and_then(|statement| wait(self.client.execute(&statement, parameters)))
            .map_err(|error| failed(self.codec, &operation(), error))
    }

    /// The rows `sql` reads.
    pub(super) fn query(
        &self,
        operation: &dyn Fn() -> String,
        sql: &str,
        parameters: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, StoreError> {
        self.statement(sql)
            .and_then(|statement| wait(self.client.query(&statement, parameters)))
            .map_err(|error| failed(self.codec, &operation(), error))
    }

    /// The one row `sql` reads, if any.
    pub(super) fn query_optional(
        &self,
        operation: &dyn Fn() -> String,
        sql: &str,
        parameters: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, StoreError> {
        self.statement(sql)
            .and_then(|statement| wait(self.client.query_opt(&statement, parameters)))
            .map_err(|error| failed(self.codec, &operation(), error))
    }

    /// A column of `row`, or the row's damage reported for `run`.
    pub(super) fn column<'r, T: tokio_postgres::types::FromSql<'r>>(
        &self,
        row: &'r Row,
        index: usize,
        run: &str,
    ) -> Result<T, StoreError> {
        row.try_get(index)
            .map_err(|error| self.codec.corrupt(run, "row", Box::new(error)))
    }
}
