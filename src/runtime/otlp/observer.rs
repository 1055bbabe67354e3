//! An observer that exports the run it watches as spans (`RunTrace`) and passes everything on to the observer it wraps.

use super::spans::{OPEN_SPANS_KIND, RunTrace};
use crate::base::event::Event;
use crate::pipeline::actions::{Directive, LogRecord};
use crate::pipeline::compile::machine::{Machine, TransitionId};
use crate::runtime::run::Interpreter;
use crate::runtime::run::admission::EventReport;
use crate::runtime::run::driver::{InputLineError, Observer};

/// `inner`, with `trace` told of the run's states, effects, logs and directives.
pub struct TracedObserver<'a> {
    pub inner: &'a mut dyn Observer,
    pub trace: &'a mut RunTrace,
}

impl Observer for TracedObserver<'_> {
    fn log(&mut self, record: &LogRecord, time: &str) {
        self.trace.log(record);
        self.inner.log(record, time);
    }

    fn directive(&mut self, directive: &Directive) {
        self.trace.directive(&directive.to_json());
        self.inner.directive(directive);
    }

    fn input_error(&mut self, error: &InputLineError) {
        self.inner.input_error(error);
    }

    fn record(&mut self, time: &str, kind: &str, fields: serde_json::Value) {
        match kind {
            "effect_started" => self.trace.effect_started(&fields),
            "effect" => self.trace.effect_ended(&fields),
            "map_started" => self.trace.map_started(&fields),
            "map" => self.trace.map_ended(&fields),
            "invoke" => self.trace.child_ended(&fields),
            _ => {}
        }
        self.inner.record(time, kind, fields);
    }

    fn step(
        &mut self,
        unix_milliseconds: u64,
        event: &Event,
        interpreter: &Interpreter,
        outcome: Option<&EventReport>,
    ) {
        self.inner
            .step(unix_milliseconds, event, interpreter, outcome);
    }

    fn transition(&mut self, now: &dyn Fn() -> u64, machine: &Machine, transition: TransitionId) {
        self.inner.transition(now, machine, transition);
    }

    fn event_outcome(&mut self, time: &str, report: &EventReport) {
        self.inner.event_outcome(time, report);
    }

    fn awaited(
        &mut self,
        line: usize,
        awaited: &crate::runtime::run::input::Await,
        end: crate::runtime::run::awaiting::AwaitEnd,
    ) {
        self.inner.awaited(line, awaited, end);
    }

    fn state_entered(&mut self, state: &str) {
        self.trace.state_entered(state);
        self.inner.state_entered(state);
    }

    fn state_exited(&mut self, state: &str) {
        self.trace.state_exited(state);
        self.inner.state_exited(state);
    }

    fn release(&mut self) {
        self.inner.release();
    }

    fn effect_started(&mut self, request: &crate::effects::EffectRequest) {
        self.inner.effect_started(request);
    }

    fn effect_attempt(&mut self, invocation: u64, attempt: u32, timeout_ms: Option<u64>) {
        self.trace.effect_attempt(invocation, attempt, timeout_ms);
        self.inner.effect_attempt(invocation, attempt, timeout_ms);
    }

    fn child_started(&mut self, machine: &Machine, id: &str) {
        // An invoke's owner is the state that declares it; a map's item has none of its own.
        self.trace
            .child_started(id, crate::runtime::run::driver::invoke_owner(machine, id));
        self.inner.child_started(machine, id);
    }

    fn child_trace_context(&self, id: &str) -> Option<crate::base::trace_context::ChildTrace> {
        Some(self.trace.child_trace_context(id))
    }

    fn child_trace(&mut self, path: &str, note: crate::runtime::run::driver::ChildNote) {
        // The child's telemetry is the wrapped observer's to keep.
        if matches!(
            note,
            crate::runtime::run::driver::ChildNote::Telemetry { .. }
        ) {
            return self.inner.child_trace(path, note);
        }
        self.trace.child_note(path, note);
    }

    fn effect_trace(&self, invocation: u64) -> Option<crate::base::trace_context::EffectTrace> {
        Some(self.trace.effect_trace(invocation))
    }

    /// The wrapped observer's telemetry, then the spans open now when they changed: committed
    /// with the steps, so a resume knows what a crash left open.
    fn take_telemetry(&mut self) -> Option<String> {
        let inner = self.inner.take_telemetry();
        let Some(open) = self.trace.take_open_spans() else {
            return inner;
        };
        let time = crate::base::clock::format_rfc3339(crate::base::clock::unix_milliseconds_now());
        let line = crate::runtime::telemetry::entry_line(
            self.trace.run_id(),
            &time,
            OPEN_SPANS_KIND,
            open,
        );
        Some(inner.unwrap_or_default() + &line)
    }
}
