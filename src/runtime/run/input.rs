//! Event input: JSON lines parsed into events (the engine's own refused), read from stdin by line or in batches, each line bounded.

use crate::base::event::{Event, Origin};
use crate::base::text::read_limited_line;
use crate::base::value::Value;
use crate::pipeline::compile::machine::Machine;
use tokio::sync::mpsc;

/// Input lines as they arrive: a line, or the problem that made one unreadable (too long), to
/// be reported with its number and skipped.
pub type InputLines = mpsc::Receiver<Result<String, String>>;

/// The longest event line read by default (1 MiB): a longer one is reported and skipped, so
/// one huge line cannot exhaust memory.
pub const MAX_EVENT_LINE_BYTES: usize = 1 << 20;

/// A problem with one input line; the line is skipped.
#[derive(Debug, Clone, PartialEq)]
pub struct InputLineError {
    pub line: usize,
    pub message: String,
    /// The event the line names, when it names one.
    pub event: Option<String>,
}

impl InputLineError {
    /// The problem with line `line` (whose text is `text`, when it was read).
    pub fn new(line: usize, message: String, text: Option<&str>) -> InputLineError {
        let event = text
            .and_then(|text| serde_json::from_str::<serde_json::Value>(text).ok())
            .and_then(|json| json.get("event")?.as_str().map(String::from));
        InputLineError {
            line,
            message,
            event,
        }
    }
}

/// Parses one JSON line `{"event": "name", "data": {...}}`.
pub fn parse_event_line(machine: &Machine, text: &str) -> Result<Event, String> {
    match parse_input_line(machine, text)? {
        InputLine::Event(event) => Ok(event),
        InputLine::Advance(_) => Err("expected an event, not `advance`".into()),
        InputLine::Await(_) => Err("expected an event, not `await`".into()),
    }
}

/// One line of the event stream: an event, or (under virtual time) a move of the clock.
pub enum InputLine {
    Event(Event),
    /// `{"advance": "1m"}`: let this much virtual time pass, firing what falls due.
    Advance(std::time::Duration),
    /// `{"await": STATE, "timeout": "30s"}`: read no more lines until STATE is active.
    Await(Await),
}

/// An `await` line: the state waited for, and for how long at most (wall-clock time).
#[derive(Debug, Clone, PartialEq)]
pub struct Await {
    pub state: String,
    pub timeout: std::time::Duration,
}

/// How long an `await` line waits when it names no `timeout`.
pub const DEFAULT_AWAIT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// The longest `timeout` an `await` line may give (a day): a longer wait is a mistake.
pub const MAX_AWAIT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(86_400);

/// Parses the fields of an `await` line (`await`, optional `timeout`), the state checked
/// against the protocol's.
pub fn parse_await(
    machine: &Machine,
    object: &serde_json::Map<String, serde_json::Value>,
) -> Result<Await, String> {
    let state = object["await"]
        .as_str()
        .ok_or("`await` takes a state id, such as \"waiting\"")?;
    if machine.state_id(state).is_none() {
        let known = machine.states.iter().skip(1).map(|state| &*state.id);
        let help = crate::base::diagnostic::did_you_mean(state, known)
            .unwrap_or_else(|| "name one of the protocol's states".into());
        return Err(format!(
            "`await` names no state of this protocol: `{state}`; {help}"
        ));
    }
    let timeout = match object.get("timeout") {
        None => DEFAULT_AWAIT_TIMEOUT,
        Some(timeout) => timeout
            .as_str()
            .and_then(crate::base::model::Duration::parse)
            .map(|duration| duration.as_std())
            .filter(|duration| *duration <= MAX_AWAIT_TIMEOUT)
            .ok_or_else(|| {
                format!(
                    "`timeout` takes a duration such as \"30s\" of at most a day, not {timeout}"
                )
            })?,
    };
    Ok(Await {
        state: state.to_string(),
        timeout,
    })
}

/// Parses one JSON line of the event stream.
pub fn parse_input_line(machine: &Machine, text: &str) -> Result<InputLine, String> {
    let json: serde_json::Value =
        serde_json::from_str(text).map_err(|error| format!("not JSON: {error}"))?;
    let object = json
        .as_object()
        .ok_or("expected an object like {\"event\": \"name\"}")?;
    if let Some(advance) = object.get("advance") {
        if object.len() > 1 {
            return Err("an `advance` line has no other keys".into());
        }
        return advance
            .as_str()
            .and_then(crate::base::model::Duration::parse)
            .map(|duration| InputLine::Advance(duration.as_std()))
            .ok_or_else(|| format!("`advance` takes a duration such as \"30s\", not {advance}"));
    }
    if object.contains_key("await") {
        if let Some(key) = object
            .keys()
            .find(|key| !matches!(key.as_str(), "await" | "timeout"))
        {
            return Err(format!(
                "unknown key `{key}`; an `await` line has `await` and optional `timeout`"
            ));
        }
        return parse_await(machine, object).map(InputLine::Await);
    }
    if let Some(key) = object
        .keys()
        .find(|key| !matches!(key.as_str(), "event" | "data"))
    {
        return Err(format!(
            "unknown key `{key}`; an event line has `event` and optional `data`"
        ));
    }
    let name = object
        .get("event")
        .and_then(serde_json::Value::as_str)
        .filter(|name| !name.is_empty())
        .ok_or("missing `event` (a non-empty string)")?;
    let data_json = object.get("data").unwrap_or(&serde_json::Value::Null);
    crate::runtime::run::admission::admit_json(machine, name, data_json)?;
    let data = Value::from_json(data_json);
    Ok(InputLine::Event(Event::named(
        machine,
        name,
        data,
        Origin::External,
    )))
}

/// Reads stdin lines on a plain thread (stdin is blocking) and hands them to the run loop. A
/// full channel makes the thread wait: a fast writer is slowed down, not buffered without end.
pub(crate) fn spawn_stdin_reader(max_line_bytes: usize) -> InputLines {
    spawn_line_reader(Box::new(std::io::stdin()), max_line_bytes)
}

/// Reads `input` line by line on a plain thread, each line bounded and checked as stdin's are
/// (an events file follows the same rules: a bad line is reported with its number, not fatal).
pub(crate) fn spawn_line_reader(
    input: Box<dyn std::io::Read + Send>,
    max_line_bytes: usize,
) -> InputLines {
    let (sender, receiver) = mpsc::channel(1024);
    std::thread::spawn(move || {
        let mut input = std::io::BufReader::with_capacity(1 << 16, input);
        loop {
            let mut line = Vec::new();
            let Some(read) = read_limited_line(&mut input, max_line_bytes, &mut line) else {
                break;
            };
            let line = read.and_then(|()| {
                String::from_utf8(line).map_err(|_| "the line is not UTF-8".to_string())
            });
            if sender.blocking_send(line).is_err() {
                break;
            }
        }
    });
    receiver
}

/// Input lines in batches: as many as were read without waiting (at most 1,024), so a host
/// pays one hand-over per batch rather than per line.
pub type InputBatches = mpsc::Receiver<LineBatch>;

/// Input lines handed over together: their bytes end to end, and where each one ends (or why
/// it was dropped). One buffer per batch, not one allocation per line.
#[derive(Debug, Default)]
pub struct LineBatch {
    bytes: Vec<u8>,
    ends: Vec<Result<usize, String>>,
    /// Where the lines came from when that is a socket client, so a bad one is answered to it.
    pub origin: Option<LineOrigin>,
}

/// The socket client a line came from, and the line's number among that client's lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineOrigin {
    pub client: u64,
    pub line: usize,
}

impl LineBatch {
    /// A batch of one line.
    pub fn of_line(line: &str) -> LineBatch {
        std::iter::once(line).collect()
    }

    /// An empty batch of lines from a socket client, the first being `origin`.
    pub fn from_client(origin: LineOrigin) -> LineBatch {
        LineBatch {
            origin: Some(origin),
            ..LineBatch::default()
        }
    }

    /// Where the next line is read to (by `LimitedLine`), before `end_line` closes it.
    pub(crate) fn line_buffer(&mut self) -> &mut Vec<u8> {
        &mut self.bytes
    }

    /// Ends the line read into `line_buffer`, or records why it was dropped.
    pub(crate) fn end_line(&mut self, read: Result<(), String>) {
        self.ends.push(read.map(|()| self.bytes.len()));
    }

    /// Adds a line (without its newline).
    pub fn push(&mut self, line: &str) {
        self.bytes.extend_from_slice(line.as_bytes());
        self.ends.push(Ok(self.bytes.len()));
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Each line, or why it was dropped (too long, not UTF-8), in order.
    pub fn lines(&self) -> impl Iterator<Item = Result<&str, String>> + '_ {
        let mut start = 0;
        self.ends.iter().map(move |end| {
            let end = end.as_ref().map_err(String::clone)?;
            let line = &self.bytes[start..*end];
            start = *end;
            std::str::from_utf8(line).map_err(|_| "the line is not UTF-8".to_string())
        })
    }
}

impl<'a> FromIterator<&'a str> for LineBatch {
    fn from_iter<T: IntoIterator<Item = &'a str>>(lines: T) -> LineBatch {
        let mut batch = LineBatch::default();
        lines.into_iter().for_each(|line| batch.push(line));
        batch
    }
}

/// Reads stdin on a plain thread like `spawn_stdin_reader`, handing lines over in batches: a
/// batch is sent when the read buffer is used up (the next line would wait for the writer) or
/// full.
pub(crate) fn spawn_stdin_batches(max_line_bytes: usize) -> InputBatches {
    const BATCH_LINES: usize = 1024;
    let (sender, receiver) = mpsc::channel(16);
    std::thread::spawn(move || {
        let mut input = std::io::BufReader::with_capacity(1 << 16, std::io::stdin().lock());
        let mut batch = LineBatch::default();
        while let Some(read) = read_limited_line(&mut input, max_line_bytes, batch.line_buffer()) {
            batch.end_line(read);
            if (batch.len() >= BATCH_LINES || input.buffer().is_empty())
                && sender.blocking_send(std::mem::take(&mut batch)).is_err()
            {
                return;
            }
        }
        if !batch.is_empty() {
            let _ = sender.blocking_send(batch);
        }
    });
    receiver
}
