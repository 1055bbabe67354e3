//! What `run` and `resume` print while a run goes (logs, directives, each events line's outcome on stdout) and write to its telemetry.

use crate::runtime::run::admission::{self, EventOutcome, EventReport, discarded_reason};
use crate::runtime::run::driver::{Observer, TracingObserver};
use crate::runtime::telemetry::{RunLog, entry_line, push_stored_line, read_by_logs_or_stats};
use crate::store::Store;

/// Prints logs and directives, and writes every entry to the run's telemetry. What goes to
/// stdout (directives, each events line's outcome) is held until the steps it tells of are
/// committed (`release`): a reader of stdout is never told of a step the store could lose.
pub(super) struct RunObserver {
    pub(super) printer: TracingObserver,
    pub(super) telemetry: Option<RunLog>,
    /// The telemetry lines recorded since the store was last handed them, of the kinds `logs`
    /// and `stats` read (`read_by_logs_or_stats`): committed with the steps they tell of
    /// (`take_telemetry`), so that they read the whole run from the store whichever hosts
    /// drove it.
    pub(super) stored: String,
    /// The states entered since the last step, start or finish entry, which says them
    /// (`entered`): every entry, a compound state's, an initial child's and a re-entry's
    /// included, which a transition's targets do not tell.
    pub(super) entered: Vec<String>,
    /// The stdout lines not released yet, each ending in a newline.
    pub(super) held: Vec<u8>,
}

impl RunObserver {
    /// Holds one stdout line until the next `release`.
    fn tell(&mut self, line: &serde_json::Value) {
        use std::io::Write;
        let _ = writeln!(self.held, "{line}");
    }

    /// Tells an events line's sender what became of its event: one JSON line on stdout (an
    /// agent reads stdout), and a warning on stderr when it was discarded or refused. Events
    /// that came from no line (a `send`, a child's) are in the telemetry only.
    fn tell_events_line(&mut self, report: &EventReport) {
        let Some(line_number) = report.ticket else {
            return;
        };
        if matches!(
            report.outcome,
            EventOutcome::Discarded | EventOutcome::Refused
        ) {
            eprintln!(
                "warning: events line {line_number}: `{}` {}: {}",
                crate::base::text::escape_controls(&report.event),
                report.outcome.name(),
                crate::base::text::escape_controls(&crate::base::secrets::mask(
                    report.reason.as_deref().unwrap_or_default()
                ))
            );
        }
        let mut line = serde_json::json!({"input_line": line_number});
        if let (Some(object), serde_json::Value::Object(mut fields)) =
            (line.as_object_mut(), report.to_json())
        {
            fields.remove("ticket");
            object.extend(fields);
        }
        self.tell(&crate::base::secrets::mask_json(&line));
    }

    /// Writes `fields` of a `start`, `step`, `resume` or `finish` entry with the states entered
    /// since the last one.
    fn write_step(&mut self, time: &str, kind: &str, mut fields: serde_json::Value) {
        fields["entered"] = std::mem::take(&mut self.entered).into();
        self.write(time, kind, fields);
    }

    fn write(&mut self, time: &str, kind: &str, fields: serde_json::Value) {
        let line = entry_line(&self.printer.run_id, time, kind, fields);
        if read_by_logs_or_stats(kind) {
            push_stored_line(&mut self.stored, &line, &self.printer.run_id);
        }
        if let Some(log) = &mut self.telemetry
            && let Err(error) = log.append(&line)
        {
            eprintln!(
                "warning: telemetry stopped: cannot write {}: {error}",
                log.path().display()
            );
            self.telemetry = None;
        }
    }
}

impl RunObserver {
    /// Commits what the telemetry recorded after the run's last commit (its finish, the effects
    /// a signal interrupted) on its own; a store that refuses it is warned about, since the
    /// run itself is committed already.
    pub(super) fn commit_telemetry(&mut self, store: &mut dyn Store, run_id: &str) {
        let Some(lines) = self.take_telemetry() else {
            return;
        };
        if let Err(error) = store.append_telemetry(run_id, &lines) {
            eprintln!("warning: the end of this run's telemetry is not in the store: {error}");
        }
    }
}

impl Observer for RunObserver {
    fn log(&mut self, record: &crate::pipeline::actions::LogRecord, time: &str) {
        self.printer.log(record, time);
        let fields: serde_json::Map<String, serde_json::Value> = record
            .fields
            .iter()
            .map(|(name, value)| (name.to_string(), value.to_json()))
            .collect();
        let tags: Vec<&str> = record.tags.iter().map(|tag| &**tag).collect();
        let level = format!("{:?}", record.level).to_lowercase();
        let mut entry = serde_json::json!({"level": level, "message": record.message, "tags": tags, "fields": fields});
        if let Some(from) = &record.from {
            entry["from"] = (**from).into();
        }
        self.write(time, "log", entry);
    }

    fn directive(&mut self, directive: &crate::pipeline::actions::Directive) {
        // One whole line per directive, in order with the outcome lines.
        self.tell(&crate::base::secrets::mask_json(&directive.to_json()));
        let time = crate::base::clock::format_rfc3339(crate::base::clock::unix_milliseconds_now());
        self.write(&time, "directive", directive.to_json());
    }

    fn input_error(&mut self, error: &crate::runtime::run::driver::InputLineError) {
        self.printer.input_error(error);
        // An agent reads stdout: every events line gets its outcome there, a refusal too.
        let line = serde_json::json!({
            "input_line": error.line,
            "event": error.event,
            "outcome": "refused",
            "reason": crate::base::secrets::mask(&error.message),
        });
        self.tell(&line);
    }

    fn step(
        &mut self,
        unix_milliseconds: u64,
        event: &crate::base::event::Event,
        interpreter: &crate::runtime::run::Interpreter,
        outcome: Option<&EventReport>,
    ) {
        if let Some(report) = outcome {
            // Spelled out for a reader: the states the event met, and what they take.
            let mut report = report.clone();
            let plainly_discarded = report.reason.as_deref() == Some(admission::DISCARDED);
            if report.outcome == EventOutcome::Discarded
                && plainly_discarded
                && interpreter.is_running()
            {
                let states = interpreter.active_leaves();
                let machine = interpreter.machine();
                let reason = discarded_reason(machine, &event.name, &states);
                report.reason = Some(reason.into());
            }
            self.tell_events_line(&report);
        }
        let fields = crate::runtime::run::driver::step_fields(event, interpreter, outcome);
        let time = crate::base::clock::format_rfc3339(unix_milliseconds);
        self.write_step(&time, "step", fields);
    }

    fn state_entered(&mut self, state: &str) {
        self.entered.push(state.to_string());
    }

    fn awaited(
        &mut self,
        line: usize,
        awaited: &crate::runtime::run::input::Await,
        end: crate::runtime::run::awaiting::AwaitEnd,
    ) {
        let mut report = serde_json::json!({
            "input_line": line,
            "await": awaited.state,
            "outcome": end.name(),
        });
        if end == crate::runtime::run::awaiting::AwaitEnd::TimedOut {
            report["timeout_ms"] = (awaited.timeout.as_millis() as u64).into();
            eprintln!(
                "warning: events line {line}: `{}` was not reached within its timeout; the events go on",
                crate::base::text::escape_controls(&awaited.state)
            );
        }
        self.tell(&report);
        let time = crate::base::clock::format_rfc3339(crate::base::clock::unix_milliseconds_now());
        self.write(&time, "await", report);
    }

    fn event_outcome(&mut self, time: &str, report: &EventReport) {
        self.tell_events_line(report);
        self.write(time, "event", report.to_json());
    }

    fn release(&mut self) {
        use std::io::Write;
        if self.held.is_empty() {
            return;
        }
        // One write for the lines of a batch; a reader gone (a closed pipe) stops nothing here.
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(&self.held);
        let _ = stdout.flush();
        self.held.clear();
    }

    fn take_telemetry(&mut self) -> Option<String> {
        (!self.stored.is_empty()).then(|| std::mem::take(&mut self.stored))
    }

    fn record(&mut self, time: &str, kind: &str, fields: serde_json::Value) {
        match kind {
            "start" | "resume" | "finish" => self.write_step(time, kind, fields),
            _ => self.write(time, kind, fields),
        }
    }
}
