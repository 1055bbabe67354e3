//! Every external event is accounted for: random protocols (with `defer:`, timers and effects) driven by random interleavings of events, effect outcomes and virtual time, crashed after a random committed step and resumed; each event line is taken, deferred then taken or discarded, refused, or still waiting in the journaled inbox, and none is applied twice.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use protocol_run::base::durable::{Checkpoint, CheckpointStep, Resume, TimerPolicy};
use protocol_run::base::event::Event;
use protocol_run::base::snapshot::Snapshot;
use protocol_run::effects::mock::Mocks;
use protocol_run::pipeline::actions::{Directive, LogRecord};
use protocol_run::runtime::run::Interpreter;
use protocol_run::runtime::run::admission::{EventOutcome, EventReport};
use protocol_run::runtime::run::driver::{
    DriveOptions, EventSource, InputLineError, Observer, TimeMode, drive_durable,
};

use crate::support::Random;

/// Random cases run; each is a protocol, its input lines and a crash point.
const CASES: u64 = 400;

const EVENTS: [&str; 3] = ["e0", "e1", "e2"];

/// A protocol of three states and a final one: random `on:`, `defer:`, `after` timers and
/// effects (mocked: their outcomes come at once or after their timeout, in virtual time).
/// Events may lead anywhere; there are finitely many of them.
fn protocol(random: &mut Random) -> String {
    let mut text = String::from(
        "id: accounting\nevents: { e0: {}, e1: {}, e2: {} }\ncontext: { taken: [] }\nstates:\n",
    );
    let targets = ["s0", "s1", "s2", "end"];
    for (index, state) in ["s0", "s1", "s2"].into_iter().enumerate() {
        // Timers and effects lead forward only, so every run settles: a state whose timer
        // re-entered it would fire forever on virtual time.
        let forward = &targets[index + 1..];
        let header = text.len();
        text.push_str(&format!("  {state}:\n"));
        let body = text.len();
        let deferred: Vec<&str> = EVENTS
            .iter()
            .copied()
            .filter(|_| random.chance(35))
            .collect();
        if !deferred.is_empty() {
            text.push_str(&format!("    defer: [{}]\n", deferred.join(", ")));
        }
        let effect = random.chance(50);
        if effect {
            text.push_str(&format!(
                "    entry:\n      - {{ id: w{state}, exec: [sleep, \"1\"], timeout: 100ms }}\n"
            ));
        }
        if random.chance(40) {
            let target = forward[random.below(forward.len() as u64) as usize];
            let delay = 50 * (1 + random.below(4));
            text.push_str(&format!(
                "    after: [{{ delay: {delay}ms, target: {target} }}]\n"
            ));
        }
        text.push_str("    on:\n");
        if effect {
            let target = forward[random.below(forward.len() as u64) as usize];
            text.push_str(&format!("      done.exec.w{state}: {target}\n"));
            text.push_str(&format!("      error.exec.w{state}: {target}\n"));
        }
        for event in EVENTS {
            if random.chance(45) {
                let target = targets[random.below(4) as usize];
                text.push_str(&format!(
                    "      {event}:\n        target: {target}\n        actions: [{{ assign: {{ taken: \"taken + [event.data.line]\" }} }}]\n"
                ));
            }
        }
        // No transition: an `on:` with nothing under it is not YAML's empty mapping.
        if text.ends_with("    on:\n") {
            text.truncate(text.len() - "    on:\n".len());
        }
        if text.len() == body {
            text.truncate(header);
            text.push_str(&format!("  {state}: {{}}\n"));
        }
    }
    text.push_str("  end: { type: final, exit_code: 0, output: { taken: \"${taken}\" } }\n");
    text
}

/// Random input lines: events (each carrying its own line number), refused ones, and moves of
/// the virtual clock.
fn input_lines(random: &mut Random) -> Vec<String> {
    let count = 1 + random.below(12);
    (1..=count)
        .map(|line| match random.below(10) {
            0 => "{\"event\":\"zz\"}".to_string(),
            1 => "{\"event\":\"done.exec.ws0\"}".to_string(),
            2 | 3 => format!("{{\"advance\":\"{}ms\"}}", 30 * (1 + random.below(5))),
            _ => {
                let event = EVENTS[random.below(3) as usize];
                format!("{{\"event\":\"{event}\",\"data\":{{\"line\":{line}}}}}")
            }
        })
        .collect()
}

/// What a run told, in order, and what it committed.
#[derive(Default)]
struct Ledger {
    /// (input line, outcome), as told.
    told: Vec<(u64, EventOutcome)>,
    /// Each commit's snapshot, with how many outcomes had been told before it.
    commits: Vec<(CheckpointStep, usize)>,
}

struct Recorder(Rc<RefCell<Ledger>>);

impl Observer for Recorder {
    fn log(&mut self, _record: &LogRecord, _time: &str) {}
    fn directive(&mut self, _directive: &Directive) {}
    fn input_error(&mut self, error: &InputLineError) {
        if error.event.is_some() {
            let told = (error.line as u64, EventOutcome::Refused);
            self.0.borrow_mut().told.push(told);
        }
    }
    fn step(
        &mut self,
        _unix_milliseconds: u64,
        _event: &Event,
        _interpreter: &Interpreter,
        outcome: Option<&EventReport>,
    ) {
        if let Some(report) = outcome {
            self.event_outcome("", report);
        }
    }
    fn event_outcome(&mut self, _time: &str, report: &EventReport) {
        if let Some(line) = report.ticket {
            self.0.borrow_mut().told.push((line, report.outcome));
        }
    }
}

impl Checkpoint for Recorder {
    fn commit(&mut self, step: CheckpointStep) -> Result<(), String> {
        let mut ledger = self.0.borrow_mut();
        let told = ledger.told.len();
        ledger.commits.push((step, told));
        Ok(())
    }
}

/// Drives `machine` over `lines` (from a snapshot when `resume` is given) on virtual time,
/// each effect's outcome scripted by `mocks`; the ledger of what it told and committed.
fn drive(
    machine: &Arc<protocol_run::pipeline::compile::machine::Machine>,
    lines: &[String],
    mocks: &[String],
    resume: Option<&Resume>,
) -> Ledger {
    let ledger = Rc::new(RefCell::new(Ledger::default()));
    let inputs = machine.bind_inputs(&[]).unwrap();
    let mut interpreter = match resume {
        Some(resume) => Interpreter::restore(machine.clone(), inputs, &resume.snapshot).unwrap(),
        None => Interpreter::new(machine.clone(), inputs),
    };
    let options = DriveOptions {
        time_mode: TimeMode::Virtual,
        mocks: Mocks::parse(mocks).unwrap(),
        ..DriveOptions::default()
    };
    let mut observer = Recorder(ledger.clone());
    let mut checkpoint = Recorder(ledger.clone());
    // A livelock or a step limit is an acceptable end of a random protocol.
    let _ = drive_durable(
        &mut interpreter,
        EventSource::Lines(lines.join("\n")),
        options,
        &mut observer,
        Some(&mut checkpoint),
        resume,
    );
    drop((observer, checkpoint));
    Rc::try_unwrap(ledger).ok().unwrap().into_inner()
}

/// Every way the outcomes told of one line break the rule: at most one `deferred`, first; at
/// most one final outcome (taken, discarded, refused), last.
fn well_formed(outcomes: &[EventOutcome]) -> bool {
    use EventOutcome::*;
    matches!(
        outcomes,
        [] | [Taken | Discarded | Refused] | [Deferred] | [Deferred, Taken | Discarded]
    )
}

#[test]
fn every_external_event_is_taken_deferred_discarded_or_refused_across_a_crash() {
    let mut deferred_then_taken = 0;
    let mut crossed_a_crash = 0;
    let mut discarded = 0;
    for seed in 1..=CASES {
        let mut random = Random(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let text = protocol(&mut random);
        let lines = input_lines(&mut random);
        let outcomes = ["ok", "timeout", "error:boom"];
        let script: Vec<&str> = (0..4).map(|_| outcomes[random.below(3) as usize]).collect();
        let mocks: Vec<String> = ["ws0", "ws1", "ws2"]
            .iter()
            .map(|id| format!("{id}={}", script.join(",")))
            .collect();
        let case = format!(
            "seed {seed}\n{text}\nlines:\n{}\nmocks: {mocks:?}",
            lines.join("\n")
        );
        let loaded = protocol_run::pipeline::load::load_text("accounting.yaml", text.clone())
            .unwrap_or_else(|error| panic!("{case}\n{error:?}"));
        let machine = Arc::new(
            protocol_run::pipeline::compile::compile(&loaded)
                .unwrap_or_else(|errors| panic!("{case}\n{errors:?}")),
        );
        let first = drive(&machine, &lines, &mocks, None);
        // The crash: after a random committed step, all that followed it is lost.
        let crash = random.below(first.commits.len() as u64) as usize;
        let (step, _) = &first.commits[crash];
        let told_before = first
            .commits
            .get(crash + 1)
            .map_or(first.told.len(), |(_, told)| *told);
        let mut by_line: BTreeMap<u64, Vec<EventOutcome>> = BTreeMap::new();
        for (line, outcome) in &first.told[..told_before] {
            by_line.entry(*line).or_default().push(*outcome);
        }
        // The sender sends again what it was not told of; what it was told it does not. The
        // numbering stays the original's (a told line becomes blank), as a deferred event's.
        let resent: Vec<String> = lines
            .iter()
            .enumerate()
            .map(
                |(index, line)| match by_line.contains_key(&(index as u64 + 1)) {
                    true => String::new(),
                    false => line.clone(),
                },
            )
            .collect();
        let snapshot: Snapshot = step.snapshot.clone();
        let second = if snapshot.running {
            let resume = Resume {
                snapshot,
                sequence: step.sequence,
                committed_unix_milliseconds: step.unix_milliseconds,
                timers: TimerPolicy::Remaining,
                children_again: Vec::new(),
            };
            crossed_a_crash += 1;
            drive(&machine, &resent, &mocks, Some(&resume))
        } else {
            Ledger::default()
        };
        let still_waiting: Vec<u64> = second
            .commits
            .last()
            .or(first.commits.get(crash))
            .map(|(step, _)| &step.snapshot.deferred)
            .into_iter()
            .flatten()
            .filter_map(|deferred| deferred.ticket)
            .collect();
        for (line, outcome) in &second.told {
            by_line.entry(*line).or_default().push(*outcome);
        }
        for (index, line) in lines.iter().enumerate() {
            let number = index as u64 + 1;
            let told = by_line.get(&number).cloned().unwrap_or_default();
            assert!(well_formed(&told), "line {number}: told {told:?}\n{case}");
            if line.contains("advance") {
                assert!(told.is_empty(), "line {number}: {told:?}\n{case}");
                continue;
            }
            let ended_in_finish = !snapshot_running(&first, &second, crash);
            match told.as_slice() {
                [] => assert!(
                    ended_in_finish || !line.contains("event"),
                    "line {number} was never accounted for\n{case}"
                ),
                [EventOutcome::Deferred] => assert!(
                    still_waiting.contains(&number),
                    "line {number} was deferred and then lost\n{case}"
                ),
                [EventOutcome::Deferred, EventOutcome::Taken] => deferred_then_taken += 1,
                [.., EventOutcome::Discarded] => discarded += 1,
                _ => {}
            }
        }
    }
    // The cases reached what they are for.
    assert!(
        deferred_then_taken > 10,
        "{deferred_then_taken} deferred then taken"
    );
    assert!(
        crossed_a_crash > 20,
        "{crossed_a_crash} resumed after a crash"
    );
    assert!(discarded > 10, "{discarded} discarded");
}

/// Whether the run was still running at the end of what it committed (otherwise lines after
/// its finish were never delivered: a run that ended takes no input).
fn snapshot_running(first: &Ledger, second: &Ledger, crash: usize) -> bool {
    second
        .commits
        .last()
        .or(first.commits.get(crash))
        .is_some_and(|(step, _)| step.snapshot.running)
}
