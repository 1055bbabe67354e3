//! `--otlp` on a fleet: each instance its own trace, begun when it is created (recorded in the batch that creates it) or resumed (the trace its run recorded), told of its steps through a `TracedObserver`, ended with it; the spans open after each step kept with its telemetry.

use std::sync::Arc;

use super::Fleet;
use crate::base::trace_context::TraceParent;
use crate::runtime::otlp::Export;
use crate::runtime::otlp::spans::{OPEN_SPANS_KIND, RunTrace, SessionEnd};
use crate::runtime::run::Interpreter;
use crate::store::Write;

/// What a fleet exports with `--otlp`: one exporter for the host process, shared by its fleets.
pub(super) struct Tracing {
    export: Arc<Export>,
    /// The trace the next instance created is a child of (the `_meta.traceparent` of the MCP
    /// call that starts it); taken by that instance.
    parent: Option<TraceParent>,
    /// The trace of each instance, by its slot (slots are never reused): kept beside the
    /// instances rather than in them, so that a fleet without `--otlp` keeps nothing an
    /// instance for it.
    traces: Vec<Option<Box<RunTrace>>>,
}

impl Tracing {
    /// The trace of the instance in `slot`.
    pub(super) fn trace_of(&mut self, slot: usize) -> Option<&mut RunTrace> {
        self.traces.get_mut(slot)?.as_deref_mut()
    }
}

impl Fleet {
    /// Exports each instance as its own trace to `export`.
    pub fn with_otlp(mut self, export: Option<Arc<Export>>) -> Fleet {
        self.tracing = export.map(|export| Tracing {
            export,
            parent: None,
            traces: Vec::new(),
        });
        self
    }

    /// Makes the next instance created a child of `parent`'s trace (with `--otlp`).
    pub fn set_trace_parent(&mut self, parent: Option<TraceParent>) {
        if let Some(tracing) = &mut self.tracing {
            tracing.parent = parent;
        }
    }

    /// A new instance's trace, its record written in the batch that creates its run.
    pub(super) fn begin_new_trace(&mut self, name: &str) -> Option<RunTrace> {
        let tracing = self.tracing.as_mut()?;
        let run_id = format!("{}{name}", self.prefix);
        let (trace, record) = RunTrace::begin(
            tracing.export.clone(),
            &run_id,
            &self.machine.id,
            None,
            tracing.parent.take(),
            None,
        );
        if self.recording.is_some() {
            self.pending.push(Write::Trace {
                run: run_id,
                trace: serde_json::to_string(&record).expect("a trace record is plain JSON"),
            });
        }
        Some(trace)
    }

    /// Keeps `trace` as the trace of the instance in `slot`.
    pub(super) fn keep_trace(&mut self, slot: usize, trace: Option<RunTrace>) {
        if let (Some(tracing), Some(trace)) = (&mut self.tracing, trace) {
            if tracing.traces.len() <= slot {
                tracing.traces.resize_with(slot + 1, || None);
            }
            tracing.traces[slot] = Some(Box::new(trace));
        }
    }

    /// A restored instance's trace: the one its run recorded, with the spans its last host left
    /// open ended `interrupted`, its active states' visits going on; a new one for a run that
    /// recorded none.
    pub(super) fn begin_restored_trace(
        &mut self,
        run_id: &str,
        interpreter: &Interpreter,
    ) -> Result<Option<RunTrace>, String> {
        let (Some(tracing), Some(recording)) = (&self.tracing, &mut self.recording) else {
            return Ok(None);
        };
        let mut trace = crate::runtime::otlp::begin_run_trace(
            tracing.export.clone(),
            &mut *recording.store,
            run_id,
            &interpreter.machine().id,
            None,
        )
        .map_err(|error| error.to_string())?;
        trace.states_restored(&interpreter.active_states());
        Ok(Some(trace))
    }

    /// Ends the trace of the instance in `slot`, if it has one, as `end` says; with
    /// `committed`, the entry saying nothing is left open joins the batch's telemetry.
    pub(super) fn end_trace(
        &mut self,
        slot: usize,
        end: SessionEnd,
        attributes: &[(&str, serde_json::Value)],
        committed: bool,
    ) {
        let Some(mut trace) = self
            .tracing
            .as_mut()
            .and_then(|tracing| tracing.traces.get_mut(slot)?.take())
        else {
            return;
        };
        let fields = trace.end(end, attributes);
        if committed && self.recording.is_some() {
            let mut lines = String::new();
            push_open_spans(&mut lines, fields);
            self.telemetry.add(slot, trace.run_id().to_string(), lines);
        }
    }
}

/// Adds the entry listing the spans open now (`OPEN_SPANS_KIND`) to an instance's telemetry.
pub(super) fn push_open_spans(lines: &mut String, fields: serde_json::Value) {
    let time = crate::base::clock::format_rfc3339(crate::base::clock::unix_milliseconds_now());
    crate::runtime::telemetry::push_stored_entry(lines, &time, OPEN_SPANS_KIND, fields);
}
