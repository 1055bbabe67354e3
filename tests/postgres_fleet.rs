//! Three `serve` hosts on one PostgreSQL database drive a thousand instances with effects and timers, their events sent to any host: one host is killed with SIGKILL midway and another paused with SIGSTOP past its lease, and still every instance finishes, every event is applied once, and no two hosts ever commit for one run under one fencing token.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};

use crate::support;

/// How many instances the fleet drives.
const INSTANCES: usize = 1_000;

/// Waits for `go`, runs an effect that writes its idempotency key, rests on a timer long
/// enough for a host to die under it, then waits for `finish`.
const FLEET: &str = r#"
id: fleet
states:
  waiting:
    on: { go: working }
  working:
    entry:
      - exec: [sh, -c, 'echo "$PROTOCOL_RUN_IDEMPOTENCY_KEY" >> keys.txt']
        id: op
    on:
      done.exec.op: resting
  resting:
    after:
      - { delay: 3s, target: ready }
  ready:
    on: { finish: done }
  done: { type: final }
"#;

/// A host: the process and its input; its output lines are drained by a thread (a host
/// blocked on a full pipe would stop stepping).
struct Host {
    process: Child,
    input: Option<ChildStdin>,
}

impl Host {
    fn start(directory: &std::path::Path, state: &str, url: &str) -> Host {
        let mut process = Command::new(env!("CARGO_BIN_EXE_protocol-run"))
            .args([
                "serve",
                "fleet.yaml",
                "--state-dir",
                state,
                // Long enough that a host the whole suite's load slows is not taken for dead.
                "--lease",
                "5s",
                "--inbox-poll",
                "50ms",
            ])
            .env("PROTOCOL_RUN_STORE", "postgres")
            .env("PROTOCOL_RUN_DATABASE_URL", url)
            .current_dir(directory)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(directory.join(format!("{state}.stderr"))).unwrap())
            .spawn()
            .unwrap();
        let output = BufReader::new(process.stdout.take().unwrap());
        // Lines that report an error are kept, to say why if the test fails.
        let mut errors = std::fs::File::create(directory.join(format!("{state}.errors"))).unwrap();
        std::thread::spawn(move || {
            for line in output.lines().map_while(Result::ok) {
                if line.contains("\"error\"") {
                    let _ = writeln!(errors, "{line}");
                }
            }
        });
        let input = process.stdin.take();
        Host { process, input }
    }

    fn send(&mut self, line: &str) {
        let input = self.input.as_mut().unwrap();
        writeln!(input, "{line}").unwrap();
    }

    fn signal(&self, signal: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.process.id() as i32), signal)
            .unwrap();
    }

    /// Its lease (`serve@MACHINE:PID:TIME`), as its runs record it for their holder.
    fn lease(&self, client: &mut postgres::Client) -> String {
        let pattern = format!("serve@%:{}:%", self.process.id());
        let row = client
            .query_one("SELECT id FROM hosts WHERE id LIKE $1", &[&pattern])
            .unwrap();
        row.get(0)
    }
}

/// A count the database gives.
fn count(client: &mut postgres::Client, sql: &str) -> i64 {
    client.query_one(sql, &[]).unwrap().get(0)
}

/// Waits until `sql` counts `expected` (the tables may not be there yet: the hosts create
/// them as they connect).
fn wait_for(client: &mut postgres::Client, what: &str, sql: &str, expected: i64) {
    support::eventually(what, || {
        let counted: i64 = client.query_one(sql, &[]).ok()?.get(0);
        (counted == expected).then_some(())
    });
}

/// A deterministic spread of events over hosts.
struct Spread(u64);

impl Spread {
    fn next(&mut self, hosts: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % hosts as u64) as usize
    }
}

#[test]
fn three_hosts_drive_a_thousand_instances_through_a_kill_and_a_pause() {
    let test = "postgres_fleet::three_hosts_drive_a_thousand_instances_through_a_kill_and_a_pause";
    let Some(database) = support::postgres::database(test) else {
        return;
    };
    let directory = support::temporary_directory("postgres-fleet", "three");
    std::fs::write(directory.join("fleet.yaml"), FLEET).unwrap();
    let mut hosts: Vec<Host> = ["a", "b", "c"]
        .iter()
        .map(|state| Host::start(&directory, state, database.url()))
        .collect();
    let mut client = database.connect();
    let total = INSTANCES as i64;
    let instance = |index: usize| format!("i{index}");
    // 1. Each host creates a third of the instances.
    for index in 0..INSTANCES {
        hosts[index % 3].send(&format!("{{\"instance\": \"{}\"}}", instance(index)));
    }
    wait_for(
        &mut client,
        "every instance started",
        "SELECT count(DISTINCT run_id) FROM journal WHERE step = 0",
        total,
    );
    // 2. `go` to any host: most are queued for the instance's holder.
    let mut spread = Spread(0x2545_f491_4f6c_dd1d);
    for index in 0..INSTANCES {
        let host = spread.next(3);
        hosts[host].send(&format!(
            "{{\"instance\": \"{}\", \"event\": \"go\"}}",
            instance(index)
        ));
    }
    wait_for(
        &mut client,
        "every instance ran its effect",
        "SELECT count(DISTINCT run_id) FROM journal WHERE event_name = 'done.exec.op'",
        total,
    );
    // 3. The third host dies with its instances' timers pending: the others take them over
    // as its lease runs out, and the timers keep their deadlines.
    hosts[2].process.kill().unwrap();
    hosts[2].process.wait().unwrap();
    wait_for(
        &mut client,
        "every instance's timer fired",
        "SELECT count(DISTINCT run_id) FROM journal WHERE event_name = 'after.resting.0'",
        total,
    );
    // 4. Half the `finish` events to the two hosts left, applied.
    let half = INSTANCES / 2;
    for index in 0..half {
        let host = spread.next(2);
        hosts[host].send(&format!(
            "{{\"instance\": \"{}\", \"event\": \"finish\"}}",
            instance(index)
        ));
    }
    wait_for(
        &mut client,
        "the first half finished",
        "SELECT count(*) FROM runs WHERE status = 'finished'",
        half as i64,
    );
    // 5. The second host is paused past its lease: the first takes its instances over.
    let paused_lease = hosts[1].lease(&mut client);
    hosts[1].signal(nix::sys::signal::Signal::SIGSTOP);
    let held_by_paused = format!(
        "SELECT count(*) FROM runs WHERE status <> 'finished' AND holder LIKE '%{paused_lease}%'"
    );
    wait_for(
        &mut client,
        "the paused host's instances taken over",
        &held_by_paused,
        0,
    );
    for index in half..INSTANCES {
        hosts[0].send(&format!(
            "{{\"instance\": \"{}\", \"event\": \"finish\"}}",
            instance(index)
        ));
    }
    wait_for(
        &mut client,
        "every instance finished",
        "SELECT count(*) FROM runs WHERE status = 'finished' AND final_state = 'done'",
        total,
    );
    let journal_rows = count(&mut client, "SELECT count(*) FROM journal");
    // 6. The paused host comes back: it finds its lease lost and ends, writing nothing.
    hosts[1].signal(nix::sys::signal::Signal::SIGCONT);
    hosts[1].input = None;
    let paused = hosts[1].process.wait().unwrap();
    assert_eq!(paused.code(), Some(75));
    hosts[0].input = None;
    let stderr = |state: &str| std::fs::read_to_string(directory.join(format!("{state}.stderr")));
    assert_eq!(
        hosts[0].process.wait().unwrap().code(),
        Some(0),
        "{:?}",
        stderr("a")
    );
    assert_eq!(
        count(&mut client, "SELECT count(*) FROM journal"),
        journal_rows
    );
    // Every event applied exactly once, by the journal.
    assert_eq!(
        count(
            &mut client,
            "SELECT count(*) FROM (SELECT run_id, event_name FROM journal WHERE event_name IN \
             ('go', 'finish') GROUP BY run_id, event_name HAVING count(*) <> 1) AS twice"
        ),
        0
    );
    assert_eq!(
        count(
            &mut client,
            "SELECT count(*) FROM journal WHERE event_name IN ('go', 'finish')"
        ),
        2 * total
    );
    // Every queued event applied, by the step that consumed it, whose event it is.
    let queued = count(&mut client, "SELECT count(*) FROM inbox");
    assert!(queued > 0, "no event was queued for another host");
    let applied = count(
        &mut client,
        "SELECT count(*) FROM inbox JOIN journal ON journal.run_id = inbox.run_id AND \
         journal.step = inbox.step AND journal.event_name = inbox.event_name WHERE \
         inbox.status = 'applied'",
    );
    if applied != queued {
        // Which ones, and what the journal holds at their step, for whoever reads the failure.
        let rows = client
            .query(
                "SELECT inbox.run_id, inbox.entry, inbox.event_name, inbox.status, inbox.tries, \
                 inbox.step, inbox.outcome, journal.event_name FROM inbox LEFT JOIN journal ON \
                 journal.run_id = inbox.run_id AND journal.step = inbox.step WHERE inbox.status \
                 <> 'applied' OR journal.event_name IS DISTINCT FROM inbox.event_name",
                &[],
            )
            .unwrap();
        let rows: Vec<String> = rows
            .iter()
            .map(|row| {
                format!(
                    "{} #{} {} {} tries {} step {:?} outcome {:?}, journal's event there {:?}",
                    row.get::<_, String>(0),
                    row.get::<_, i64>(1),
                    row.get::<_, String>(2),
                    row.get::<_, String>(3),
                    row.get::<_, i64>(4),
                    row.get::<_, Option<i64>>(5),
                    row.get::<_, Option<String>>(6),
                    row.get::<_, Option<String>>(7),
                )
            })
            .collect();
        panic!(
            "{applied} of {queued} queued events applied by their own step:\n{}",
            rows.join("\n")
        );
    }
    // Never two hosts committing for one run under one token.
    assert_eq!(
        count(
            &mut client,
            "SELECT count(*) FROM (SELECT run_id, fencing FROM journal GROUP BY run_id, \
             fencing HAVING count(DISTINCT writer) > 1 OR count(writer) < count(*)) AS shared"
        ),
        0
    );
    // The runs of the killed and the paused hosts went on under new tokens.
    assert!(
        count(
            &mut client,
            "SELECT count(*) FROM journal WHERE fencing > 0"
        ) > 0
    );
    // One effect an instance, each with its own key, none used for another attempt.
    let keys = std::fs::read_to_string(directory.join("keys.txt")).unwrap();
    let mut keys: Vec<&str> = keys.lines().collect();
    keys.sort_unstable();
    let before = keys.len();
    keys.dedup();
    assert_eq!((before, keys.len()), (INSTANCES, INSTANCES));
    assert!(keys.iter().all(|key| key.ends_with(":1")), "{keys:?}");
    let _ = std::fs::remove_dir_all(&directory);
}
