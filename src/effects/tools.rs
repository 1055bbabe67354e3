//! Built-in tool effects (`read_file`, `list_dir`, `grep_search`): filesystem work with the same outcome shape and timeouts as `exec`.

use std::fs::{self, File};
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use indexmap::IndexMap;
use regex::Regex;
use tokio::time::Instant;

use super::EffectOutcome;
use crate::base::value::Value;
use crate::effects::sandbox::Grant;

/// Which tool to run, and on what.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum ToolRequest {
    ReadFile {
        path: PathBuf,
    },
    ListDir {
        path: PathBuf,
    },
    /// A regular expression (Rust `regex` syntax) searched line by line in a file, or in every file under a directory (recursively, skipping hidden entries and files that are not UTF-8).
    GrepSearch {
        pattern: String,
        path: PathBuf,
        limit: usize,
    },
}

impl ToolRequest {
    /// The tool's name, as protocols spell it.
    pub fn name(&self) -> &'static str {
        match self {
            ToolRequest::ReadFile { .. } => "read_file",
            ToolRequest::ListDir { .. } => "list_dir",
            ToolRequest::GrepSearch { .. } => "grep_search",
        }
    }

    /// The tool-specific keys when the tool produced nothing (an error, a timeout), so a protocol
    /// can read them from every outcome of the tool.
    pub(super) fn empty_details(&self) -> Vec<(&'static str, Value)> {
        match self {
            // The size is unknown, which is not the same as empty.
            ToolRequest::ReadFile { .. } => vec![("bytes", Value::Null)],
            ToolRequest::ListDir { .. } => vec![("entries", Value::List(Arc::new(Vec::new())))],
            ToolRequest::GrepSearch { .. } => vec![("matches", Value::Int(0))],
        }
    }
}

/// A tool to run, with the limits `exec` has.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ToolCall {
    pub tool: ToolRequest,
    pub timeout: Option<Duration>,
    /// Bytes of `stdout` kept; for `read_file`, bytes of the file read.
    pub output_limit: usize,
}

/// The longest line `grep_search` reads; a longer one is skipped (a file with no newline must
/// not become one allocation of its whole size).
pub const GREP_MAX_LINE_BYTES: usize = 1 << 20;

/// Runs the tool on a blocking thread, so a slow or hung filesystem never blocks the runtime.
///
/// On timeout the outcome is reported at once, but the blocking thread cannot be killed: a
/// system call stuck on a hung filesystem stays stuck. The thread finishes in the background and
/// its result is dropped. Between files, entries and lines it checks a cancellation flag, set
/// when this future ends or is dropped, so a long listing or search stops early.
///
/// Under a grant that restricts reading, the work runs on a thread of its own that the kernel
/// confines to the grant (`crate::effects::sandbox`), and every file it opens is checked by the engine
/// too, at this attempt: a link planted since the effect was admitted leads nowhere.
pub async fn run_tool(id: &str, call: &ToolCall, grant: Option<&Grant>) -> EffectOutcome {
    let started = Instant::now();
    let cancellation = Cancellation::default();
    let cancelled = Arc::clone(&cancellation.cancelled);
    let tool = call.tool.clone();
    let output_limit = call.output_limit;
    let readable = grant.filter(|grant| grant.0.restricts_reads()).cloned();
    let work = crate::effects::sandbox::run_blocking(readable.clone(), move || {
        perform(&tool, output_limit, &cancelled, readable.as_ref())
    });
    let joined = match call.timeout {
        None => work.await,
        // Real time, as for processes: the filesystem does not run on the virtual clock.
        Some(timeout) => match crate::base::clock::real_timeout(timeout, work).await {
            Some(joined) => joined,
            None => return timed_out_outcome(id, call, timeout, started.elapsed()),
        },
    };
    let report = joined.unwrap_or_else(|error| {
        // A panic in the tool, or the runtime shutting down under it.
        ToolReport::error(
            &call.tool,
            format!("`{}` stopped unexpectedly: {error}", call.tool.name()),
        )
    });
    report.into_outcome(id, started.elapsed())
}

/// Sets the flag when dropped: on completion, on timeout, or when the run is abandoned.
#[derive(Default)]
struct Cancellation {
    cancelled: Arc<AtomicBool>,
}

impl Drop for Cancellation {
    fn drop(&mut self) {
        self.cancelled.store(true, Ordering::Relaxed);
    }
}

/// What a tool produced, before it is shaped into outcome data.
#[derive(Debug)]
struct ToolReport {
    stdout: String,
    truncated: bool,
    /// The tool-specific keys: `bytes`, `entries` or `matches`.
    details: Vec<(&'static str, Value)>,
    failure: Option<Failure>,
}

#[derive(Debug)]
struct Failure {
    message: String,
    /// Empty when nothing went wrong but the answer is no (a search without match), as with grep.
    stderr: String,
}

impl ToolReport {
    fn success(stdout: String, truncated: bool, details: Vec<(&'static str, Value)>) -> Self {
        ToolReport {
            stdout,
            truncated,
            details,
            failure: None,
        }
    }

    /// The tool could not do its work: the message is also the error text.
    fn error(tool: &ToolRequest, message: String) -> Self {
        ToolReport {
            stdout: String::new(),
            truncated: false,
            details: tool.empty_details(),
            failure: Some(Failure {
                stderr: message.clone(),
                message,
            }),
        }
    }

    fn into_outcome(self, id: &str, duration: Duration) -> EffectOutcome {
        let succeeded = self.failure.is_none();
        let mut data = IndexMap::new();
        data.insert(Arc::from("id"), Value::string(id));
        data.insert(
            Arc::from("exit_code"),
            Value::Int(if succeeded { 0 } else { 1 }),
        );
        data.insert(Arc::from("stdout"), Value::string(self.stdout));
        let stderr = self
            .failure
            .as_ref()
            .map_or(String::new(), |failure| failure.stderr.clone());
        data.insert(Arc::from("stderr"), Value::string(stderr));
        data.insert(Arc::from("truncated"), Value::Bool(self.truncated));
        data.insert(Arc::from("duration_ms"), duration_value(duration));
        data.insert(Arc::from("timed_out"), Value::Bool(false));
        if let Some(failure) = self.failure {
            data.insert(Arc::from("message"), Value::string(failure.message));
        }
        for (key, value) in self.details {
            data.insert(Arc::from(key), value);
        }
        EffectOutcome {
            incomplete: false,
            succeeded,
            timed_out: false,
            data,
        }
    }
}

fn timed_out_outcome(
    id: &str,
    call: &ToolCall,
    timeout: Duration,
    duration: Duration,
) -> EffectOutcome {
    let mut data = IndexMap::new();
    data.insert(Arc::from("id"), Value::string(id));
    data.insert(Arc::from("exit_code"), Value::Null);
    data.insert(Arc::from("stdout"), Value::string(""));
    data.insert(Arc::from("stderr"), Value::string(""));
    data.insert(Arc::from("truncated"), Value::Bool(false));
    data.insert(Arc::from("duration_ms"), duration_value(duration));
    data.insert(Arc::from("timed_out"), Value::Bool(true));
    data.insert(
        Arc::from("message"),
        Value::string(format!("timed out after {} ms", timeout.as_millis())),
    );
    for (key, value) in call.tool.empty_details() {
        data.insert(Arc::from(key), value);
    }
    EffectOutcome {
        incomplete: false,
        succeeded: false,
        timed_out: true,
        data,
    }
}

fn duration_value(duration: Duration) -> Value {
    Value::Int(i64::try_from(duration.as_millis()).unwrap_or(i64::MAX))
}

fn count_value(count: u64) -> Value {
    Value::Int(i64::try_from(count).unwrap_or(i64::MAX))
}

/// The error a tool reports once it notices the run was abandoned; nobody reads it.
fn cancelled_error() -> io::Error {
    io::Error::new(io::ErrorKind::Interrupted, "cancelled")
}

/// Runs on the blocking thread.
fn perform(
    tool: &ToolRequest,
    output_limit: usize,
    cancelled: &AtomicBool,
    readable: Option<&Grant>,
) -> ToolReport {
    let root = match tool {
        ToolRequest::ReadFile { path }
        | ToolRequest::ListDir { path }
        | ToolRequest::GrepSearch { path, .. } => path,
    };
    if let Some(grant) = readable
        && let Err(denied) = grant.0.may_read(root)
    {
        return ToolReport::error(tool, denied.to_string());
    }
    match tool {
        ToolRequest::ReadFile { path } => read_file(path, output_limit).unwrap_or_else(|error| {
            ToolReport::error(tool, format!("cannot read `{}`: {error}", path.display()))
        }),
        ToolRequest::ListDir { path } => {
            list_dir(path, output_limit, cancelled).unwrap_or_else(|error| {
                ToolReport::error(tool, format!("cannot list `{}`: {error}", path.display()))
            })
        }
        ToolRequest::GrepSearch {
            pattern,
            path,
            limit,
        } => match Regex::new(pattern) {
            Err(error) => ToolReport::error(tool, format!("invalid pattern `{pattern}`: {error}")),
            Ok(regex) => {
                let mut search = Search {
                    regex: &regex,
                    limit: *limit,
                    output_limit,
                    cancelled,
                    readable,
                    stdout: String::new(),
                    reported: 0,
                    found: false,
                    truncated: false,
                    truncated_lines: false,
                };
                match search.run(path) {
                    Err(error) => ToolReport::error(
                        tool,
                        format!("cannot search `{}`: {error}", path.display()),
                    ),
                    Ok(()) => search.into_report(pattern),
                }
            }
        },
    }
}

/// `read_file`: the first `output_limit` bytes of the file, as text.
fn read_file(path: &Path, output_limit: usize) -> io::Result<ToolReport> {
    let file = File::open(path)?;
    let metadata = file.metadata()?;
    if metadata.is_dir() {
        // Opening a directory succeeds on Unix; say plainly why it cannot be read.
        return Err(io::Error::from(io::ErrorKind::IsADirectory));
    }
    // One byte past the limit tells whether there was more, even where the size is unknown (/proc).
    let wanted = u64::try_from(output_limit.saturating_add(1)).unwrap_or(u64::MAX);
    let mut content = Vec::new();
    file.take(wanted).read_to_end(&mut content)?;
    let truncated = content.len() > output_limit;
    content.truncate(output_limit);
    if truncated {
        // A secret cut by the limit would leave its first characters, which masking cannot tell.
        content.truncate(content.len() - crate::base::secrets::secret_begun_at_end(&content));
    }
    Ok(ToolReport::success(
        lossy_text(&content, truncated),
        truncated,
        vec![("bytes", count_value(metadata.len()))],
    ))
}

/// Lossy UTF-8; when the bytes were cut at a limit, a character cut in half is dropped rather
/// than shown as a replacement character.
fn lossy_text(bytes: &[u8], cut: bool) -> String {
    let mut end = bytes.len();
    if cut {
        // A UTF-8 character is at most 4 bytes: its start is among the last 3 bytes if it is cut.
        let tail_start = bytes.len().saturating_sub(3);
        if let Some(start) = (tail_start..bytes.len())
            .rev()
            .find(|&index| bytes[index] & 0b1100_0000 != 0b1000_0000)
            && let Err(error) = std::str::from_utf8(&bytes[start..])
            && error.error_len().is_none()
        {
            end = start + error.valid_up_to();
        }
    }
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// `list_dir`: entry names, sorted, directories suffixed with `/`. Hidden entries are listed:
/// this is a plain listing, and the ITTW fallback needs to see what is there.
fn list_dir(path: &Path, output_limit: usize, cancelled: &AtomicBool) -> io::Result<ToolReport> {
    let mut entries = Vec::new();
    for entry in fs::read_dir(path)? {
        if cancelled.load(Ordering::Relaxed) {
            return Err(cancelled_error());
        }
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        entries.push((name, is_directory(&entry)));
    }
    entries.sort();
    let mut stdout = String::new();
    let mut names = Vec::new();
    let mut truncated = false;
    for (name, directory) in entries {
        let line = if directory { format!("{name}/") } else { name };
        // Whole names only, so `entries` and `stdout` always agree.
        if stdout.len() + line.len() + 1 > output_limit {
            truncated = true;
            break;
        }
        stdout.push_str(&line);
        stdout.push('\n');
        names.push(Value::string(line));
    }
    Ok(ToolReport::success(
        stdout,
        truncated,
        vec![("entries", Value::List(Arc::new(names)))],
    ))
}

/// Whether the entry is a directory, following a symbolic link (a link to a directory can be
/// listed like one); a broken link is not a directory.
fn is_directory(entry: &fs::DirEntry) -> bool {
    match entry.file_type() {
        Ok(file_type) if file_type.is_symlink() => fs::metadata(entry.path())
            .map(|metadata| metadata.is_dir())
            .unwrap_or(false),
        Ok(file_type) => file_type.is_dir(),
        Err(_) => false,
    }
}

/// `grep_search` in progress.
struct Search<'a> {
    regex: &'a Regex,
    /// Matches reported at most.
    limit: usize,
    output_limit: usize,
    cancelled: &'a AtomicBool,
    readable: Option<&'a Grant>,
    stdout: String,
    /// Matching lines in `stdout`.
    reported: usize,
    /// Whether any line matched, reported or not.
    found: bool,
    /// Whether matches or output were left out: the search stops there.
    truncated: bool,
    /// Whether a line longer than `GREP_MAX_LINE_BYTES` was skipped.
    truncated_lines: bool,
}

impl Search<'_> {
    /// Searches the path: a file (given by name, so searched even if hidden, and decoded lossily
    /// if it is not UTF-8) or a directory, recursively.
    fn run(&mut self, path: &Path) -> io::Result<()> {
        if fs::metadata(path)?.is_dir() {
            // The root must be listable; below it, unreadable entries are skipped like grep -r
            // does, so one locked subdirectory does not hide the matches elsewhere.
            let entries = sorted_entries(path)?;
            self.search_entries(entries)
        } else {
            self.search_file(path, true)
        }
    }

    fn stopped(&self) -> bool {
        self.truncated || self.cancelled.load(Ordering::Relaxed)
    }

    /// Depth first, in name order, so the same tree always gives the same first matches.
    fn search_entries(&mut self, entries: Vec<fs::DirEntry>) -> io::Result<()> {
        for entry in entries {
            if self.stopped() {
                break;
            }
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let path = entry.path();
            let Ok(file_type) = entry.file_type() else {
                continue;
            };
            if file_type.is_dir() {
                if let Ok(entries) = sorted_entries(&path) {
                    self.search_entries(entries)?;
                }
            } else if file_type.is_file()
                // A link to a file is searched; a link to a directory is not followed, as it
                // may lead back up the tree.
                || (file_type.is_symlink()
                    && fs::metadata(&path).is_ok_and(|metadata| metadata.is_file()))
            {
                // An unreadable file is skipped, like a file that is not UTF-8.
                let _ = self.search_file(&path, false);
            }
        }
        if self.cancelled.load(Ordering::Relaxed) {
            return Err(cancelled_error());
        }
        Ok(())
    }

    /// Searches one file line by line. Unless `lossy`, a file with a line that is not UTF-8 is
    /// skipped entirely (its matches are only reported once the file is read), as far as the
    /// search reads it: once the limit is reached the rest of the file is not checked.
    fn search_file(&mut self, path: &Path, lossy: bool) -> io::Result<()> {
        // Every file is checked where it really is: a link in the granted tree may lead out.
        if let Some(grant) = self.readable
            && let Err(denied) = grant.0.may_read(path)
        {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                denied.to_string(),
            ));
        }
        let file = open_regular(path)?;
        let mut reader = BufReader::new(file);
        let mut pending = Vec::new();
        let mut bytes = Vec::new();
        let mut line_number = 0u64;
        loop {
            if self.cancelled.load(Ordering::Relaxed) {
                return Err(cancelled_error());
            }
            bytes.clear();
            let Some(read) =
                crate::base::text::read_limited_line(&mut reader, GREP_MAX_LINE_BYTES, &mut bytes)
            else {
                break;
            };
            line_number += 1;
            if read.is_err() {
                // Too long to search: skipped, and the search says it left something out.
                self.truncated_lines = true;
                continue;
            }
            let line = bytes.as_slice();
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let text = match std::str::from_utf8(line) {
                Ok(text) => std::borrow::Cow::Borrowed(text),
                Err(_) if lossy => String::from_utf8_lossy(line),
                Err(_) => return Ok(()),
            };
            if self.regex.is_match(&text) {
                self.found = true;
                if self.reported + pending.len() >= self.limit {
                    self.truncated = true;
                    break;
                }
                pending.push(format!("{}:{line_number}:{text}\n", path.display()));
            }
        }
        for line in pending {
            if !self.report(&line) {
                break;
            }
        }
        Ok(())
    }

    /// Adds a match to `stdout`, cut at the output limit; returns whether it fit whole.
    fn report(&mut self, line: &str) -> bool {
        let room = self.output_limit.saturating_sub(self.stdout.len());
        if line.len() <= room {
            self.stdout.push_str(line);
            self.reported += 1;
            return true;
        }
        // The part that fits is still worth showing: one huge line should not hide its match.
        let mut end = (0..=room)
            .rev()
            .find(|&index| line.is_char_boundary(index))
            .unwrap_or(0);
        // Less any first characters of a secret the cut left, which masking cannot tell.
        end -= crate::base::secrets::secret_begun_at_end(&line.as_bytes()[..end]);
        end = (0..=end)
            .rev()
            .find(|&index| line.is_char_boundary(index))
            .unwrap_or(0);
        if end > 0 {
            self.stdout.push_str(&line[..end]);
            self.reported += 1;
        }
        self.truncated = true;
        false
    }

    /// Success is finding a match, as with grep: a protocol's "grep succeeded" means it found
    /// something. No match is a failure with an empty `stderr`, since nothing went wrong.
    fn into_report(self, pattern: &str) -> ToolReport {
        let matches = count_value(u64::try_from(self.reported).unwrap_or(u64::MAX));
        ToolReport {
            stdout: self.stdout,
            truncated: self.truncated || self.truncated_lines,
            details: vec![("matches", matches)],
            failure: (!self.found).then(|| Failure {
                message: format!("no line matches `{pattern}`"),
                stderr: String::new(),
            }),
        }
    }
}

/// Opens a regular file for reading, without blocking on a FIFO; anything else (a FIFO, a
/// device such as `/dev/zero`) is refused: it could block the search or never end.
fn open_regular(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    Ok(file)
}

/// The entries of a directory, sorted by name.
fn sorted_entries(path: &Path) -> io::Result<Vec<fs::DirEntry>> {
    let mut entries = fs::read_dir(path)?.collect::<io::Result<Vec<_>>>()?;
    entries.sort_by_key(|entry| entry.file_name());
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// A directory of real files for one test, removed when the test ends.
    struct Scratch {
        root: PathBuf,
    }

    impl Scratch {
        fn new(test: &str) -> Scratch {
            let root = std::env::temp_dir()
                .join(format!("protocol-run-tools-{}-{test}", std::process::id()));
            let _ = fs::remove_dir_all(&root);
            fs::create_dir_all(&root).unwrap();
            Scratch { root }
        }

        fn write(&self, relative: &str, content: impl AsRef<[u8]>) -> PathBuf {
            let path = self.root.join(relative);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, content).unwrap();
            path
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.root);
        }
    }

    fn run(tool: ToolRequest) -> EffectOutcome {
        run_with_limit(tool, 1 << 20)
    }

    fn run_with_limit(tool: ToolRequest, output_limit: usize) -> EffectOutcome {
        let call = ToolCall {
            tool,
            timeout: Some(Duration::from_secs(10)),
            output_limit,
        };
        runtime().block_on(run_tool("tool", &call, None))
    }

    fn text<'a>(outcome: &'a EffectOutcome, key: &str) -> &'a str {
        outcome.data[key].as_str().unwrap()
    }

    fn grep(pattern: &str, path: PathBuf, limit: usize) -> ToolRequest {
        ToolRequest::GrepSearch {
            pattern: pattern.to_string(),
            path,
            limit,
        }
    }

    #[test]
    fn reads_a_file_with_the_keys_of_a_process_outcome() {
        let scratch = Scratch::new("read");
        let content = "class Agent:\n    def run(self): ...\n";
        let path = scratch.write("notes.txt", content);
        let outcome = run(ToolRequest::ReadFile { path });
        assert!(outcome.succeeded && !outcome.timed_out);
        assert_eq!(text(&outcome, "stdout"), content);
        assert_eq!(text(&outcome, "stderr"), "");
        assert_eq!(outcome.data["exit_code"], Value::Int(0));
        assert_eq!(outcome.data["truncated"], Value::Bool(false));
        assert_eq!(outcome.data["bytes"], Value::Int(content.len() as i64));
        assert!(!outcome.data.contains_key("message"));
        // Protocols treat tool and exec outcomes alike: every key of a process outcome is here.
        let process = EffectOutcome::from_process(
            "tool",
            &super::super::process::ProcessOutcome {
                exit_code: Some(0),
                signal: None,
                stdout: String::new(),
                stderr: String::new(),
                truncated: false,
                duration: Duration::ZERO,
                timed_out: false,
            },
        );
        for key in process.data.keys() {
            assert!(outcome.data.contains_key(key), "missing `{key}`");
        }
    }

    #[test]
    fn reading_a_missing_file_or_a_directory_fails_with_the_path_and_the_os_error() {
        let scratch = Scratch::new("read-missing");
        let missing = scratch.root.join("missing.txt");
        let outcome = run(ToolRequest::ReadFile {
            path: missing.clone(),
        });
        assert!(!outcome.succeeded && !outcome.timed_out);
        assert_eq!(outcome.data["exit_code"], Value::Int(1));
        assert_eq!(outcome.data["bytes"], Value::Null);
        let message = text(&outcome, "message");
        assert!(
            message.contains(&missing.display().to_string()),
            "{message}"
        );
        assert!(message.contains("No such file or directory"), "{message}");
        assert_eq!(text(&outcome, "stderr"), message);

        let outcome = run(ToolRequest::ReadFile {
            path: scratch.root.clone(),
        });
        assert!(!outcome.succeeded);
        assert!(text(&outcome, "message").contains("is a directory"));
    }

    #[test]
    fn reading_past_the_output_limit_truncates() {
        let scratch = Scratch::new("read-limit");
        let path = scratch.write("long.txt", "hello world");
        let outcome = run_with_limit(ToolRequest::ReadFile { path: path.clone() }, 5);
        assert!(outcome.succeeded);
        assert_eq!(text(&outcome, "stdout"), "hello");
        assert_eq!(outcome.data["truncated"], Value::Bool(true));
        assert_eq!(outcome.data["bytes"], Value::Int(11));
        // Exactly at the limit is not truncated.
        let outcome = run_with_limit(ToolRequest::ReadFile { path }, 11);
        assert_eq!(outcome.data["truncated"], Value::Bool(false));
        // A character cut by the limit is dropped, not replaced.
        let path = scratch.write("accents.txt", "café");
        let outcome = run_with_limit(ToolRequest::ReadFile { path }, 4);
        assert_eq!(text(&outcome, "stdout"), "caf");
    }

    #[test]
    fn lists_a_directory_sorted_with_hidden_entries_and_directories_marked() {
        let scratch = Scratch::new("list");
        scratch.write("b.txt", "");
        scratch.write("a/inner.txt", "");
        scratch.write(".hidden", "");
        std::os::unix::fs::symlink(scratch.root.join("a"), scratch.root.join("c-link")).unwrap();
        let outcome = run(ToolRequest::ListDir {
            path: scratch.root.clone(),
        });
        assert!(outcome.succeeded);
        assert_eq!(text(&outcome, "stdout"), ".hidden\na/\nb.txt\nc-link/\n");
        assert_eq!(
            outcome.data["entries"],
            Value::List(Arc::new(
                [".hidden", "a/", "b.txt", "c-link/"]
                    .map(Value::string)
                    .to_vec()
            ))
        );
        // Whole names only: `entries` matches the cut `stdout`.
        let outcome = run_with_limit(
            ToolRequest::ListDir {
                path: scratch.root.clone(),
            },
            12,
        );
        assert_eq!(text(&outcome, "stdout"), ".hidden\na/\n");
        assert_eq!(outcome.data["truncated"], Value::Bool(true));
        assert_eq!(
            outcome.data["entries"],
            Value::List(Arc::new([".hidden", "a/"].map(Value::string).to_vec()))
        );
    }

    #[test]
    fn listing_a_missing_directory_or_a_file_fails() {
        let scratch = Scratch::new("list-missing");
        let missing = scratch.root.join("gone");
        let outcome = run(ToolRequest::ListDir {
            path: missing.clone(),
        });
        assert!(!outcome.succeeded);
        assert_eq!(outcome.data["exit_code"], Value::Int(1));
        assert_eq!(outcome.data["entries"], Value::List(Arc::new(Vec::new())));
        let message = text(&outcome, "message");
        assert!(message.starts_with(&format!("cannot list `{}`: ", missing.display())));
        assert_eq!(text(&outcome, "stderr"), message);

        let file = scratch.write("plain.txt", "x");
        let outcome = run(ToolRequest::ListDir { path: file });
        assert!(!outcome.succeeded);
        assert!(text(&outcome, "message").contains("Not a directory"));
    }

    #[test]
    fn greps_a_file_reporting_its_path() {
        let scratch = Scratch::new("grep-file");
        let path = scratch.write(
            "agent.py",
            "import os\nclass Agent:\n    def run(self):\r\n",
        );
        let outcome = run(grep(r"class|def", path.clone(), 10));
        assert!(outcome.succeeded);
        let shown = path.display();
        assert_eq!(
            text(&outcome, "stdout"),
            format!("{shown}:2:class Agent:\n{shown}:3:    def run(self):\n")
        );
        assert_eq!(outcome.data["matches"], Value::Int(2));
        assert_eq!(outcome.data["exit_code"], Value::Int(0));
        assert_eq!(outcome.data["truncated"], Value::Bool(false));
    }

    #[test]
    fn a_search_without_match_fails_with_exit_code_1_and_no_error_text() {
        let scratch = Scratch::new("grep-none");
        let path = scratch.write("agent.py", "import os\n");
        let outcome = run(grep("TODO", path, 10));
        assert!(!outcome.succeeded && !outcome.timed_out);
        assert_eq!(outcome.data["exit_code"], Value::Int(1));
        assert_eq!(text(&outcome, "message"), "no line matches `TODO`");
        assert_eq!(text(&outcome, "stderr"), "");
        assert_eq!(outcome.data["matches"], Value::Int(0));
    }

    #[test]
    fn greps_a_directory_recursively_up_to_the_limit() {
        let scratch = Scratch::new("grep-dir");
        scratch.write("b.py", "def second():\n");
        scratch.write("a/deep.py", "x = 1\ndef first():\n");
        scratch.write("c.py", "def third():\n");
        scratch.write(".git/config", "def hidden():\n");
        scratch.write("binary.bin", b"def \xff\xfe\n");
        let root = scratch.root.clone();
        let outcome = run(grep("^def", root.clone(), 10));
        assert!(outcome.succeeded);
        let root_shown = root.display();
        assert_eq!(
            text(&outcome, "stdout"),
            format!(
                "{root_shown}/a/deep.py:2:def first():\n{root_shown}/b.py:1:def second():\n\
                 {root_shown}/c.py:1:def third():\n"
            )
        );
        assert_eq!(outcome.data["matches"], Value::Int(3));
        assert_eq!(outcome.data["truncated"], Value::Bool(false));

        let outcome = run(grep("^def", root.clone(), 2));
        assert!(outcome.succeeded);
        assert_eq!(outcome.data["matches"], Value::Int(2));
        assert_eq!(outcome.data["truncated"], Value::Bool(true));
        assert!(text(&outcome, "stdout").ends_with("b.py:1:def second():\n"));

        // Exactly `limit` matches is not truncated.
        let outcome = run(grep("^def", root, 3));
        assert_eq!(outcome.data["truncated"], Value::Bool(false));
    }

    #[test]
    fn an_invalid_pattern_fails_clearly() {
        let scratch = Scratch::new("grep-invalid");
        let outcome = run(grep("(", scratch.root.clone(), 10));
        assert!(!outcome.succeeded);
        assert_eq!(outcome.data["exit_code"], Value::Int(1));
        let message = text(&outcome, "message");
        assert!(message.starts_with("invalid pattern `(`: "), "{message}");
        assert_eq!(text(&outcome, "stderr"), message);
    }

    #[test]
    fn a_hung_read_times_out_without_blocking_the_runtime() {
        let scratch = Scratch::new("timeout");
        // Opening a FIFO for reading blocks until a writer comes: a stand-in for a hung filesystem.
        let fifo = scratch.root.join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let call = ToolCall {
            tool: ToolRequest::ReadFile { path: fifo.clone() },
            timeout: Some(Duration::from_millis(50)),
            output_limit: 1024,
        };
        let runtime = runtime();
        let outcome = runtime.block_on(run_tool("stuck", &call, None));
        assert!(!outcome.succeeded && outcome.timed_out);
        assert_eq!(outcome.data["exit_code"], Value::Null);
        assert_eq!(outcome.data["timed_out"], Value::Bool(true));
        assert_eq!(text(&outcome, "message"), "timed out after 50 ms");
        assert_eq!(outcome.data["bytes"], Value::Null);
        // Release the blocked thread (it reads end of file), so dropping the runtime, which
        // waits for blocking threads, returns.
        drop(File::options().write(true).open(&fifo).unwrap());
        drop(runtime);
    }
}
