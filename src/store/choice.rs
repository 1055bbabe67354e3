//! Which store a command reads and drives runs in (`--store sqlite|memory|postgres|postgres://…`), with a database URL taken from the environment or a file so that its password need not sit in argv.

use std::path::Path;

use super::{PostgresStore, SqliteStore, Store, StoreError};

/// The environment variable `--store postgres` reads the database URL from.
pub const DATABASE_URL: &str = "PROTOCOL_RUN_DATABASE_URL";

/// The environment variable naming a file that holds the database URL (its first line), read
/// when `DATABASE_URL` is not set: a secret mounted as a file.
pub const DATABASE_URL_FILE: &str = "PROTOCOL_RUN_DATABASE_URL_FILE";

/// Where runs are kept.
#[derive(Clone, PartialEq, Eq)]
pub enum StoreChoice {
    /// `state.db` in the state directory: one host.
    Sqlite,
    /// Nothing recorded (`serve` only): instances end with the process.
    Memory,
    /// A PostgreSQL database, by its URL.
    Postgres(String),
}

/// Never the URL itself: it may hold a password.
impl std::fmt::Debug for StoreChoice {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreChoice::Sqlite => formatter.write_str("Sqlite"),
            StoreChoice::Memory => formatter.write_str("Memory"),
            StoreChoice::Postgres(_) => formatter.write_str("Postgres(..)"),
        }
    }
}

impl StoreChoice {
    /// `sqlite`, `memory`, `postgres` (the URL from `DATABASE_URL` or the file
    /// `DATABASE_URL_FILE` names), or a `postgres://` / `postgresql://` URL.
    pub fn parse(text: &str) -> Result<StoreChoice, String> {
        match text {
            "sqlite" => Ok(StoreChoice::Sqlite),
            "memory" => Ok(StoreChoice::Memory),
            "postgres" | "postgresql" => database_url().map(StoreChoice::Postgres),
            url if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
                Ok(StoreChoice::Postgres(url.to_string()))
            }
            other => Err(format!(
                "`{other}` is no store: use `sqlite` (the state directory's state.db), \
                 `postgres` (the URL in {DATABASE_URL} or in the file {DATABASE_URL_FILE} \
                 names), a `postgres://` URL, or `memory` (serve only)"
            )),
        }
    }

    /// Opens the store (`Sqlite` in `state_directory`); `None` for `Memory`, which keeps
    /// nothing to open.
    pub fn open(&self, state_directory: &Path) -> Result<Option<Box<dyn Store>>, StoreError> {
        Ok(match self {
            StoreChoice::Sqlite => Some(Box::new(SqliteStore::open(state_directory)?)),
            StoreChoice::Postgres(url) => Some(Box::new(PostgresStore::connect(url)?)),
            StoreChoice::Memory => None,
        })
    }

    /// Whether there may be runs to read: SQLite's file exists (reading opens no new one), a
    /// database always may.
    pub fn may_hold_runs(&self, state_directory: &Path) -> bool {
        match self {
            StoreChoice::Sqlite => state_directory.join(SqliteStore::FILE_NAME).exists(),
            StoreChoice::Postgres(_) => true,
            StoreChoice::Memory => false,
        }
    }
}

/// The URL `--store postgres` means: `DATABASE_URL`, or the first line of the file
/// `DATABASE_URL_FILE` names.
fn database_url() -> Result<String, String> {
    if let Ok(url) = std::env::var(DATABASE_URL)
        && !url.trim().is_empty()
    {
        return Ok(url.trim().to_string());
    }
    let Ok(file) = std::env::var(DATABASE_URL_FILE) else {
        return Err(format!(
            "--store postgres needs the database's URL: set {DATABASE_URL} \
             (postgres://USER@HOST:PORT/DATABASE), or {DATABASE_URL_FILE} to a file holding it"
        ));
    };
    let text = std::fs::read_to_string(&file)
        .map_err(|error| format!("{DATABASE_URL_FILE}: cannot read {file}: {error}"))?;
    match text.lines().next().map(str::trim) {
        Some(url) if !url.is_empty() => Ok(url.to_string()),
        _ => Err(format!(
            "{DATABASE_URL_FILE}: {file} is empty; write the database's URL on its first line"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_urls_are_read_and_anything_else_refused_with_the_choices() {
        assert_eq!(StoreChoice::parse("sqlite"), Ok(StoreChoice::Sqlite));
        assert_eq!(StoreChoice::parse("memory"), Ok(StoreChoice::Memory));
        assert_eq!(
            StoreChoice::parse("postgres://u@h/d"),
            Ok(StoreChoice::Postgres("postgres://u@h/d".to_string()))
        );
        let refused = StoreChoice::parse("mysql://h").unwrap_err();
        assert!(refused.contains("`mysql://h` is no store"), "{refused}");
        assert!(refused.contains(DATABASE_URL), "{refused}");
    }

    #[test]
    fn a_url_is_never_shown_by_debug() {
        let choice = StoreChoice::Postgres("postgres://u:secret@h/d".to_string());
        assert_eq!(format!("{choice:?}"), "Postgres(..)");
    }
}
