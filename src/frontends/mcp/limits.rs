//! Bounds against a hostile client: the largest message, the requests one session has in flight, the sessions open over HTTP, the longest name argument; each limit names itself in its error.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The largest JSON-RPC message taken, a stdio line or an HTTP body (rmcp's own bounds are
/// 16 MiB for a stdio line and 4 MiB for a body). A protocol's inputs and an event's data are
/// bounded further by the engine (`MAX_EVENT_LINE_BYTES`).
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// The most requests one session has in flight (rmcp answers each in a task of its own, with
/// no bound); one more is refused at once rather than queued.
pub const MAX_REQUESTS_IN_FLIGHT: usize = 32;

/// The most Streamable HTTP sessions open at once (rmcp's session manager has no bound; an
/// idle session closes after 5 minutes); a new one past it is refused with 503.
pub const MAX_HTTP_SESSIONS: usize = 128;

/// The longest name a management tool takes (`run`, `event`, `tag`, `level`).
pub const MAX_NAME_ARGUMENT_BYTES: usize = 1_024;

/// Why an oversized message was refused, for the client and for stderr.
pub fn oversized_message() -> String {
    format!(
        "a message longer than {MAX_MESSAGE_BYTES} bytes was refused, the limit \
         (MAX_MESSAGE_BYTES); send less at once"
    )
}

/// The requests a session has in flight.
#[derive(Clone)]
pub struct InFlight(Arc<Semaphore>);

impl Default for InFlight {
    fn default() -> InFlight {
        InFlight(Arc::new(Semaphore::new(MAX_REQUESTS_IN_FLIGHT)))
    }
}

impl InFlight {
    /// A place for one more request, held while it is answered, or the refusal naming the
    /// limit.
    pub fn admit(&self) -> Result<OwnedSemaphorePermit, String> {
        self.0.clone().try_acquire_owned().map_err(|_| {
            format!(
                "{MAX_REQUESTS_IN_FLIGHT} requests of this session are in flight, the limit \
                 (MAX_REQUESTS_IN_FLIGHT); wait for their answers"
            )
        })
    }
}

/// A name argument's length checked, without echoing a long one.
pub fn check_name_argument(name: &str, value: &str) -> Result<(), String> {
    if value.len() > MAX_NAME_ARGUMENT_BYTES {
        return Err(format!(
            "argument `{name}` is {} bytes, longer than the limit of {MAX_NAME_ARGUMENT_BYTES} \
             (MAX_NAME_ARGUMENT_BYTES)",
            value.len()
        ));
    }
    Ok(())
}
