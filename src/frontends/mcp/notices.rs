//! Directives as MCP log messages: each run's directives reach the client as they are committed, whose logger is the run id.

// Logging is deprecated by the 2026-07-28 revision (SEP-2577), which has no replacement yet for
// messages outside a request; clients of the earlier revisions, the SDKs' current ones among
// them, show them. Every use of it is in this file, but for the handler's `set_level`.
#![expect(deprecated)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use rmcp::model::{
    LoggingLevel, LoggingMessageNotificationParam, ServerCapabilities, SetLevelRequestParams,
};
use rmcp::{Peer, RoleServer};
use serde_json::Value;
use tokio::sync::broadcast;

/// The least level of log message a session takes: every level until it sends
/// `logging/setLevel`, which a server declaring the logging capability must answer.
#[derive(Clone, Default)]
pub struct LeastLevel(Arc<AtomicU8>);

impl LeastLevel {
    /// Takes the level a `logging/setLevel` request asks for.
    pub fn set(&self, request: &SetLevelRequestParams) {
        self.0.store(request.level as u8, Ordering::Relaxed);
    }

    fn admits(&self, level: LoggingLevel) -> bool {
        level as u8 >= self.0.load(Ordering::Relaxed)
    }
}

/// The server's capabilities: tools, resources, log messages for the directives, and the
/// tasks extension (runs as tasks).
pub fn capabilities() -> ServerCapabilities {
    ServerCapabilities::builder()
        .enable_logging()
        .enable_resources()
        .enable_tools()
        .enable_tasks()
        .build()
}

/// Sends every directive from `notices` to `peer`, while `least` admits them, until either
/// side is gone.
pub async fn forward(
    mut notices: broadcast::Receiver<(String, Value)>,
    peer: Peer<RoleServer>,
    least: LeastLevel,
) {
    loop {
        let (run, directive) = match notices.recv().await {
            Ok(notice) => notice,
            // Notices past the bound were dropped; the reports still carry them.
            Err(broadcast::error::RecvError::Lagged(_)) => continue,
            Err(broadcast::error::RecvError::Closed) => return,
        };
        if !least.admits(LoggingLevel::Notice) {
            continue;
        }
        let message = LoggingMessageNotificationParam::new(
            LoggingLevel::Notice,
            crate::base::secrets::mask_json(&directive).into_owned(),
        )
        .with_logger(run);
        if peer.notify_logging_message(message).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_takes_every_level_until_it_sets_one() {
        let least = LeastLevel::default();
        assert!(least.admits(LoggingLevel::Debug));
        least.set(&SetLevelRequestParams::new(LoggingLevel::Notice));
        assert!(least.admits(LoggingLevel::Notice));
        assert!(!least.admits(LoggingLevel::Info));
        least.set(&SetLevelRequestParams::new(LoggingLevel::Warning));
        assert!(!least.admits(LoggingLevel::Notice));
        assert!(least.admits(LoggingLevel::Emergency));
    }
}
