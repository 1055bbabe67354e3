//! The real PostgreSQL server the store's tests run against (tests/support/postgres.rs): each test's database is its own, keeps what was written across connections, and is gone once dropped.

use crate::support::postgres::{TestDatabase, database};

/// Two databases for `test`, or `None` (after the skip's line) without a server.
fn two_databases(test: &str) -> Option<(TestDatabase, TestDatabase)> {
    Some((database(test)?, database(test)?))
}

/// Whether a table named `table` exists in the database `client` is connected to.
fn has_table(client: &mut postgres::Client, table: &str) -> bool {
    let row = client
        .query_one("SELECT to_regclass($1) IS NOT NULL", &[&table])
        .expect("to_regclass answers");
    row.get(0)
}

/// Whether the server lists a database named `name` (pg_database is shared by every database).
fn has_database(client: &mut postgres::Client, name: &str) -> bool {
    let row = client
        .query_one(
            "SELECT count(*) FROM pg_database WHERE datname = $1",
            &[&name],
        )
        .expect("pg_database answers");
    row.get::<_, i64>(0) == 1
}

#[test]
fn two_databases_are_isolated() {
    let Some((first, second)) = two_databases("two_databases_are_isolated") else {
        return;
    };
    assert_ne!(first.name(), second.name());
    assert_ne!(first.url(), second.url());

    let mut in_first = first.connect();
    let mut in_second = second.connect();
    in_first
        .batch_execute("CREATE TABLE runs (id text PRIMARY KEY); INSERT INTO runs VALUES ('one')")
        .expect("the table is created");
    assert!(has_table(&mut in_first, "runs"));
    assert!(
        !has_table(&mut in_second, "runs"),
        "a table made in {} is seen in {}",
        first.name(),
        second.name()
    );
    // The same name in the second database is a table of its own.
    in_second
        .batch_execute("CREATE TABLE runs (id text PRIMARY KEY)")
        .expect("the second database has no such table yet");
    let counted: i64 = in_second
        .query_one("SELECT count(*) FROM runs", &[])
        .expect("the table is read")
        .get(0);
    assert_eq!(counted, 0);
}

#[test]
fn data_survives_reconnecting() {
    let Some(test_database) = database("data_survives_reconnecting") else {
        return;
    };
    let mut client = test_database.connect();
    client
        .batch_execute(
            "CREATE TABLE steps (number integer PRIMARY KEY, state text NOT NULL); \
             INSERT INTO steps VALUES (1, 'waiting'), (2, 'done')",
        )
        .expect("the rows are written");
    drop(client);

    let mut reconnected = test_database.connect();
    let states: Vec<(i32, String)> = reconnected
        .query("SELECT number, state FROM steps ORDER BY number", &[])
        .expect("the rows are read")
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    assert_eq!(states, [(1, "waiting".to_owned()), (2, "done".to_owned())]);
}

#[test]
fn dropping_a_test_database_removes_it() {
    let Some((watching, dropped)) = two_databases("dropping_a_test_database_removes_it") else {
        return;
    };
    let name = dropped.name().to_owned();
    let url = dropped.url().to_owned();
    // A connection still open when it is dropped: WITH (FORCE) ends it rather than failing.
    let mut still_connected = dropped.connect();
    still_connected
        .batch_execute("CREATE TABLE left_behind (id integer)")
        .expect("the table is created");
    let mut watcher = watching.connect();
    assert!(has_database(&mut watcher, &name));

    drop(dropped);

    assert!(
        !has_database(&mut watcher, &name),
        "{name} is still on the server after its TestDatabase was dropped"
    );
    let error = match postgres::Client::connect(&url, postgres::NoTls) {
        Ok(_) => panic!("{url} still connects after its database was dropped"),
        Err(error) => error,
    };
    assert_eq!(
        error.code(),
        Some(&postgres::error::SqlState::INVALID_CATALOG_NAME),
        "{error}"
    );
}
