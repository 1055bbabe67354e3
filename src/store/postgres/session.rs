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
        source: explained(&error).into(),
    }
}

/// The error and every cause below it (the driver's own message often only says which step
/// failed: "error connecting to server", with the system's reason beneath), the server's
/// detail and hint where it gave them.
pub(super) fn explained(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(below) = cause {
        let said = below.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        cause = below.source();
    }
    if let Some(database) = error
        .downcast_ref::<tokio_postgres::Error>()
        .and_then(tokio_postgres::Error::as_db_error)
    {
        for extra in [database.detail(), database.hint()].into_iter().flatten() {
            text.push_str(" (");
            text.push_str(extra);
            text.push(')');
        }
    }
    if text.contains("TLS") {
        text.push_str(
            "; protocol-run does not speak TLS to PostgreSQL yet: connect over a trusted network \
             or a Unix socket with `sslmode=disable`",
        );
    }
    text
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
