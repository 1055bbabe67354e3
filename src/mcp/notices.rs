//! Directives as MCP log messages: each run's directives reach the client as they are committed, whose logger is the run id.

// Logging is deprecated by the 2026-07-28 revision (SEP-2577), which has no replacement yet for
// messages outside a request; clients of the earlier revisions, the SDKs' current ones among
// them, show them. Every use of it is in this file.
#![expect(deprecated)]

use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam, ServerCapabilities};
use rmcp::{Peer, RoleServer};
use serde_json::Value;
use tokio::sync::broadcast;

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

/// Sends every directive from `notices` to `peer` until either side is gone.
pub async fn forward(mut notices: broadcast::Receiver<(String, Value)>, peer: Peer<RoleServer>) {
    loop {
        let (run, directive) = match notices.recv().await {
            Ok(notice) => notice,
            // Notices past the bound were dropped; the reports still carry them.
            Err(broadcast::error::RecvError::Lagged(_)) => continue,
            Err(broadcast::error::RecvError::Closed) => return,
        };
        let message = LoggingMessageNotificationParam::new(
            LoggingLevel::Notice,
            crate::secrets::mask_json(&directive).into_owned(),
        )
        .with_logger(run);
        if peer.notify_logging_message(message).await.is_err() {
            return;
        }
    }
}
