//! Taking input lines: parsing a line, refusing a bad one or its event, and creating the instance a line names.

use crate::base::event::{Event, Origin};
use crate::base::value::Value;
use crate::runtime::run::Interpreter;
use crate::runtime::run::admission::EventReport;
use crate::runtime::run::driver::{DriverState, EffectSink};
use crate::store::{NewRun, RunStatus, Write};

use super::commit::write_line;
use super::{Fleet, Member};

impl Fleet {
    /// Warns on stderr that the line being handled was not taken, and why, naming it as its
    /// sender knows it: `input line N`, or what the front end that sent it calls it.
    fn warn_line_skipped(&self, why: &str) {
        let why = crate::base::secrets::mask(why);
        match self
            .line_origin
            .zip(self.line_names.as_ref())
            .and_then(|(origin, names)| names(origin))
        {
            Some(name) => eprintln!("warning: {name}: {why}; not taken"),
            None => eprintln!(
                "warning: input line {}: {why}; line skipped",
                self.line_number
            ),
        }
    }

    pub(super) fn line_problem(&mut self, message: &str) {
        self.warn_line_skipped(message);
        if let (Some(origin), Some(reply)) = (self.line_origin, &mut self.problem_reply) {
            reply(origin, message);
        }
    }

    /// One input line: `{"instance": ID, "inputs": {...}, "event": NAME, "data": {...}}`, where
    /// `inputs` counts only when the line creates the instance and `event` is optional. A bad
    /// line is reported with its number and skipped.
    pub fn accept_line(&mut self, line: &str) {
        if line.bytes().all(|byte| byte.is_ascii_whitespace()) {
            return;
        }
        let parsed: ServeLine = match serde_json::from_str(line) {
            Ok(parsed) => parsed,
            Err(error) if error.is_syntax() || error.is_eof() => {
                return self.line_problem(&format!("not JSON: {error}"));
            }
            Err(error) => {
                return self.line_problem(&format!(
                    "{error}; a line is an object like {{\"instance\": \"task-1\", \"event\": \
                     \"go\"}} with optional `inputs` and `data`"
                ));
            }
        };
        let Some(name) = parsed.instance.filter(|name| !name.is_empty()) else {
            return self.line_problem("missing `instance` (a non-empty string)");
        };
        if let Some(state) = parsed.await_state {
            if parsed.event.is_some() || parsed.inputs.is_some() || parsed.data.is_some() {
                return self.line_problem(
                    "an `await` line has `instance`, `await` and optional `timeout`, nothing else",
                );
            }
            return self.accept_await(&name, &state, parsed.timeout.as_deref());
        }
        // Refused before anything happens, even the instance's creation.
        let data = parsed.data.as_ref().unwrap_or(&serde_json::Value::Null);
        // A live instance may run a pinned version, whose events are its own.
        let machine = self.machine_of(&name);
        if let Some(event) = parsed.event.as_deref()
            && let Err(refusal) = crate::runtime::run::admission::admit_json(&machine, event, data)
        {
            return self.refuse_event(&name, event, &refusal);
        }
        let slot = match self.by_name.get(&*name) {
            Some(slot) => *slot,
            None => match self.create(&name, parsed.inputs.as_ref()) {
                Ok(slot) => slot,
                Err(NotCreated::Refused(message)) => return self.line_problem(&message),
                Err(NotCreated::HeldElsewhere) => match parsed.event.as_deref() {
                    Some(event) if parsed.inputs.is_none() => {
                        return self.queue_event(&name, event, data);
                    }
                    _ => {
                        return self.line_problem(&format!(
                            "instance `{}` exists, held by another host: a line for it carries \
                             an event, which is queued for that host, and no `inputs` (taken \
                             only by the line that creates an instance)",
                            &*name
                        ));
                    }
                },
            },
        };
        let Some(event) = parsed.event else {
            return;
        };
        let event = Event::named(
            &machine,
            &event,
            parsed.data.as_ref().map_or(Value::Null, Value::from_json),
            Origin::External,
        );
        let ticket = Some(self.line_number as u64);
        self.step_as(slot, Some(&name), |session| session.offer(event, ticket));
    }

    /// An event the line may not send: said on the output (`outcome: refused`, its reason),
    /// warned on stderr, and answered to the client the line came from.
    fn refuse_event(&mut self, instance: &str, event: &str, refusal: &str) {
        let report = EventReport {
            event: event.into(),
            outcome: crate::runtime::run::admission::EventOutcome::Refused,
            reason: Some(refusal.to_string().into()),
            ticket: Some(self.line_number as u64),
            waited: false,
        };
        let mut line = serde_json::json!({"instance": instance});
        if let (Some(object), serde_json::Value::Object(fields)) =
            (line.as_object_mut(), report.to_json())
        {
            object.extend(fields);
        }
        write_line(&mut self.output, &crate::base::secrets::mask_json(&line));
        match (self.line_origin, self.outcome_reply.is_some()) {
            (Some(origin), true) => {
                self.warn_line_skipped(refusal);
                if let Some(reply) = &mut self.outcome_reply {
                    reply(origin, &report);
                }
            }
            _ => self.line_problem(refusal),
        }
    }

    /// Starts a new instance with the inputs of its first line; with a shared store's inboxes,
    /// an instance recorded unfinished is another host's (`inbox`), whose events are queued.
    fn create(
        &mut self,
        name: &str,
        inputs: Option<&serde_json::Value>,
    ) -> Result<usize, NotCreated> {
        let run_id = format!("{}{name}", self.prefix);
        if self.finished.contains(name) {
            return Err(NotCreated::Refused(format!(
                "instance `{name}` has finished"
            )));
        }
        if name.contains('/') {
            // `/` separates a run from its child protocols' runs (`<run>/<invoke id>`).
            return Err(NotCreated::Refused(format!(
                "instance `{name}` not created: an instance name may not contain `/`, which \
                 names a run's child protocols"
            )));
        }
        if let Some(recording) = &self.recording
            && let Some(run) = recording
                .store
                .run_summary(&run_id)
                .map_err(|error| NotCreated::Refused(error.to_string()))?
        {
            return Err(match run.status {
                RunStatus::Finished => {
                    NotCreated::Refused(format!("instance `{name}` has finished"))
                }
                _ if self.inboxes.is_some() => NotCreated::HeldElsewhere,
                _ => {
                    NotCreated::Refused(format!("instance `{name}` exists but is not running here"))
                }
            });
        }
        if self.by_name.len() >= self.max_instances {
            return Err(NotCreated::Refused(format!(
                "instance `{name}` not created: {} instances are alive, the limit; raise it with \
                 --max-instances",
                self.max_instances
            )));
        }
        let supplied: Vec<(String, serde_json::Value)> = match inputs {
            None => Vec::new(),
            Some(serde_json::Value::Object(inputs)) => inputs
                .iter()
                .map(|(name, value)| (name.clone(), value.clone()))
                .collect(),
            Some(other) => {
                return Err(NotCreated::Refused(format!(
                    "`inputs` must be an object, not {other}"
                )));
            }
        };
        let supplied = self
            .pinned
            .with_client_inputs(&supplied)
            .map_err(|message| format!("instance `{name}`: {message}"))?;
        let values = self
            .machine
            .bind_input_values(&supplied)
            .map_err(|errors| {
                let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
                format!("instance `{name}`: {}", messages.join("; "))
            })?;
        if let Some(recording) = &self.recording {
            self.pending.push(Write::CreateRun(NewRun {
                id: run_id,
                protocol_path: recording.protocol_path.clone(),
                protocol_hash: recording.protocol_hash.clone(),
                protocol_text: Some(recording.protocol_text.clone()),
                read_texts: recording.read_texts.clone(),
                inputs: self.machine.recorded_inputs(&values),
                started_unix_milliseconds: crate::base::clock::unix_milliseconds_now(),
                grants: recording.grants.clone(),
                origin: recording.origin,
                holder: Some(recording.holder.clone()),
                forked_from: None,
            }));
        }
        let trace = self.begin_new_trace(name);
        let slot = self.add_member(name, Interpreter::new(self.machine.clone(), values));
        self.keep_trace(slot, trace);
        self.step(slot, |session| session.start());
        Ok(slot)
    }

    pub(super) fn add_member(&mut self, name: &str, interpreter: Interpreter) -> usize {
        let slot = self.members.len();
        let sink = EffectSink::Shared(self.effects_sender.clone(), slot);
        self.members.push(Some(Box::new(Member {
            name: name.into(),
            interpreter: interpreter.with_limits(self.limits),
            state: {
                let mut state = DriverState::reporting_to(Some(sink));
                state.set_run_id(&format!("{}{name}", self.prefix));
                state
            },
            armed: None,
        })));
        self.by_name.insert(name.into(), slot);
        slot
    }
}

/// Why a line did not create its instance.
enum NotCreated {
    /// Said to the line's sender.
    Refused(String),
    /// An unfinished run of another host (with the inboxes of a shared store): the line's
    /// event goes to its inbox.
    HeldElsewhere,
}

impl From<String> for NotCreated {
    fn from(message: String) -> NotCreated {
        NotCreated::Refused(message)
    }
}

/// An input line as `serve` reads it; the strings borrow from the line when they can.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ServeLine<'a> {
    #[serde(borrow)]
    instance: Option<LineText<'a>>,
    inputs: Option<serde_json::Value>,
    #[serde(borrow)]
    event: Option<LineText<'a>>,
    data: Option<serde_json::Value>,
    /// `await`: a state the input waits for, and its `timeout` (a duration such as "30s").
    #[serde(rename = "await", borrow)]
    await_state: Option<LineText<'a>>,
    #[serde(borrow)]
    timeout: Option<LineText<'a>>,
}

/// A string of an input line, borrowed unless it has escapes. (Serde borrows a `Cow` only as
/// a field's own type, not inside an `Option`: this newtype gives it that position.)
#[derive(serde::Deserialize)]
struct LineText<'a>(#[serde(borrow)] std::borrow::Cow<'a, str>);

impl std::ops::Deref for LineText<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}
