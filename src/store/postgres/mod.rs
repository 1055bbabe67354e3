//! The shared store: runs, their journal and their states in a PostgreSQL database, so that several hosts drive runs of one fleet.

mod changes;
mod inbox;
mod reads;
mod schema;
mod session;
mod telemetry;
mod texts;
mod writes;

use crate::store::inbox::EntryKind;
use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Duration;

use tokio_postgres::{Client, NoTls};

use super::codec::Codec;
use super::codec::states::Written;
use super::codec::steps::{Planned, StepWrite};
use super::{
    Finish, Holder, JournalEntry, NewRun, RunChanges, RunCursor, RunRecord, RunStatus, RunSummary,
    Store, StoreError, StoredSnapshot, Unclaimed, Write,
};
use crate::base::durable::ChildState;
use crate::base::snapshot::Snapshot;
use session::Session;

/// The longest a claim or an event's queueing waits for a row lock (`write_waiting_briefly`)
/// in a process that holds no lease; one that does waits as long as its lease lasts.
const LOCK_WAIT_MILLISECONDS: i64 = 1_000;

/// How long connecting waits for the server when the URL sets no `connect_timeout`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs, journal and states in a PostgreSQL database.
///
/// The client is used from whatever thread calls the store (a `serve` host calls it from its
/// runtime's thread, where a second runtime may not be entered): each call's future is polled
/// there to its end, while the connection, the socket's reads and writes, is driven by a
/// thread of its own. That thread ends when the store is dropped (the client's channel to the
/// connection closes).
pub struct PostgresStore {
    client: Client,
    codec: Codec,
    /// Statements prepared on this connection, by their text.
    statements: RefCell<HashMap<String, tokio_postgres::Statement>>,
    /// The state this store last committed for each run it writes to, which the run's next
    /// step is stored as a delta of (`codec::states`); used only where the run's last step, read
    /// under the run's row lock, is that state's.
    written: HashMap<String, Written, foldhash::fast::RandomState>,
    /// The fencing token of each run this store claimed (or created held): its writes to the
    /// run are refused once the row has another (`StoreError::Fenced`).
    fences: HashMap<String, i64, foldhash::fast::RandomState>,
    /// The lease this store's writes are made under (`Store::renew_lease`), once it took one:
    /// each write transaction checks it has not run out.
    lease: Option<String>,
    /// Whom the connection's thread wakes when a notification names them (`wake_on_inbox`).
    wakeups: Wakeups,
    /// Where the connection's thread hands the notifications of `changes::RUNS_CHANNEL` on
    /// (`Store::watch_runs`), once this store listens on it (`listening_for_runs`).
    changes: RunChanges,
    listening_for_runs: bool,
    /// How long a claim or a queued event waits for a row another transaction locked: the
    /// lease's length once this store took one (by then the server has ended the transaction
    /// of a paused host, which had been idle for as long), a second before.
    lock_wait_milliseconds: i64,
}

/// The lease a host listens for on `INBOX_CHANNEL`, and what its notifications wake.
type Wakeups =
    std::sync::Arc<std::sync::Mutex<Option<(String, std::sync::Arc<tokio::sync::Notify>)>>>;

/// The channel on which a host is told that its runs' inboxes, or the outcomes of events it
/// queued, changed: the payload names the host's lease.
pub(super) const INBOX_CHANNEL: &str = "protocol_run_inbox";

impl PostgresStore {
    /// Connects to the database at `url` (`postgres://user@host:port/database`, or the
    /// key=value form) and brings its schema up to date.
    pub fn connect(url: &str) -> Result<PostgresStore, StoreError> {
        let config: tokio_postgres::Config = url.parse().map_err(|error| StoreError::Database {
            database: "PostgreSQL".to_string(),
            operation: "read the database URL".to_string(),
            source: Box::new(error),
        })?;
        let codec = Codec {
            database: location(&config),
        };
        let wakeups = Wakeups::default();
        let changes = RunChanges::default();
        let client =
            start_connection(config, wakeups.clone(), changes.clone()).map_err(|source| {
                StoreError::Database {
                    database: codec.location(),
                    operation: "connect".to_string(),
                    source: session::explained(&*source).into(),
                }
            })?;
        let mut store = PostgresStore {
            client,
            codec,
            statements: RefCell::new(HashMap::new()),
            written: HashMap::default(),
            fences: HashMap::default(),
            lease: None,
            wakeups,
            changes,
            listening_for_runs: false,
            lock_wait_milliseconds: LOCK_WAIT_MILLISECONDS,
        };
        store.migrate()?;
        Ok(store)
    }

    /// The store's statements outside a transaction.
    fn session(&self) -> Session<'_, Client> {
        Session {
            client: &self.client,
            statements: &self.statements,
            codec: &self.codec,
        }
    }

    /// Runs `body` in one transaction, committed if it succeeds; on an error the transaction
    /// is dropped, which rolls back whatever `body` wrote. Under a lease, a connection the
    /// server closed is a lost lease: the server ends a session left in a transaction longer
    /// than the lease (a paused host: `renew_lease`), and a host cut off from its database
    /// cannot tell whether its runs are still its own.
    fn write<T>(
        &mut self,
        operation: &str,
        body: impl FnOnce(&Session<'_, tokio_postgres::Transaction<'_>>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let result = self.transaction(operation, body);
        match (&self.lease, result) {
            (Some(host), Err(_)) if self.client.is_closed() => Err(StoreError::LeaseLost {
                database: self.codec.location(),
                host: host.clone(),
            }),
            (_, result) => result,
        }
    }

    /// `write`, waiting at most `lock_wait_milliseconds` for a row another host's transaction
    /// has locked: a host claiming runs, or queueing an event, is never held up for long by a
    /// paused one.
    fn write_waiting_briefly<T>(
        &mut self,
        operation: &str,
        body: impl FnOnce(&Session<'_, tokio_postgres::Transaction<'_>>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let wait = self.lock_wait_milliseconds;
        self.write(operation, |session| {
            session.execute(
                &|| operation.to_string(),
                &format!("SET LOCAL lock_timeout = {wait}"),
                &[],
            )?;
            body(session)
        })
    }

    fn transaction<T>(
        &mut self,
        operation: &str,
        body: impl FnOnce(&Session<'_, tokio_postgres::Transaction<'_>>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let failed = |error| session::failed(&self.codec, operation, error);
        let transaction = wait(self.client.transaction()).map_err(failed)?;
        let session = Session {
            client: &transaction,
            statements: &self.statements,
            codec: &self.codec,
        };
        if let Some(lease) = &self.lease {
            session.check_lease(lease)?;
        }
        let value = body(&session)?;
        wait(transaction.commit())
            .map_err(|error| session::failed(&self.codec, operation, error))?;
        Ok(value)
    }
}

/// Polls `future` on this thread to its end: a client call waits on the connection's thread.
fn wait<F: std::future::Future>(future: F) -> F::Output {
    futures_executor::block_on(future)
}

/// Connects on a thread of its own, which then drives the connection until the client is
/// dropped; the client, or why it could not connect.
fn start_connection(
    mut config: tokio_postgres::Config,
    wakeups: Wakeups,
    changes: RunChanges,
) -> Result<Client, super::Cause> {
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("postgres-connection".to_string())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(error) => {
                    let _ = sender.send(Err(Box::new(error) as super::Cause));
                    return;
                }
            };
            runtime.block_on(async move {
                match config.connect(NoTls).await {
                    Ok((client, connection)) => {
                        if sender.send(Ok(client)).is_ok() {
                            drive(connection, &wakeups, &changes).await;
                        }
                    }
                    Err(error) => {
                        let _ = sender.send(Err(Box::new(error)));
                    }
                }
            });
        })
        .map_err(|error| Box::new(error) as super::Cause)?;
    receiver
        .recv()
        .map_err(|_| "the connection's thread ended without connecting".into())
        .and_then(|result| result)
}

/// Drives the connection until the client is dropped or the server goes away (the client's
/// calls then fail, each naming its operation), waking the host a notification on
/// `INBOX_CHANNEL` names, and handing those on `changes::RUNS_CHANNEL` to `run_changes`.
async fn drive<S, T>(
    mut connection: tokio_postgres::Connection<S, T>,
    wakeups: &Wakeups,
    run_changes: &RunChanges,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    while let Some(Ok(message)) =
        std::future::poll_fn(|context| connection.poll_message(context)).await
    {
        let tokio_postgres::AsyncMessage::Notification(notification) = message else {
            continue;
        };
        changes::deliver(&notification, run_changes);
        if notification.channel() == INBOX_CHANNEL
            && let Ok(listening) = wakeups.lock()
            && let Some((lease, wake)) = listening.as_ref()
            && notification.payload() == lease
        {
            wake.notify_one();
        }
    }
}

/// The database as messages name it: `postgres://user@host:port/database`, never its password.
fn location(config: &tokio_postgres::Config) -> String {
    let user = config.get_user().unwrap_or("");
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .zip(config.get_ports().iter().chain(std::iter::repeat(&5432)))
        .map(|(host, port)| match host {
            tokio_postgres::config::Host::Tcp(name) => format!("{name}:{port}"),
            tokio_postgres::config::Host::Unix(path) => format!("{}:{port}", path.display()),
        })
        .collect();
    let database = config.get_dbname().unwrap_or(user);
    let at = if user.is_empty() { "" } else { "@" };
    format!("postgres://{user}{at}{}/{database}", hosts.join(","))
}

impl Store for PostgresStore {
    fn location(&self) -> String {
        self.codec.location()
    }

    fn create_run(&mut self, run: &NewRun) -> Result<(), StoreError> {
        self.write(&format!("create run `{}`", run.id), |session| {
            session.insert_run(run)?;
            session.announce_runs(&[&run.id])
        })?;
        if run.holder.is_some() {
            self.fences.insert(run.id.clone(), 0);
        }
        Ok(())
    }

    fn commit_step(
        &mut self,
        run: &str,
        entry: &JournalEntry,
        snapshot: &Snapshot,
        finish: Option<&Finish>,
    ) -> Result<(), StoreError> {
        let step = StepWrite {
            run,
            entry,
            snapshot,
            finish,
            child_states: &[],
        };
        self.commit_planned(
            &format!("commit step {} of run `{run}`", entry.sequence),
            &[Planned::Step(step)],
        )
    }

    fn commit_child_states(&mut self, run: &str, states: &[ChildState]) -> Result<(), StoreError> {
        let encoded = self.codec.encode_child_states(run, states)?;
        self.write(
            &format!("keep the states of the children of run `{run}`"),
            |session| session.insert_child_states(&encoded),
        )
    }

    fn latest_snapshot(&self, run: &str) -> Result<Option<StoredSnapshot>, StoreError> {
        self.session().latest_snapshot(run)
    }

    fn run(&self, run: &str) -> Result<Option<RunRecord>, StoreError> {
        self.session().run(run)
    }

    fn list_runs(&self) -> Result<Vec<RunSummary>, StoreError> {
        self.session().list_runs()
    }

    fn unfinished_runs(
        &self,
        protocol_path: &str,
        count: usize,
    ) -> Result<Vec<RunSummary>, StoreError> {
        self.session().unfinished_runs(protocol_path, count)
    }

    fn journal(&self, run: &str) -> Result<Vec<JournalEntry>, StoreError> {
        self.session().journal(run, i64::MAX, i64::MAX, false)
    }

    fn journal_tail(&self, run: &str, count: usize) -> Result<Vec<JournalEntry>, StoreError> {
        let count = i64::try_from(count).unwrap_or(i64::MAX);
        self.session().journal(run, i64::MAX, count, true)
    }

    fn journal_before(
        &self,
        run: &str,
        before: u64,
        count: usize,
    ) -> Result<Vec<JournalEntry>, StoreError> {
        let before = i64::try_from(before).unwrap_or(i64::MAX);
        let count = i64::try_from(count).unwrap_or(i64::MAX);
        self.session().journal(run, before, count, true)
    }

    fn mark_stopped(&mut self, run: &str, unix_milliseconds: u64) -> Result<(), StoreError> {
        // A stopped run's next step, if any, comes after a resume: its state is not kept here.
        self.written.remove(run);
        let fence = self.fences.get(run).copied();
        self.write(&format!("mark run `{run}` stopped"), |session| {
            session.check_fence(run, fence)?;
            session.update_status(run, RunStatus::Stopped, unix_milliseconds)?;
            session.announce_runs(&[run])
        })?;
        // Released: a resume claims it again.
        self.fences.remove(run);
        Ok(())
    }

    fn mark_running(&mut self, run: &str, unix_milliseconds: u64) -> Result<(), StoreError> {
        let fence = self.fences.get(run).copied();
        self.write(&format!("mark run `{run}` running"), |session| {
            session.check_fence(run, fence)?;
            session.update_status(run, RunStatus::Running, unix_milliseconds)?;
            session.announce_runs(&[run])
        })
    }

    fn finish_run(&mut self, run: &str, finish: &Finish) -> Result<(), StoreError> {
        self.written.remove(run);
        let fence = self.fences.get(run).copied();
        self.write(&format!("finish run `{run}`"), |session| {
            session.check_fence(run, fence)?;
            session.update_finish(run, finish)?;
            session.announce_runs(&[run])
        })?;
        self.fences.remove(run);
        Ok(())
    }

    fn claim_runs(
        &mut self,
        runs: &[String],
        holder: &Holder,
        holds: &mut dyn FnMut(&Holder) -> bool,
    ) -> Result<Vec<Option<Unclaimed>>, StoreError> {
        let encoded = self.codec.encode_holder(holder)?;
        let (others, tokens) = self
            .write_waiting_briefly(&format!("claim {} run(s)", runs.len()), |session| {
                session.claim_runs(runs, holder, &encoded, holds)
            })?;
        self.fences.extend(tokens);
        Ok(others)
    }

    fn release_runs(&mut self, runs: &[String], holder: &Holder) -> Result<(), StoreError> {
        let encoded = self.codec.encode_holder(holder)?;
        self.write(&format!("release {} run(s)", runs.len()), |session| {
            session.release_runs(runs, &encoded)
        })?;
        for run in runs {
            self.fences.remove(run);
        }
        Ok(())
    }

    fn run_summary(&self, run: &str) -> Result<Option<RunSummary>, StoreError> {
        self.session().run_summary(run)
    }

    fn runs_of_protocols(
        &self,
        paths: &[&str],
        after: Option<&RunCursor>,
        count: usize,
    ) -> Result<Vec<RunSummary>, StoreError> {
        self.session().runs_of_protocols(paths, after, count)
    }

    fn directives_before(&self, run: &str, before: u64) -> Result<u64, StoreError> {
        self.session().directives_before(run, before)
    }

    fn snapshot_at(&self, run: &str, step: u64) -> Result<Option<StoredSnapshot>, StoreError> {
        let step = self.codec.integer("a step number", step)?;
        self.session().rebuild(run, Some(step))
    }

    fn enqueue(
        &mut self,
        run: &str,
        kind: EntryKind,
        event: &str,
        data: &serde_json::Value,
        unix_milliseconds: u64,
    ) -> Result<u64, StoreError> {
        self.store_entry(run, kind, event, data, unix_milliseconds)
    }

    fn take_inbox(
        &mut self,
        holder: &Holder,
        scope: crate::store::InboxScope,
        limit: usize,
    ) -> Result<crate::store::TakenInbox, StoreError> {
        self.take_entries(holder, scope, limit)
    }

    fn apply_inbox(
        &mut self,
        run: &str,
        entry: u64,
        step: Option<u64>,
        outcome: &serde_json::Value,
        output: &str,
    ) -> Result<(), StoreError> {
        let write = Write::ApplyInbox {
            run: run.to_string(),
            entry,
            step,
            outcome: outcome.clone(),
            output: output.to_string(),
        };
        self.commit_batch(std::slice::from_ref(&write))
    }

    fn inbox_states(
        &self,
        entries: &[(String, u64)],
    ) -> Result<Vec<crate::store::InboxRecord>, StoreError> {
        self.entry_states(entries)
    }

    fn recent_inbox(
        &self,
        run: &str,
        count: usize,
    ) -> Result<Vec<crate::store::InboxRecord>, StoreError> {
        self.recent_entries(run, count)
    }

    fn wake_on_inbox(
        &mut self,
        host: &str,
    ) -> Result<Option<std::sync::Arc<tokio::sync::Notify>>, StoreError> {
        self.listen(host).map(Some)
    }

    fn protocol_texts(
        &self,
        hashes: &[String],
    ) -> Result<std::collections::HashMap<String, String>, StoreError> {
        self.session().kept_texts(hashes)
    }

    fn renew_lease(&mut self, host: &str, ttl_milliseconds: u64) -> Result<(), StoreError> {
        let ttl = self.codec.integer("a lease's length", ttl_milliseconds)?;
        let renewed = self.session().renew_lease(host, ttl).and_then(|renewed| {
            renewed.then_some(()).ok_or_else(|| StoreError::LeaseLost {
                database: self.codec.location(),
                host: host.to_string(),
            })
        });
        // A session of this host left in a transaction for longer than the lease (the process
        // was paused) is ended by the server, which frees the rows it locked for the hosts
        // taking its runs over.
        if self.lease.is_none() {
            self.session().execute(
                &|| "bound the time a transaction may stay open".to_string(),
                &format!("SET idle_in_transaction_session_timeout = {ttl}"),
                &[],
            )?;
            self.lock_wait_milliseconds = ttl.max(LOCK_WAIT_MILLISECONDS);
        }
        // Lost or not, this store's writes are made under it from now on: after a loss, none.
        self.lease = Some(host.to_string());
        renewed
    }

    fn prune_runs(
        &mut self,
        before_unix_milliseconds: u64,
        statuses: &[RunStatus],
        count: usize,
    ) -> Result<Vec<String>, StoreError> {
        let before = self.codec.integer("a time", before_unix_milliseconds)?;
        let count = i64::try_from(count).unwrap_or(i64::MAX);
        let Some(ended) = super::codec::ended_runs(statuses) else {
            return Ok(Vec::new());
        };
        let pruned = self.write("prune runs", |session| {
            session.prune_runs(&format!("{ended} LIMIT $2 FOR UPDATE"), before, count)
        })?;
        for run in &pruned {
            self.written.remove(run);
        }
        Ok(pruned)
    }

    fn commit_batch(&mut self, writes: &[Write]) -> Result<(), StoreError> {
        self.commit_planned(
            &format!("commit {} writes", writes.len()),
            &Planned::of(writes),
        )
    }

    fn append_telemetry(&mut self, run: &str, lines: &str) -> Result<(), StoreError> {
        self.commit_batch(&[Write::Telemetry {
            run: run.to_string(),
            lines: lines.to_string(),
        }])
    }

    fn telemetry(&self, run: &str) -> Result<Vec<String>, StoreError> {
        self.session().telemetry(run)
    }

    fn save_trace(&mut self, run: &str, trace: &str) -> Result<(), StoreError> {
        self.write(&format!("record the trace of run `{run}`"), |session| {
            session
                .execute(
                    &|| format!("record the trace of run `{run}`"),
                    crate::store::codec::UPDATE_TRACE,
                    &[&run, &trace],
                )
                .map(|_| ())
        })
    }

    fn trace(&self, run: &str) -> Result<Option<String>, StoreError> {
        let session = self.session();
        let row = session.query_optional(
            &|| format!("read the trace of run `{run}`"),
            crate::store::codec::SELECT_TRACE,
            &[&run],
        )?;
        match row {
            Some(row) => session.column::<Option<String>>(&row, 0, run),
            None => Ok(None),
        }
    }

    fn watch_runs(&mut self) -> Result<Option<RunChanges>, StoreError> {
        self.listen_for_runs().map(Some)
    }
}
