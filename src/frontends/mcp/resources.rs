//! Resources: each served protocol's YAML (`protocol-run://protocol/ID`), each recorded run's status (`protocol-run://run/RUN_ID`, what `get_run` returns) and telemetry (`protocol-run://run/RUN_ID/telemetry`).

use rmcp::model::{Resource, ResourceContents, ResourceTemplate};
use serde_json::Value;

/// The most runs `resources/list` names, newest first; `list_runs` and the run template reach
/// the others.
pub const MAX_LISTED_RUNS: usize = 100;

/// The longest resource URI read: longer ones are refused before anything is looked up, and
/// never echoed whole.
pub const MAX_RESOURCE_URI_BYTES: usize = 2_048;

/// A served protocol's text, for its resource.
pub struct ProtocolText {
    pub id: String,
    pub title: Option<String>,
    pub yaml: String,
    /// Its file, canonicalized, as runs record it.
    pub path: String,
}

const PROTOCOL_SCHEME: &str = "protocol-run://protocol/";
const RUN_SCHEME: &str = "protocol-run://run/";
const TELEMETRY_SUFFIX: &str = "/telemetry";

/// What a resource URI names.
pub enum Named<'u> {
    Protocol(&'u str),
    Run(&'u str),
    Telemetry(&'u str),
}

/// Reads a URI of this server, or says which ones there are.
pub fn parse(uri: &str) -> Result<Named<'_>, String> {
    if uri.len() > MAX_RESOURCE_URI_BYTES {
        let shown: String = uri.chars().take(40).collect();
        return Err(format!(
            "the resource URI `{shown}…` is {} bytes, longer than the limit of \
             {MAX_RESOURCE_URI_BYTES} (MAX_RESOURCE_URI_BYTES); {}",
            uri.len(),
            forms()
        ));
    }
    if let Some(id) = uri.strip_prefix(PROTOCOL_SCHEME) {
        Ok(Named::Protocol(id))
    } else if let Some(run) = uri.strip_prefix(RUN_SCHEME) {
        Ok(match run.strip_suffix(TELEMETRY_SUFFIX) {
            Some(run) => Named::Telemetry(run),
            None => Named::Run(run),
        })
    } else {
        Err(format!("no resource `{uri}`: {}", forms()))
    }
}

/// The URIs this server reads.
fn forms() -> String {
    format!(
        "this server has {PROTOCOL_SCHEME}PROTOCOL_ID, {RUN_SCHEME}RUN_ID and \
         {RUN_SCHEME}RUN_ID{TELEMETRY_SUFFIX}"
    )
}

/// The resources listed: every protocol, then the runs of `runs` (a page of `list_runs`).
pub fn list(protocols: &[ProtocolText], runs: &Value) -> Vec<Resource> {
    let protocols = protocols.iter().map(|protocol| {
        let mut resource = Resource::new(format!("{PROTOCOL_SCHEME}{}", protocol.id), &protocol.id)
            .with_mime_type("application/yaml")
            .with_size(protocol.yaml.len() as u64);
        if let Some(title) = &protocol.title {
            resource = resource.with_title(title);
        }
        resource
    });
    let runs = runs["runs"]
        .as_array()
        .into_iter()
        .flatten()
        .take(MAX_LISTED_RUNS)
        .filter_map(|run| {
            let id = run["run"].as_str()?;
            let status = run["status"].as_str().unwrap_or("unknown");
            Some(
                Resource::new(format!("{RUN_SCHEME}{id}"), id)
                    .with_description(format!("run {id}: {status}"))
                    .with_mime_type("application/json"),
            )
        });
    protocols.chain(runs).collect()
}

/// The templates a client fills to read any run's status, and its telemetry.
pub fn templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new(format!("{RUN_SCHEME}{{run}}"), "run")
            .with_mime_type("application/json"),
        ResourceTemplate::new(
            format!("{RUN_SCHEME}{{run}}{TELEMETRY_SUFFIX}"),
            "run telemetry",
        )
        .with_description(format!(
            "the run's latest journal steps and telemetry entries (at most {} of each, \
             {} KiB of each; `truncated` says when older ones were left out)",
            crate::frontends::mcp::telemetry::MAX_TELEMETRY_RECORDS,
            crate::frontends::mcp::telemetry::MAX_TELEMETRY_BYTES / 1024
        ))
        .with_mime_type("application/json"),
    ]
}

/// A protocol's YAML as a resource's contents.
pub fn protocol_contents(
    protocols: &[ProtocolText],
    id: &str,
    uri: &str,
) -> Result<ResourceContents, String> {
    let protocol = protocols
        .iter()
        .find(|protocol| protocol.id == id)
        .ok_or_else(|| format!("no protocol `{id}` is served"))?;
    Ok(ResourceContents::text(&protocol.yaml, uri).with_mime_type("application/yaml"))
}

/// A run's report, or its telemetry, as a resource's contents.
pub fn run_contents(report: &Value, uri: &str) -> ResourceContents {
    ResourceContents::text(report.to_string(), uri).with_mime_type("application/json")
}

/// A failed read of a run or its telemetry as its JSON-RPC error: `-32002` (resource not
/// found) for a run that is not there or not of a served protocol; anything else (the store
/// failing, the server stopping) `-32603` (internal error). Each with its text. (The in-flight
/// limit refuses a read before it starts, with `-32600`: `ProtocolServer::admit`.)
pub fn read_error(message: String) -> rmcp::ErrorData {
    if message.starts_with("no run `") || message.contains("which this server does not serve") {
        rmcp::ErrorData::resource_not_found(message, None)
    } else {
        rmcp::ErrorData::internal_error(message, None)
    }
}
