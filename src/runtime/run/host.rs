//! The host an instance's algorithm talks to: its timers, its effects and children (started, owned, cancelled, reported), its logs and directives.

use super::driver::Observer;
use crate::base::clock;
use crate::base::durable::{CheckpointStep, ChildChange, ChildState};
use crate::base::event::{Event, Origin};
use crate::base::model::action::LogLevel;
use crate::base::snapshot::InFlightEffect;
use crate::base::value::Value;
use crate::effects::mock::Mocks;
use crate::effects::{EffectRequest, run_effect, run_with_plan};
use crate::pipeline::actions::{Directive, Host, LogRecord, SendRequest};
use crate::pipeline::compile::machine::Machine;
use std::collections::VecDeque;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Timers are ordered by deadline, then by the order they were set.
type TimerKey = (Instant, u64);

/// A delayed send waiting for its deadline: its id (for `cancel`) and the event.
/// A delayed send: its id, its event, its whole delay, and whether it is a deadline.
type PendingSend = (Option<Arc<str>>, Event, u64, bool);

/// What a running effect sends back: telemetry lines while it retries, then its outcome.
pub(crate) enum EffectMessage {
    Log(LogRecord),
    Directive(Directive),
    /// An effect's outcome, for its invocation; dropped if that invocation was cancelled.
    Outcome(u64, Event),
    /// A child protocol's outcome, and how it ended for its row; dropped if the invoke was
    /// cancelled meanwhile.
    InvokeOutcome(Arc<str>, Event, ChildChange),
    /// A child protocol that was not started (its tree has `--max-children` alive): its
    /// `error.invoke` event.
    InvokeRefused(Arc<str>, Event),
    /// An event a child protocol sent its parent (`send ... to: parent`), with its invoke id.
    ChildEvent(Arc<str>, Event),
    /// A durable parent's child committed a step.
    ChildStep(Arc<str>, Box<CheckpointStep>),
    /// An effect's retry plan begins another attempt.
    Progress(u64, crate::effects::PlanProgress),
    /// A map's completion event, for its invocation; dropped if the map was cancelled.
    MapCompleted(u64, Event),
    /// What a child protocol (its path below this run) did inside, for a traced run.
    ChildTrace(Arc<str>, super::driver::ChildNote),
}

/// Where running effects report: the session's own channel, or a host's channel shared by all
/// its instances, each message tagged with the instance it is for.
#[derive(Clone)]
pub(crate) enum EffectSink {
    Own(mpsc::UnboundedSender<EffectMessage>),
    Shared(mpsc::UnboundedSender<(usize, EffectMessage)>, usize),
}

impl EffectSink {
    /// Hands a message over; `false` when nobody listens any more (the run ended).
    pub(super) fn send(&self, message: EffectMessage) -> bool {
        match self {
            EffectSink::Own(sender) => sender.send(message).is_ok(),
            EffectSink::Shared(sender, instance) => sender.send((*instance, message)).is_ok(),
        }
    }
}

/// What a driven instance keeps between its steps besides its interpreter: pending timers,
/// running effects, its clock and step count. A host of many instances keeps one per idle
/// instance, and no task or channel with it.
pub struct DriverState {
    /// Pending delayed sends, sorted by (deadline, sequence): a deque rather than a tree, so a
    /// `serve` host's idle instances with one timer each keep one small allocation apiece.
    pub(super) timers: VecDeque<(TimerKey, PendingSend)>,
    pub(super) sequence: u64,
    pub(super) started_at: Instant,
    pub(super) started_unix_milliseconds: u64,
    /// Where running effects report their outcome events. A session's own channel is made when
    /// the first effect starts (its receiving end then waits in `new_receiver` for the session),
    /// since most instances of a `serve` host never start one.
    pub(super) completions: Option<EffectSink>,
    /// Effects and child protocols started whose outcome has not arrived yet.
    pub(super) running: super::running::Running,
    /// The sequence number of the next committed step.
    pub(super) step: u64,
    /// Set when a timer is added, cancelled or fired: a host that keeps its own index of
    /// deadlines reads the deque only then (reading it for every event costs a cache miss).
    pub(super) timers_changed: bool,
    /// What few instances need, made when first needed: boxed, so that the many that never
    /// defer an event or outlive an effect carry one pointer for it.
    pub(super) extras: Option<Box<Extras>>,
}

/// The events an active state defers, waiting in arrival order, and those the end of the run
/// discarded while they waited (for the finished line); what effects that ended after the
/// final state did.
#[derive(Debug, Default)]
pub(super) struct Extras {
    pub(super) waiting: Vec<Waiting>,
    pub(super) discarded: Vec<serde_json::Value>,
    /// The discards of the step being taken, told once it is committed.
    pub(super) untold: Vec<crate::runtime::run::admission::EventReport>,
    /// Outcomes of effects that ended after the run reached its final state (telemetry
    /// summaries with their `outcome`), for the `finished` line.
    pub(super) after_finish: Vec<serde_json::Value>,
    /// The live children of the run tree this instance belongs to: made by the tree's root
    /// when it starts its first child, handed down to each child.
    pub(super) tree: Option<Arc<super::tree::TreeChildren>>,
    /// Children refused whose `error.invoke` is on its way: the run waits for it.
    pub(super) refused_children: usize,
    /// This instance's share of its tree's data (`tree`), as last reported.
    pub(super) tree_bytes: usize,
    /// The run's id in its store (a child's: `<run>/<path>`), which its effects' idempotency
    /// keys start with; `None` where the driver gave none (an embedded interpreter).
    pub(super) run_id: Option<Arc<str>>,
}

impl Drop for Extras {
    /// An instance that ends gives back its share of its tree's data.
    fn drop(&mut self) {
        if let Some(tree) = &self.tree {
            tree.hold(self.tree_bytes, 0);
        }
    }
}

/// One deferred event, with its sender's number for it.
#[derive(Debug, Clone)]
pub(super) struct Waiting {
    pub(super) event: Event,
    pub(super) ticket: Option<u64>,
}

impl Default for DriverState {
    fn default() -> DriverState {
        DriverState::new()
    }
}

impl DriverState {
    /// What few instances need, made now if it was not.
    pub(super) fn extras_mut(&mut self) -> &mut Extras {
        self.extras.get_or_insert_default()
    }

    /// The live children of this instance's run tree: its own count if it is the tree's root
    /// and has started none yet.
    pub(super) fn tree(&mut self) -> Arc<super::tree::TreeChildren> {
        self.extras_mut().tree.get_or_insert_default().clone()
    }

    /// Names the run this instance is (its id in its store), for its effects' idempotency keys.
    pub fn set_run_id(&mut self, run_id: &str) {
        self.extras_mut().run_id = Some(Arc::from(run_id));
    }

    /// The run this instance is, when its driver named it.
    pub(super) fn run_id(&self) -> Option<&Arc<str>> {
        self.extras
            .as_ref()
            .and_then(|extras| extras.run_id.as_ref())
    }

    /// A state whose clock starts now; its effects report on a channel of its own.
    pub fn new() -> DriverState {
        DriverState::reporting_to(None)
    }

    /// A state whose effects report to `completions` (a host's shared channel), when given.
    pub(crate) fn reporting_to(completions: Option<EffectSink>) -> DriverState {
        DriverState {
            timers: VecDeque::new(),
            sequence: 0,
            started_at: Instant::now(),
            started_unix_milliseconds: clock::unix_milliseconds_now(),
            completions,
            running: super::running::Running::default(),
            step: 0,
            timers_changed: false,
            extras: None,
        }
    }

    /// Unix milliseconds on this instance's clock (virtual under virtual time).
    pub(super) fn now_milliseconds(&self) -> u64 {
        self.unix_milliseconds_at(Instant::now())
    }

    /// The Unix millisecond `instant` falls in on this instance's clock. A timer's deadline is
    /// recorded this way, in one step from the clock's start: now's millisecond plus the
    /// whole milliseconds left would drop up to one (each part rounded down), and show a
    /// deadline due a millisecond before the instant it was given.
    pub(super) fn unix_milliseconds_at(&self, instant: Instant) -> u64 {
        let elapsed = instant.saturating_duration_since(self.started_at);
        self.started_unix_milliseconds + elapsed.as_millis() as u64
    }

    /// The instant of Unix millisecond `unix_milliseconds` on this instance's clock (its start,
    /// if that is earlier): `unix_milliseconds_at` of it gives the millisecond back.
    pub(super) fn instant_at(&self, unix_milliseconds: u64) -> Instant {
        let after_start = unix_milliseconds.saturating_sub(self.started_unix_milliseconds);
        self.started_at + std::time::Duration::from_millis(after_start)
    }

    /// The earliest pending timer.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.timers.front().map(|((deadline, _), _)| *deadline)
    }

    /// Whether a timer was added, cancelled or fired since the last call.
    pub fn take_timers_changed(&mut self) -> bool {
        std::mem::take(&mut self.timers_changed)
    }

    /// Whether nothing can happen to the instance unless an event arrives: no timer pending,
    /// no effect or child protocol running (or refused, its outcome not delivered yet).
    pub fn is_idle(&self) -> bool {
        self.timers.is_empty() && !self.has_running()
    }

    /// Whether effects or child protocols are running, or a refused child's outcome is on its
    /// way.
    pub fn has_running(&self) -> bool {
        !self.running.is_empty() || self.refused_children() > 0
    }

    /// Children refused (`--max-children`) whose `error.invoke` is not delivered yet.
    fn refused_children(&self) -> usize {
        self.extras
            .as_deref()
            .map_or(0, |extras| extras.refused_children)
    }

    /// What the effects that ended after the run's final state did (see `RunReport::effects`).
    pub fn effects_after_finish(&self) -> &[serde_json::Value] {
        self.extras
            .as_deref()
            .map_or(&[], |extras| &extras.after_finish)
    }

    /// The deferred events the end of the run discarded (see `RunReport::discarded`).
    pub fn discarded_at_finish(&self) -> &[serde_json::Value] {
        self.extras
            .as_deref()
            .map_or(&[], |extras| &extras.discarded)
    }

    /// The events waiting in the inbox, in arrival order.
    pub(super) fn waiting(&self) -> &[Waiting] {
        self.extras.as_deref().map_or(&[], |extras| &extras.waiting)
    }

    /// The bytes of data the run holds in events: pending delayed sends and deferred events.
    pub(super) fn held_event_bytes(&self) -> usize {
        self.timers
            .iter()
            .map(|(_, (_, event, ..))| event.data.size_in_bytes())
            .chain(
                self.waiting()
                    .iter()
                    .map(|waiting| waiting.event.data.size_in_bytes()),
            )
            .fold(0, usize::saturating_add)
    }
}

/// The host the algorithm talks to: external queue, timers, log output.
pub(super) struct DriverHost<'a> {
    pub(super) external_queue: VecDeque<Event>,
    pub(super) state: &'a mut DriverState,
    pub(super) observer: &'a mut dyn Observer,
    pub(super) machine: Arc<Machine>,
    /// The receiving end of a channel made by `completions`, until the session takes it.
    pub(super) new_receiver: Option<mpsc::UnboundedReceiver<EffectMessage>>,
    pub(super) mocks: Arc<std::sync::Mutex<Mocks>>,
    /// Transitions taken in the current macrostep, for checkpoints (durable runs only).
    pub(super) taken: Vec<String>,
    /// What the actions of the current macrostep did (logs, directives, effects started), for
    /// its journal entry (durable runs only).
    pub(super) step_actions: Vec<serde_json::Value>,
    /// Whether steps are recorded for a checkpoint.
    pub(super) recording: bool,
    /// What became of the run's children since the last commit, theirs included, for their
    /// rows (durable runs only).
    pub(super) child_changes: Vec<ChildChange>,
    /// The states of the children that stepped since the last commit, theirs included, for
    /// their rows (durable runs only).
    pub(super) child_states: Vec<ChildState>,
    /// For a child protocol: where `send ... to: parent` goes, and its invoke id.
    pub(super) parent: Option<(EffectSink, Arc<str>)>,
    /// Something durable happened between macrosteps (a child's step, a retry plan's next
    /// attempt): the run commits a step for it.
    pub(super) commit_due: bool,
    /// The run's `--max-microsteps`, which its child protocols run under too.
    pub(super) max_microsteps: usize,
    /// The run tree's `--max-children`, which its child protocols share.
    pub(super) max_children: usize,
    /// The run tree's `--max-tree-bytes`, which its child protocols share.
    pub(super) max_tree_bytes: usize,
}

impl DriverHost<'_> {
    /// A child's outcome event (it ended, or was refused): a map's item is its map's to keep;
    /// an invoke's goes on the external queue, recorded.
    fn deliver_child_outcome(&mut self, id: &str, event: Event, running: bool) {
        if running && self.map_child_finished(id, &event) {
            return;
        }
        let time = self.now_text();
        let fields = serde_json::json!({"id": id, "event": &*event.name});
        self.observer.record(&time, "invoke", fields);
        self.external_queue.push_back(event);
    }

    /// Records what became of a child for its row, committed with the next step (at once when
    /// no macrostep is under way): durable runs only.
    pub(super) fn child_changed(&mut self, change: ChildChange) {
        if self.recording {
            self.child_changes.push(change);
            self.commit_due = true;
        }
    }

    /// An effect beyond the run's capabilities: logged, and answered with
    /// `error.permission.<id>` instead of running.
    fn refuse(&mut self, request: &EffectRequest, denied: &crate::effects::capabilities::Denied) {
        let data = self.refusal(request, denied);
        let event = Event::named(
            &self.machine,
            &format!("error.permission.{}", request.id),
            Value::Map(Arc::new(data)),
            Origin::Outcome,
        );
        self.external_queue.push_back(event);
    }

    /// Logs a refused effect and gives the data its failure carries.
    pub(super) fn refusal(
        &mut self,
        request: &EffectRequest,
        denied: &crate::effects::capabilities::Denied,
    ) -> indexmap::IndexMap<Arc<str>, Value> {
        let message = format!("{}: {denied}", request.id);
        let record = LogRecord {
            level: crate::base::model::action::LogLevel::Warn,
            message: message.clone(),
            tags: Arc::from([Arc::from("permission_denied")]),
            fields: vec![
                (Arc::from("id"), Value::String(request.id.clone())),
                (Arc::from("capability"), Value::string(denied.capability)),
                (Arc::from("subject"), Value::string(denied.subject.as_str())),
            ],
            from: None,
        };
        self.log(record);
        let mut data = indexmap::IndexMap::new();
        data.insert(Arc::from("id"), Value::String(request.id.clone()));
        data.insert(Arc::from("capability"), Value::string(denied.capability));
        data.insert(Arc::from("subject"), Value::string(denied.subject.as_str()));
        data.insert(Arc::from("message"), Value::string(message));
        data
    }

    /// Starts an effect; a resumed one goes on from the retry plan's recorded `from`.
    pub(super) fn start_effect_from(
        &mut self,
        request: EffectRequest,
        from: Option<crate::effects::PlanProgress>,
    ) {
        if let Err(refused) = self.spawn_effect(request, from) {
            let (request, denied) = *refused;
            self.refuse(&request, &denied);
        }
    }

    /// Admits an effect and starts its task: its invocation number, or why it was refused.
    pub(super) fn spawn_effect(
        &mut self,
        mut request: EffectRequest,
        from: Option<crate::effects::PlanProgress>,
    ) -> Result<u64, Box<(EffectRequest, crate::effects::capabilities::Denied)>> {
        // A mocked effect runs nothing (its scripted outcome stands in for it), so there is
        // nothing to check: a scenario may mock a program this machine does not have.
        let mocked = self
            .mocks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .covers(&request.id);
        if !mocked && let Err(denied) = self.machine.capabilities.admit(&mut request) {
            return Err(Box::new((request, denied)));
        }
        if let crate::effects::EffectKind::Process(process) = &mut request.kind {
            process.tag = Some(crate::effects::process::new_tag());
            // Given once, when the effect first starts: a resumed run starts it again with the
            // key it had (the request is kept with the run's state), so an attempt it repeats
            // repeats its key.
            if process.idempotency.is_none()
                && let Some(run) = self.state.run_id()
            {
                let invocation = self.state.running.next_invocation();
                process.idempotency = Some(format!("{run}:{invocation}"));
            }
        }
        let now = self.now_milliseconds();
        let (invocation, mut cancellation) =
            self.state.running.start(request.clone(), now, from.clone());
        let started = serde_json::json!({
            "id": &*request.id,
            "kind": request.kind.name(),
            "invocation": invocation,
            "owner": &*self.machine.state(request.owner).id,
            "scope": match request.scope {
                crate::effects::EffectScope::State => "state",
                crate::effects::EffectScope::Run => "run",
            },
        });
        if self.recording {
            self.step_actions.push(serde_json::json!({
                "effect": &*request.id,
                "kind": request.kind.name(),
                "invocation": invocation,
                "owner": started["owner"],
            }));
        }
        let time = self.now_text();
        self.observer.record(&time, "effect_started", started);
        self.observer.effect_started(&request);
        self.tell_attempt(
            invocation,
            &request,
            from.as_ref().map_or(1, |from| from.attempt),
        );
        if let crate::effects::EffectKind::Process(process) = &mut request.kind {
            process.trace = self.observer.effect_trace(invocation);
        }
        let completions = self.completions();
        let machine = self.machine.clone();
        let mocks = self.mocks.clone();
        tokio::spawn(async move {
            let telemetry = completions.clone();
            let mut report = move |record: LogRecord| {
                telemetry.send(EffectMessage::Log(record));
            };
            let attempts_cancellation = cancellation.clone();
            let attempt = move |attempt: EffectRequest| {
                // A poisoned lock only means another attempt panicked; the scripts are intact.
                let mocked = mocks
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .next_for(&attempt);
                let mut cancellation = attempts_cancellation.clone();
                async move {
                    match mocked {
                        Some(mock) => {
                            let (outcome, after) = mock.outcome(&attempt);
                            tokio::select! {
                                () = tokio::time::sleep(after) => outcome,
                                () = cancellation.cancelled() => outcome,
                            }
                        }
                        None => run_effect(&attempt, &mut cancellation).await,
                    }
                }
            };
            let progress_sink = completions.clone();
            let mut progress = move |progress: &crate::effects::PlanProgress| {
                progress_sink.send(EffectMessage::Progress(invocation, progress.clone()));
            };
            let outcome = run_with_plan(
                &request,
                attempt,
                &mut report,
                &mut progress,
                from.as_ref(),
                &mut cancellation,
            )
            .await;
            if cancellation.is_cancelled() {
                // Its end was recorded when it was cancelled; nobody waits for this outcome.
                return;
            }
            let mut event = Event::of_outcome(&machine, outcome, &request.events);
            if let Value::Map(data) = &mut event.data {
                Arc::make_mut(data).insert(Arc::from("invocation"), Value::Int(invocation as i64));
            }
            completions.send(EffectMessage::Outcome(invocation, event));
        });
        Ok(invocation)
    }

    /// Tells the observer that attempt `attempt` of an effect begins, with its timeout, and
    /// records it (`attempt` telemetry: the inspector's timeline draws each attempt).
    fn tell_attempt(&mut self, invocation: u64, request: &EffectRequest, attempt: u32) {
        let attempt = attempt.max(1);
        let (timeout, _) = request.plan.attempt_timeout(attempt);
        let timeout_ms = timeout.map(|timeout| timeout.as_millis() as u64);
        self.observer
            .effect_attempt(invocation, attempt, timeout_ms);
        let time = self.now_text();
        self.observer.record(
            &time,
            "attempt",
            serde_json::json!({
                "id": &*request.id,
                "invocation": invocation,
                "attempt": attempt,
                "timeout_ms": timeout_ms,
            }),
        );
    }

    /// Unix milliseconds on this run's clock (virtual under virtual time).
    pub(super) fn now_milliseconds(&self) -> u64 {
        self.state.now_milliseconds()
    }

    /// Delivers a `send ... to:` to the parent or to a running child. When nobody is there
    /// (no parent, the child not running or taking no events), `error.communication` is raised,
    /// as SCXML does for a target it cannot reach.
    fn send_to(&mut self, to: &str, event: Event) {
        let name = event.name.clone();
        let delivered = if to == crate::pipeline::actions::send::PARENT {
            match &self.parent {
                Some((parent, id)) => parent.send(EffectMessage::ChildEvent(id.clone(), event)),
                None => false,
            }
        } else {
            self.state.running.send_to_child(to, event)
        };
        if delivered {
            return;
        }
        let message = if to == crate::pipeline::actions::send::PARENT {
            "this run was not invoked by a parent".to_string()
        } else {
            format!("the child `{to}` is not running")
        };
        let mut data = indexmap::IndexMap::new();
        data.insert(Arc::from("to"), Value::string(to));
        data.insert(Arc::from("event"), Value::String(name));
        data.insert(Arc::from("message"), Value::string(message));
        let error = Event::named(
            &self.machine,
            "error.communication",
            Value::Map(Arc::new(data)),
            Origin::Platform,
        );
        self.external_queue.push_back(error);
    }

    pub(super) fn now_text(&self) -> String {
        clock::format_rfc3339(self.now_milliseconds())
    }

    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.state.next_deadline()
    }

    /// Adds a pending send in deadline order (after those due at the same instant).
    pub(super) fn add_timer(&mut self, deadline: Instant, pending: PendingSend) {
        if self.state.timers.is_empty() {
            // Room for exactly one: most instances wait on one timer, and a growing deque
            // would reserve four.
            self.state.timers.reserve_exact(1);
        }
        self.state.sequence += 1;
        self.state.timers_changed = true;
        let key = (deadline, self.state.sequence);
        let position = self.state.timers.partition_point(|(other, _)| *other < key);
        self.state.timers.insert(position, (key, pending));
    }

    /// The sender effects report to, making the channel on first use.
    pub(super) fn completions(&mut self) -> EffectSink {
        if let Some(sink) = &self.state.completions {
            return sink.clone();
        }
        let (sender, receiver) = mpsc::unbounded_channel();
        let sink = EffectSink::Own(sender);
        self.state.completions = Some(sink.clone());
        self.new_receiver = Some(receiver);
        sink
    }

    /// Moves the earliest timer due by now onto the external queue. One at a time: handling
    /// it may cancel the others (a state's `after` timers are cancelled when it exits), and a
    /// cancelled timer must never be delivered.
    pub(super) fn fire_due_timer(&mut self) {
        let now = Instant::now();
        if self.next_deadline().is_some_and(|deadline| deadline <= now)
            && let Some((_, (_, event, ..))) = self.state.timers.pop_front()
        {
            self.state.timers_changed = true;
            self.external_queue.push_back(event);
        }
    }
}

impl DriverHost<'_> {
    /// An event from a parent or a child that admission refused: not delivered; the protocol
    /// gets `error.communication` saying so, and the log a warning.
    pub(super) fn refuse_event(&mut self, name: &str, from: &str, message: String) {
        self.log(LogRecord {
            level: LogLevel::Warn,
            message: format!("refused `{name}` from {from}: {message}"),
            tags: Arc::from([Arc::from("event_refused")]),
            fields: Vec::new(),
            from: None,
        });
        let refused = Event::refused_message(&self.machine, name, from, message);
        self.external_queue.push_back(refused);
    }
}

impl Host for DriverHost<'_> {
    fn log(&mut self, record: LogRecord) {
        let time = self.now_text();
        if self.recording {
            let tags: Vec<&str> = record.tags.iter().map(|tag| &**tag).collect();
            let mut action = serde_json::json!({"log": record.message, "tags": tags});
            if let Some(from) = &record.from {
                action["from"] = (**from).into();
            }
            // `info` is what a line without one is: the journal says only the others, so that
            // `logs` can read from it a run recorded before every host kept telemetry.
            if record.level != crate::base::model::action::LogLevel::Info
                && let Ok(level) = serde_json::to_value(record.level)
            {
                action["level"] = level;
            }
            self.step_actions.push(action);
        }
        self.observer.log(&record, &time);
    }

    fn send(&mut self, request: SendRequest) {
        if let Some(to) = &request.to {
            return self.send_to(to, request.event);
        }
        if request.delay_milliseconds == 0 {
            self.external_queue.push_back(request.event);
            return;
        }
        // A deadline is armed at its own instant on this run's clock, so the timer is recorded
        // due at exactly the millisecond it was given; a span counts from now.
        let deadline = match request.deadline {
            Some(unix_milliseconds) => self.state.instant_at(unix_milliseconds),
            None => Instant::now() + std::time::Duration::from_millis(request.delay_milliseconds),
        };
        self.add_timer(
            deadline,
            (
                request.id,
                request.event,
                request.delay_milliseconds,
                request.deadline.is_some(),
            ),
        );
    }

    fn refuse_send(&self, request: &SendRequest) -> Option<String> {
        if request.to.is_some() {
            return None;
        }
        let budgets = crate::pipeline::compile::budget::current();
        if request.delay_milliseconds > 0 && self.state.timers.len() >= budgets.max_pending_sends {
            return Some(format!(
                "this run already has {} delayed sends pending, the limit; raise it with --max-pending-sends",
                self.state.timers.len()
            ));
        }
        // Counted on demand: the timers are at most `max_pending_sends`, the queue at most
        // what one macrostep sent.
        let held = self
            .external_queue
            .iter()
            .map(|event| event.data.size_in_bytes())
            .fold(
                self.state
                    .held_event_bytes()
                    .saturating_add(request.event.data.size_in_bytes()),
                usize::saturating_add,
            );
        let limit = budgets.max_context_bytes();
        (held > limit).then(|| {
            format!(
                "the data of the events this run holds (pending delayed sends, deferred and queued events) would total {held} bytes, more than {limit} ({} times --max-value-bytes); raise it with --max-value-bytes",
                crate::pipeline::compile::budget::CONTEXT_VALUES
            )
        })
    }

    fn cancel(&mut self, send_id: &str) {
        self.state.timers_changed = true;
        self.state
            .timers
            .retain(|(_, (id, ..))| id.as_deref() != Some(send_id));
    }

    fn state_entered(&mut self, state: crate::pipeline::compile::machine::StateId) {
        self.observer.state_entered(&self.machine.state(state).id);
    }

    fn state_exited(&mut self, state: crate::pipeline::compile::machine::StateId) {
        self.observer.state_exited(&self.machine.state(state).id);
    }

    fn transition_taken(&mut self, transition: crate::pipeline::compile::machine::TransitionId) {
        if self.recording {
            self.taken
                .push(self.machine.transition(transition).pointer.clone());
        }
        let state = &*self.state;
        self.observer
            .transition(&|| state.now_milliseconds(), &self.machine, transition);
    }

    fn start_invoke(&mut self, request: crate::pipeline::actions::InvokeRequest) {
        self.spawn_child(request, None);
    }

    fn cancel_invoke(&mut self, id: &str) {
        // Dropping the child's driver drops its running effects, whose processes are stopped.
        if self.state.running.stop_child(id) {
            let time = self.now_text();
            let fields = serde_json::json!({"id": id, "outcome": "cancelled"});
            self.observer.record(&time, "invoke", fields);
            self.child_changed(ChildChange::cancelled(id));
        }
    }

    fn cancel_effects_of(&mut self, state: crate::pipeline::compile::machine::StateId) {
        if self.state.running.is_empty() {
            return;
        }
        for effect in self.state.running.cancel_owned_by(state) {
            // An outcome waiting on the queue is taken off, never delivered.
            self.drop_queued_outcome(effect.invocation, effect.arrived);
            self.record_cancelled(&effect, "cancelled");
        }
        self.cancel_maps_of(state);
    }

    fn start_map(&mut self, request: crate::pipeline::actions::map::MapRequest) {
        self.start_fan_out(request);
    }

    fn emit(&mut self, directive: Directive) {
        if self.recording {
            self.step_actions
                .push(serde_json::json!({"directive": directive.to_json()}));
        }
        self.observer.directive(&directive);
    }

    fn start_effect(&mut self, request: EffectRequest) {
        self.start_effect_from(request, None);
    }
}

impl DriverHost<'_> {
    /// Takes in what a running effect sent. An outcome is delivered while the run goes on;
    /// after its final state it is recorded for the `finished` line instead.
    pub(super) fn receive(&mut self, message: EffectMessage, running: bool) {
        match message {
            EffectMessage::Log(record) => self.log(record),
            EffectMessage::ChildTrace(path, note) => self.observer.child_trace(&path, note),
            // A child's directive is the parent's to record, committed at once (a fleet's
            // host lives for one message): a resumed run's report lists it too.
            EffectMessage::Directive(directive) => {
                self.commit_due |= self.recording;
                self.emit(directive);
            }
            EffectMessage::ChildEvent(id, event) => {
                // A cancelled child's events are dropped with it.
                if self.state.running.has_child(&id) {
                    // A child's events are input to this protocol, admitted like any other.
                    if let Err(message) = crate::runtime::run::admission::admit(
                        &self.machine,
                        &event.name,
                        &event.data,
                    ) {
                        return self.refuse_event(&event.name, &id, message);
                    }
                    // Event types are the child's machine's: the parent names them anew.
                    let mut event =
                        Event::named(&self.machine, &event.name, event.data, Origin::Child);
                    event.invoke_id = Some(id);
                    self.external_queue.push_back(event);
                }
            }
            EffectMessage::Progress(invocation, progress) => {
                // The first attempt is what the start recorded; later ones are news.
                let news = progress.attempt > 1;
                if news
                    && let Some(effect) = self
                        .state
                        .running
                        .effects()
                        .iter()
                        .find(|effect| effect.invocation == invocation)
                {
                    let request = effect.request.clone();
                    self.tell_attempt(invocation, &request, progress.attempt);
                }
                if self.state.running.progressed(invocation, progress) && news && self.recording {
                    self.commit_due = true;
                }
            }
            EffectMessage::ChildStep(id, step) => {
                let CheckpointStep {
                    sequence,
                    event,
                    transitions,
                    snapshot,
                    unix_milliseconds,
                    children,
                    child_states,
                    ..
                } = *step;
                if self
                    .state
                    .running
                    .child_stepped(&id, sequence, unix_milliseconds)
                    && self.recording
                {
                    // Its state, and its own children's, each for its own row.
                    self.child_states.push(ChildState {
                        path: id.to_string(),
                        sequence,
                        committed_unix_milliseconds: unix_milliseconds,
                        snapshot,
                    });
                    self.child_states
                        .extend(child_states.into_iter().map(|state| state.below(&id)));
                    self.step_actions.push(serde_json::json!({
                        "child": &*id,
                        "step": sequence,
                        "event": event.map(|(name, _)| name),
                        "transitions": transitions,
                    }));
                    self.child_changed(ChildChange::Stepped {
                        path: id.to_string(),
                        sequence,
                    });
                    // The child's own children, seen from here.
                    for change in children {
                        self.child_changed(change.below(&id));
                    }
                }
            }
            EffectMessage::InvokeOutcome(id, event, ended) => {
                // A cancelled invoke's outcome is dropped: its state is gone.
                if self.state.running.child_finished(&id) {
                    self.child_changed(ended);
                    self.deliver_child_outcome(&id, event, running);
                }
            }
            EffectMessage::InvokeRefused(id, event) => {
                let extras = self.state.extras_mut();
                extras.refused_children = extras.refused_children.saturating_sub(1);
                self.deliver_child_outcome(&id, event, running);
            }
            EffectMessage::MapCompleted(invocation, event) => {
                if running {
                    self.map_completed(invocation, event);
                }
            }
            EffectMessage::Outcome(invocation, event) => {
                // A cancelled invocation's outcome is never delivered: its end is recorded.
                if !self.state.running.arrive(invocation) {
                    return;
                }
                // A map's item: its map keeps the outcome.
                if running && self.map_item_finished(invocation, &event) {
                    return;
                }
                if running {
                    // Still its owner's until handled: `delivered` records its end then.
                    self.external_queue.push_back(event);
                    return;
                }
                self.finished_after_the_run(invocation, &event);
            }
        }
    }

    /// An outcome taken off the external queue to be handled: the end of its invocation.
    pub(super) fn delivered(&mut self, event: &Event) {
        let Some(invocation) = outcome_invocation(event) else {
            return;
        };
        if self.state.running.finish(invocation).is_none() {
            // Not an effect's: a map's completion, or an outcome already taken.
            self.map_delivered(invocation, event);
            return;
        }
        let mut summary = effect_summary(event);
        summary["invocation"] = invocation.into();
        summary["outcome"] = outcome_name(event).into();
        let time = self.now_text();
        self.observer.record(&time, "effect", summary);
    }

    /// After the final state: the outcomes still queued are recorded as ended after the run.
    pub(super) fn outcomes_after_the_run(&mut self) {
        for event in std::mem::take(&mut self.external_queue) {
            if let Some(invocation) = outcome_invocation(&event) {
                self.finished_after_the_run(invocation, &event);
            }
        }
    }

    /// An effect that ended after the run reached its final state: recorded, listed for the
    /// `finished` line, and a failure warned about.
    fn finished_after_the_run(&mut self, invocation: u64, event: &Event) {
        let Some(effect) = self.state.running.finish(invocation) else {
            return;
        };
        let outcome = outcome_name(event);
        self.record_after_finish(&effect.request.id, invocation, outcome, event);
    }

    /// A resumed run that had reached its final state: an effect interrupted then is recorded
    /// as failed after the finish, not delivered.
    pub(super) fn receive_interrupted_after_finish(
        &mut self,
        effect: &InFlightEffect,
        event: &Event,
    ) {
        self.record_after_finish(&effect.action, effect.invocation, "interrupted", event);
    }

    /// Records how an effect ended after the final state, in the telemetry, the journal and
    /// the `finished` line; anything but `completed` is warned about.
    fn record_after_finish(&mut self, id: &str, invocation: u64, outcome: &str, event: &Event) {
        let mut summary = effect_summary(event);
        summary["invocation"] = invocation.into();
        summary["outcome"] = outcome.into();
        summary["after_finish"] = true.into();
        let time = self.now_text();
        self.observer.record(&time, "effect", summary.clone());
        if self.recording {
            self.step_actions
                .push(serde_json::json!({"effect_outcome": summary.clone()}));
        }
        if outcome != "completed" {
            self.warn_failed_after_finish(id, event);
        }
        self.state
            .extras
            .get_or_insert_default()
            .after_finish
            .push(summary);
    }

    /// Says once per engine process, when the run starts or resumes, that the kernel cannot
    /// enforce what the capabilities restrict.
    pub(super) fn warn_if_unconfined(&mut self) {
        if let Some(warning) =
            crate::effects::sandbox::unenforced_warning(&self.machine.capabilities)
        {
            self.log(LogRecord {
                level: crate::base::model::action::LogLevel::Warn,
                message: warning,
                tags: Arc::from([Arc::from("sandbox_unenforced")]),
                fields: Vec::new(),
                from: None,
            });
        }
    }

    /// An effect that failed after the run's final state: the run's outcome stands, but the
    /// failure must be seen.
    fn warn_failed_after_finish(&mut self, id: &str, event: &Event) {
        let message = event
            .data
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("failed")
            .to_string();
        self.log(LogRecord {
            level: crate::base::model::action::LogLevel::Warn,
            message: format!("{id} failed after the run finished: {message}"),
            tags: Arc::from([Arc::from("effect_failed_after_finish")]),
            fields: vec![
                (Arc::from("id"), Value::string(id)),
                (Arc::from("event"), Value::String(event.name.clone())),
            ],
            from: None,
        });
    }

    /// Records that an effect ended without its outcome: `cancelled` (its owner exited) or
    /// `interrupted` (the run stopped).
    /// Records every running effect as interrupted (the run stops on a signal).
    pub(super) fn record_interrupted(&mut self) {
        let ended: Vec<serde_json::Value> = self
            .state
            .running
            .effects()
            .iter()
            .map(|effect| self.ending(effect, "interrupted"))
            .collect();
        for fields in ended {
            let time = self.now_text();
            self.observer.record(&time, "effect", fields);
        }
    }

    /// The telemetry of an effect that ended without an outcome of its own; one with a retry
    /// plan also says how many attempts it began, under its telemetry name, so `stats` counts
    /// a call cancelled while it was being retried among the retried calls.
    fn ending(&self, effect: &super::running::RunningEffect, outcome: &str) -> serde_json::Value {
        let mut fields = serde_json::json!({
            "id": &*effect.request.id,
            "invocation": effect.invocation,
            "owner": &*self.machine.state(effect.request.owner).id,
            "outcome": outcome,
        });
        if let Some(progress) = &effect.progress {
            fields["attempts"] = progress.attempt.into();
            fields["telemetry"] = (*effect.request.plan.telemetry).into();
        }
        fields
    }

    pub(super) fn record_cancelled(
        &mut self,
        effect: &super::running::RunningEffect,
        outcome: &str,
    ) {
        let fields = self.ending(effect, outcome);
        if self.recording {
            self.step_actions
                .push(serde_json::json!({"effect_outcome": fields.clone()}));
        }
        let time = self.now_text();
        self.observer.record(&time, "effect", fields);
    }
}

/// The invocation an effect's outcome event reports, if it is one.
pub(super) fn outcome_invocation(event: &Event) -> Option<u64> {
    if event.origin != Origin::Outcome {
        return None;
    }
    match event.data.get("invocation") {
        Some(Value::Int(invocation)) => u64::try_from(*invocation).ok(),
        _ => None,
    }
}

/// How an outcome event ended its invocation, as telemetry names it.
fn outcome_name(event: &Event) -> &'static str {
    if event.name.starts_with("done.") {
        "completed"
    } else {
        "failed"
    }
}

/// The telemetry of an effect outcome: which action, how it ended, how long it took; a failure
/// also says why (its message and the tail of its error output, masked), so `logs` and `status`
/// can show it without the event's data.
fn effect_summary(event: &Event) -> serde_json::Value {
    let field = |name: &str| {
        event
            .data
            .get(name)
            .map_or(serde_json::Value::Null, Value::to_json)
    };
    let succeeded = event.name.starts_with("done.");
    let mut summary = serde_json::json!({
        "id": field("id"),
        "event": &*event.name,
        "succeeded": succeeded,
        "timed_out": field("timed_out"),
        "exit_code": field("exit_code"),
        "duration_ms": field("duration_ms"),
    });
    if !succeeded {
        summary["message"] = field("message");
        let stderr = event.data.get("stderr").and_then(Value::as_str);
        if let Some(tail) = stderr
            .map(crate::base::text::masked_tail)
            .filter(|tail| !tail.is_empty())
        {
            summary["stderr"] = tail.into();
        }
    }
    summary
}
