//! Starting a run of a served protocol for a tool call: the client's inputs with the operator's pinned ones, checked before the run's fleet is made.

use std::cell::RefCell;
use std::rc::Rc;

use serde_json::{Map, Value};
use tokio::sync::oneshot;

use crate::frontends::mcp::runs::events::check_line_length;
use crate::frontends::mcp::runs::host::Host;
use crate::frontends::mcp::runs::records;
use crate::frontends::mcp::runs::report::RunView;

impl Host {
    /// Starts a run of `protocol` with `inputs` and the pinned ones: its grants the operator's
    /// (resolved when the protocol was served), its own fleet, its first line creating it; its
    /// trace (with `--otlp`) a child of `parent` when the call gave one.
    pub(in crate::frontends::mcp) async fn start(
        &mut self,
        protocol: &str,
        inputs: Map<String, Value>,
        parent: Option<crate::base::trace_context::TraceParent>,
        reply: oneshot::Sender<Result<Value, String>>,
    ) {
        let fail = |reply: oneshot::Sender<Result<Value, String>>, message: String| {
            let _ = reply.send(Err(message));
        };
        if let Err(message) = self.check_room() {
            return fail(reply, message);
        }
        let Some(served) = self
            .protocols
            .iter()
            .find(|served| served.machine.id == protocol)
        else {
            return fail(reply, format!("no protocol `{protocol}` is served"));
        };
        if let Err(message) = check_line_length(&Value::Object(inputs.clone()).to_string()) {
            return fail(reply, message);
        }
        let supplied: Vec<(String, Value)> = inputs.clone().into_iter().collect();
        let supplied = match served.pinned.with_client_inputs(&supplied) {
            Ok(supplied) => supplied,
            Err(message) => return fail(reply, message),
        };
        // Checked here, so a bad input is the call's error rather than a line the fleet skips.
        if let Err(errors) = served.machine.bind_input_values(&supplied) {
            let messages: Vec<String> = errors.iter().map(tool_input_error).collect();
            return fail(reply, messages.join("; "));
        }
        let machine = served.machine.clone();
        let pinned = served.pinned.clone();
        let instance =
            records::new_instance_name(&**self.settings.store.lock(), &machine.id, |run| {
                self.runs.contains_key(run)
            });
        let run_id = format!("{}:{instance}", machine.id);
        // The run is created holding this server's claim (`Recording::holder`).
        let recording = served.recording(
            Box::new(self.settings.store.clone()),
            self.settings.recorded_grants.clone(),
            crate::store::RunOrigin::Mcp,
            self.settings.holder.clone(),
        );
        let view = Rc::new(RefCell::new(RunView::default()));
        let mut fleet = self.fleet(run_id.clone(), machine.clone(), recording, view.clone());
        fleet.set_pinned_inputs(pinned);
        fleet.set_trace_parent(parent);
        self.keep_live(&run_id, machine, fleet, view);
        let line = serde_json::json!({"instance": instance, "inputs": inputs}).to_string();
        let call = format!("MCP call {protocol} starting run `{run_id}`");
        self.submit(&run_id, &line, &call, reply).await;
    }
}

/// An input problem as the client should read it: a missing input is an argument of the tool,
/// not a `--input` flag.
fn tool_input_error(error: &crate::pipeline::compile::inputs::InputError) -> String {
    use crate::pipeline::compile::inputs::InputError;
    match error {
        InputError::Missing { name, description } => format!(
            "missing required input `{name}`{description}; give the tool its `{name}` argument"
        ),
        other => other.to_string(),
    }
}
