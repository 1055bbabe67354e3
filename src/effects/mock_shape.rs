//! A mocked outcome in the shape of the real effect's: the keys each kind of effect reports.

use std::sync::Arc;

use super::files::FileRequest;
use super::tools::ToolRequest;
use super::{EffectKind, EffectOutcome, EffectRequest};
use crate::base::value::Value;

/// Adds to a process-shaped mocked `outcome` the keys the real effect of `request` reports, so
/// a protocol reading `event.data.bytes` after a mocked `write` sees what it would after a
/// real one. A success gets values derived from the request (the bytes a write would write) or
/// from the mock's text (the lines of a listing); a failure gets the values the real effect
/// reports when it produced nothing.
pub fn shape(request: &EffectRequest, outcome: &mut EffectOutcome) {
    let succeeded = outcome.succeeded;
    let text = outcome
        .data
        .get("stdout")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let keys = match &request.kind {
        EffectKind::Process(_) => Vec::new(),
        EffectKind::Tool(call) if succeeded => tool_success(&call.tool, &text),
        EffectKind::Tool(call) => call.tool.empty_details(),
        EffectKind::File(file) => file_keys(file, succeeded),
    };
    for (key, value) in keys {
        outcome.data.insert(Arc::from(key), value);
    }
}

/// A tool's keys after success, from the mock's text standing for its `stdout`.
fn tool_success(tool: &ToolRequest, text: &str) -> Vec<(&'static str, Value)> {
    let lines = || text.lines().filter(|line| !line.is_empty());
    match tool {
        ToolRequest::ReadFile { .. } => vec![("bytes", count(text.len()))],
        ToolRequest::ListDir { .. } => {
            let entries = lines().map(Value::string).collect();
            vec![("entries", Value::List(Arc::new(entries)))]
        }
        // A real search succeeds only when some line matched: at least one match.
        ToolRequest::GrepSearch { .. } => vec![("matches", count(lines().count().max(1)))],
    }
}

/// A file effect's keys: the path (and backup) it works on, and the bytes it would write.
fn file_keys(file: &FileRequest, succeeded: bool) -> Vec<(&'static str, Value)> {
    let mut keys = vec![("path", Value::string(file.path().to_string_lossy()))];
    if let FileRequest::Backup { backup, .. } | FileRequest::Restore { backup, .. } = file {
        keys.push(("backup", Value::string(backup.to_string_lossy())));
    }
    let bytes = if succeeded { bytes_written(file) } else { 0 };
    keys.push(("bytes", count(bytes)));
    keys
}

/// What the real effect would report as `bytes`, without touching the filesystem beyond
/// reading the size of a file a backup or restore would copy.
fn bytes_written(file: &FileRequest) -> usize {
    match file {
        FileRequest::Write { content, .. } => content.len(),
        FileRequest::Append { line, .. } => line.len() + usize::from(!line.ends_with('\n')),
        // The real effect reports the whole document's size, unknown without reading it: the
        // item's own size stands for it.
        FileRequest::AppendToJsonArray { item, .. } => item.to_string().len(),
        FileRequest::Backup { path: source, .. } | FileRequest::Restore { backup: source, .. } => {
            std::fs::metadata(source).map_or(0, |metadata| {
                usize::try_from(metadata.len()).unwrap_or(usize::MAX)
            })
        }
    }
}

fn count(count: usize) -> Value {
    Value::Int(i64::try_from(count).unwrap_or(i64::MAX))
}
