//! OpenTelemetry export (`--otlp`): where spans go (the OTLP/HTTP exporter behind the SDK's batch processor), the trace kept with each run, and each run's span tree.

mod http_client;
mod nesting;
pub mod observer;
mod span_events;
pub mod spans;

use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::{BatchSpanProcessor, SpanData, SpanProcessor};
use std::time::Duration;

/// How long one export may take before it is given up.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The path OTLP/HTTP puts traces under, after a base endpoint.
const TRACES_PATH: &str = "/v1/traces";

/// Where spans go: the SDK's batch processor over the OTLP/HTTP (protobuf) exporter. Spans are
/// queued and sent from the processor's own thread; `shutdown` sends what is queued.
pub struct Export {
    processor: BatchSpanProcessor,
    pub(crate) scope: opentelemetry::InstrumentationScope,
    pub endpoint: String,
}

impl std::fmt::Debug for Export {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Export")
            .field("endpoint", &self.endpoint)
            .finish()
    }
}

/// The traces endpoint chosen by `--otlp` (a base endpoint, `/v1/traces` added), else by
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (as written), else by `OTEL_EXPORTER_OTLP_ENDPOINT`
/// (a base); `None` when none is set: nothing is exported.
pub fn chosen_endpoint(flag: Option<&str>) -> Option<String> {
    let variable = |name: &str| std::env::var(name).ok().filter(|value| !value.is_empty());
    let base = |endpoint: &str| {
        let trimmed = endpoint.trim_end_matches('/');
        if trimmed.ends_with(TRACES_PATH) {
            trimmed.to_string()
        } else {
            format!("{trimmed}{TRACES_PATH}")
        }
    };
    if let Some(flag) = flag {
        return Some(base(flag));
    }
    if let Some(traces) = variable("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
        return Some(traces);
    }
    variable("OTEL_EXPORTER_OTLP_ENDPOINT").map(|endpoint| base(&endpoint))
}

impl Export {
    /// The exporter for `endpoint` (`chosen_endpoint`), headers from `OTEL_EXPORTER_OTLP_HEADERS`
    /// or `OTEL_EXPORTER_OTLP_TRACES_HEADERS`; an error names what is wrong with the endpoint.
    pub fn new(endpoint: &str) -> Result<Export, String> {
        let uri: hyper::Uri = endpoint
            .parse()
            .map_err(|error| format!("OTLP endpoint `{endpoint}`: {error}"))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some("https") => {
                return Err(format!(
                    "OTLP endpoint `{endpoint}`: https is not supported (no TLS); export to a \
                     local collector over http://, e.g. http://127.0.0.1:4318"
                ));
            }
            _ => {
                return Err(format!(
                    "OTLP endpoint `{endpoint}`: not an http:// URL, e.g. http://127.0.0.1:4318"
                ));
            }
        }
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(http_client::HyperClient {
                timeout: EXPORT_TIMEOUT,
            })
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_endpoint(endpoint)
            .with_timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|error| format!("OTLP endpoint `{endpoint}`: {error}"))?;
        let mut processor = BatchSpanProcessor::builder(exporter).build();
        let mut resource = opentelemetry_sdk::Resource::builder();
        if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name("protocol-run");
        }
        processor.set_resource(&resource.build());
        let scope = opentelemetry::InstrumentationScope::builder("protocol-run")
            .with_version(env!("CARGO_PKG_VERSION"))
            .build();
        Ok(Export {
            processor,
            scope,
            endpoint: endpoint.to_string(),
        })
    }

    /// Queues one ended span; never waits for the network.
    pub(crate) fn send(&self, span: SpanData) {
        self.processor.on_end(span);
    }

    /// Sends what is queued and waits for it (at the end of a run, and when it stops).
    pub fn flush(&self) {
        if let Err(error) = self.processor.force_flush() {
            eprintln!("warning: OTLP export to {}: {error}", self.endpoint);
        }
    }

    /// Sends what is queued, then stops the exporter's thread.
    pub fn shutdown(&self) {
        if let Err(error) = self.processor.shutdown() {
            eprintln!("warning: OTLP export to {}: {error}", self.endpoint);
        }
    }
}

/// Starts exporting `run_id`: the trace recorded with it (a resumed or taken-over run), with
/// what its last session left open ended `interrupted`; else a new trace, a child of `parent`
/// (`TRACEPARENT`) when given, recorded with the run.
pub fn begin_run_trace(
    export: std::sync::Arc<Export>,
    store: &mut dyn crate::store::Store,
    run_id: &str,
    protocol: &str,
    parent: Option<crate::base::trace_context::TraceParent>,
) -> Result<spans::RunTrace, crate::store::StoreError> {
    let stored = store
        .trace(run_id)?
        .and_then(|text| serde_json::from_str::<spans::TraceRecord>(&text).ok());
    let open_at_stop = match &stored {
        Some(_) => last_open_spans(&store.telemetry(run_id)?),
        None => None,
    };
    let fresh = stored.is_none();
    let (trace, record) = spans::RunTrace::begin(
        export,
        run_id,
        protocol,
        stored,
        parent,
        open_at_stop.as_deref(),
    );
    if fresh {
        let text = serde_json::to_string(&record).expect("a trace record is plain JSON");
        store.save_trace(run_id, &text)?;
    }
    Ok(trace)
}

/// The last entry of a run's telemetry that lists its open spans, if any.
fn last_open_spans(parts: &[String]) -> Option<String> {
    parts
        .iter()
        .flat_map(|part| part.lines())
        .rev()
        .find(|line| {
            serde_json::from_str::<serde_json::Value>(line)
                .is_ok_and(|entry| entry["kind"] == spans::OPEN_SPANS_KIND)
        })
        .map(str::to_string)
}

/// The parent named by the `TRACEPARENT` variable of this process, if it names one.
pub fn environment_parent() -> Option<crate::base::trace_context::TraceParent> {
    std::env::var(crate::base::trace_context::TRACEPARENT_VARIABLE)
        .ok()
        .and_then(|text| crate::base::trace_context::TraceParent::parse(&text))
}

/// Ends a run's session in its trace: the run finished (its root span sent), or stopped and
/// may go on; the entry saying nothing is left open is committed with the run, and what is
/// queued is sent.
pub fn end_run_trace(
    trace: &mut spans::RunTrace,
    driven: &Result<
        crate::runtime::run::driver::RunReport,
        crate::runtime::run::algorithm::RunError,
    >,
    store: &mut dyn crate::store::Store,
    run_id: &str,
) {
    let (end, attributes) = match driven {
        // Cancelled from its inbox: finished, as the fleet ends a cancelled instance's trace.
        Ok(report) if report.cancelled.is_some() => (
            spans::SessionEnd::Finished { succeeded: false },
            vec![
                (
                    "protocol_run.exit_code",
                    serde_json::Value::from(crate::runtime::run::stop::CANCELLED_EXIT_CODE),
                ),
                ("protocol_run.error", serde_json::Value::from("cancelled")),
            ],
        ),
        Ok(report) => match &report.outcome {
            Some(outcome) if !report.stopped_by_signal => (
                spans::SessionEnd::Finished {
                    succeeded: outcome.exit_code == 0,
                },
                vec![(
                    "protocol_run.exit_code",
                    serde_json::Value::from(outcome.exit_code),
                )],
            ),
            _ => (spans::SessionEnd::Stopped, Vec::new()),
        },
        Err(error) => (
            spans::SessionEnd::Finished { succeeded: false },
            vec![(
                "protocol_run.error",
                serde_json::Value::from(
                    crate::base::secrets::mask(&error.to_string()).into_owned(),
                ),
            )],
        ),
    };
    let fields = trace.end(end, &attributes);
    trace.flush();
    let time = crate::base::clock::format_rfc3339(crate::base::clock::unix_milliseconds_now());
    let line = crate::runtime::telemetry::entry_line(run_id, &time, spans::OPEN_SPANS_KIND, fields);
    if let Err(error) = store.append_telemetry(run_id, &line) {
        eprintln!("warning: the end of this run's trace is not in the store: {error}");
    }
}
