//! Lines a tool hands a live run's fleet (an event, an `await`), each answered once its output is committed, and which runs can take one.

use serde_json::Value;
use tokio::sync::oneshot;

use crate::frontends::mcp::runs::host::{Host, LiveRun, Waiting};
use crate::runtime::run::input::{LineBatch, LineOrigin};

impl Host {
    /// Sends `event` to a live run; answered with its report once the step is committed. The
    /// fleet refuses what `serve` refuses (an undeclared event, data off its schema, a
    /// platform event) with the reason. An answer to an input request (`expected_step`) is
    /// sent only while the request stands.
    pub(in crate::frontends::mcp) async fn send_event(
        &mut self,
        run: &str,
        event: &str,
        data: Option<Value>,
        expected_step: Option<u64>,
        reply: oneshot::Sender<Result<Value, String>>,
    ) {
        if let Some(step) = expected_step
            && let Err(message) = self.check_request_stands(run, event, step)
        {
            let _ = reply.send(Err(message));
            return;
        }
        let live = match self.running(run) {
            Ok(live) => live,
            Err(message) => {
                let _ = reply.send(Err(message));
                return;
            }
        };
        let mut line = serde_json::json!({"instance": live.instance, "event": event});
        if let Some(data) = data {
            line["data"] = data;
        }
        let call = format!("MCP call send_event to run `{run}`");
        self.submit(run, &line.to_string(), &call, reply).await;
    }
    /// Hands the run's fleet an `await` line, answered once the wait ends (events other calls
    /// send meanwhile are taken: the wait holds only its own call's line).
    pub(in crate::frontends::mcp) async fn wait_for_state(
        &mut self,
        run: &str,
        state: &str,
        timeout: Option<Value>,
        reply: oneshot::Sender<Result<Value, String>>,
    ) {
        let live = match self.running(run) {
            Ok(live) => live,
            Err(message) => {
                let _ = reply.send(Err(message));
                return;
            }
        };
        let mut line = serde_json::json!({"instance": live.instance, "await": state});
        if let Some(timeout) = timeout {
            line["timeout"] = timeout;
        }
        let call = format!("MCP call wait_for_state on run `{run}`");
        self.submit(run, &line.to_string(), &call, reply).await;
    }
    /// Hands `line` to the run's fleet, sent by the tool call `call`; `reply` is answered once
    /// its output is committed.
    pub(in crate::frontends::mcp) async fn submit(
        &mut self,
        run: &str,
        line: &str,
        call: &str,
        reply: oneshot::Sender<Result<Value, String>>,
    ) {
        let Some(live) = self.runs.get(run) else {
            let _ = reply.send(Err(format!("no live run `{run}`")));
            return;
        };
        if let Err(message) = check_line_length(line) {
            let _ = reply.send(Err(message));
            return;
        }
        self.next_client += 1;
        let client = self.next_client;
        let mut batch = LineBatch::from_client(LineOrigin { client, line: 1 });
        batch.push(line);
        self.waiters.borrow_mut().insert(
            client,
            Waiting {
                run: run.to_string(),
                call: call.to_string(),
                reply,
                problems: Vec::new(),
                outcome: None,
                awaited: None,
            },
        );
        if live.input.send(batch).await.is_err()
            && let Some(waiting) = self.waiters.borrow_mut().remove(&client)
        {
            let _ = waiting
                .reply
                .send(Err(format!("run `{run}` is no longer live")));
        }
    }
    /// A live run that has not ended, or why there is none.
    pub(in crate::frontends::mcp) fn running(&mut self, run: &str) -> Result<&mut LiveRun, String> {
        if !self.runs.contains_key(run) {
            if let Some(ended) = self.ended.get(run) {
                let status = ended.view.borrow().status();
                return Err(format!("run `{run}` has ended: {status}"));
            }
            return Err(self.not_live(run));
        }
        let live = self.runs.get_mut(run).expect("checked above");
        let status = live.view.borrow().status();
        if status != "running" {
            return Err(format!("run `{run}` has ended: {status}"));
        }
        Ok(live)
    }
}

/// The bound `serve` puts on each of its input lines, held for a tool's line too: the run's
/// inputs, or an event with its data.
pub(super) fn check_line_length(line: &str) -> Result<(), String> {
    let limit = crate::runtime::run::input::MAX_EVENT_LINE_BYTES;
    if line.len() > limit {
        return Err(format!(
            "the run's input (the event's data, or the inputs) is {} bytes as JSON, more than \
             the limit of {limit} bytes (MAX_EVENT_LINE_BYTES, `serve`'s --max-event-bytes)",
            line.len()
        ));
    }
    Ok(())
}
