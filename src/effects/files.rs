//! File effects: atomic writes, JSON-lines appends, JSON read-modify-write, backup and restore.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use indexmap::IndexMap;
use tokio::time::Instant;

use super::EffectOutcome;
use crate::base::files::{append_line, copy_atomically, lock_exclusively, write_atomically};
use crate::base::value::Value;

/// What to do to which file.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum FileRequest {
    /// Replace the file atomically (temp file in the same directory, fsync, rename, fsync the
    /// directory); parent directories are created.
    Write { path: PathBuf, content: String },
    /// Append one line (a newline is added if missing) and fsync: for JSON-lines ledgers.
    /// Concurrent appenders never interleave partial lines: the file is opened with O_APPEND
    /// and the whole line goes out in one write call.
    Append { path: PathBuf, line: String },
    /// Read-modify-write of a JSON file: parse it (a missing file counts as `{}`), append `item`
    /// to the array at the JSON pointer `array` (creating the array and intermediate objects if
    /// missing), keep every other key, write back atomically. A file that is not valid JSON is a
    /// failure that leaves the file untouched.
    AppendToJsonArray {
        path: PathBuf,
        array: String,
        item: serde_json::Value,
    },
    /// Copy `path` to `backup` atomically (the backup never exists half-written).
    Backup { path: PathBuf, backup: PathBuf },
    /// Copy `backup` back over `path` atomically.
    Restore { path: PathBuf, backup: PathBuf },
}

impl FileRequest {
    /// The file the request writes (for a backup, the backup).
    pub fn written_path(&self) -> &Path {
        match self {
            FileRequest::Backup { backup, .. } => backup,
            other => other.path(),
        }
    }

    /// The file the request is about (for a backup, the file backed up).
    pub fn path(&self) -> &Path {
        match self {
            FileRequest::Write { path, .. }
            | FileRequest::Append { path, .. }
            | FileRequest::AppendToJsonArray { path, .. }
            | FileRequest::Backup { path, .. }
            | FileRequest::Restore { path, .. } => path,
        }
    }
}

/// How long a writer waits for another writer of the same file (another run of the same
/// protocol, say) before it fails.
pub const LOCK_WAIT: Duration = Duration::from_secs(5);

/// Why a file effect failed.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("cannot {action} {path}: {error}")]
    Io {
        action: &'static str,
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{path} is not valid JSON ({error}); it was left unchanged")]
    InvalidJson {
        path: PathBuf,
        error: serde_json::Error,
    },
    #[error("`{pointer}` is not a JSON pointer: {reason}")]
    InvalidPointer {
        pointer: String,
        reason: &'static str,
    },
    #[error("cannot append to `{pointer}` in {path}: {reason}; it was left unchanged")]
    NotAnArray {
        path: PathBuf,
        pointer: String,
        reason: String,
    },
    #[error("cannot back up {path}: it does not exist")]
    MissingOriginal { path: PathBuf },
    #[error("cannot restore {path}: the backup {backup} does not exist")]
    MissingBackup { path: PathBuf, backup: PathBuf },
    #[error("{reason} (at this attempt, {path} leads outside the grant)")]
    Denied { path: PathBuf, reason: String },
    #[error("the file effect on {path} stopped unexpectedly: {reason}")]
    Interrupted { path: PathBuf, reason: String },
}

/// Runs a file effect on the blocking pool and reports it in the shape of a process outcome
/// (`exit_code` 0 or 1, empty `stdout`, the error in `stderr` and `message`) plus `path`,
/// `bytes` written and, for backups and restores, `backup`.
///
/// Dropping the future does not stop the filesystem work: it finishes (or fails) whole, which
/// is what keeps every file either old or new.
///
/// Under a grant, each attempt checks its paths again where they lead now, then works on a
/// thread the kernel confines to the grant (`crate::effects::sandbox`): a link swapped in between
/// attempts, or during this one, cannot carry the work out of `read` or `write`.
pub async fn run_file_effect(
    id: &str,
    request: &FileRequest,
    grant: Option<&crate::effects::sandbox::Grant>,
) -> EffectOutcome {
    let started = Instant::now();
    if let Some(grant) = grant {
        let checked = grant
            .0
            .check_file(request)
            .map_err(|denied| FileError::Denied {
                path: request.path().to_path_buf(),
                reason: denied.to_string(),
            });
        // The directory written to is made before the kernel confines the work: a granted
        // directory that does not exist yet would have no rule.
        let prepared = checked.and_then(|()| {
            let written = request.written_path();
            std::fs::create_dir_all(crate::base::files::parent_directory(written)).map_err(
                |error| FileError::Io {
                    action: "create the directory of",
                    path: written.to_path_buf(),
                    error,
                },
            )
        });
        if let Err(error) = prepared {
            return outcome(id, request, Err(error), started.elapsed());
        }
    }
    let owned = request.clone();
    let result = crate::effects::sandbox::run_blocking(grant.cloned(), move || perform(&owned))
        .await
        .unwrap_or_else(|reason| {
            Err(FileError::Interrupted {
                path: request.path().to_path_buf(),
                reason,
            })
        });
    outcome(id, request, result, started.elapsed())
}

fn outcome(
    id: &str,
    request: &FileRequest,
    result: Result<u64, FileError>,
    duration: Duration,
) -> EffectOutcome {
    let mut data = IndexMap::new();
    let mut insert = |key: &str, value: Value| {
        data.insert(Arc::from(key), value);
    };
    insert("id", Value::string(id));
    insert("path", Value::string(request.path().to_string_lossy()));
    if let FileRequest::Backup { backup, .. } | FileRequest::Restore { backup, .. } = request {
        insert("backup", Value::string(backup.to_string_lossy()));
    }
    let succeeded = result.is_ok();
    insert("exit_code", Value::Int(if succeeded { 0 } else { 1 }));
    insert("stdout", Value::string(""));
    let message = result.as_ref().err().map(ToString::to_string);
    insert("stderr", Value::string(message.as_deref().unwrap_or("")));
    insert("truncated", Value::Bool(false));
    insert("duration_ms", Value::Int(duration.as_millis() as i64));
    insert("timed_out", Value::Bool(false));
    // Present on failure too, so guards can read it without checking for a missing key.
    let bytes = result.as_ref().copied().unwrap_or(0);
    insert(
        "bytes",
        Value::Int(i64::try_from(bytes).unwrap_or(i64::MAX)),
    );
    if let Some(message) = message {
        insert("message", Value::string(message));
    }
    EffectOutcome {
        incomplete: false,
        succeeded,
        timed_out: false,
        data,
    }
}

/// Does the filesystem work and returns the bytes written.
fn perform(request: &FileRequest) -> Result<u64, FileError> {
    let io = |action: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |error| FileError::Io {
            action,
            path,
            error,
        }
    };
    match request {
        FileRequest::Write { path, content } => {
            // Locked like a read-modify-write, so a write never lands inside one and gets lost.
            let _lock = lock_exclusively(path, LOCK_WAIT).map_err(io("lock", path))?;
            write_atomically(path, content.as_bytes()).map_err(io("write", path))?;
            Ok(content.len() as u64)
        }
        // O_APPEND already orders appenders; a lock would only slow a ledger down.
        FileRequest::Append { path, line } => {
            append_line(path, line).map_err(io("append to", path))
        }
        FileRequest::AppendToJsonArray { path, array, item } => {
            append_to_json_array(path, array, item)
        }
        FileRequest::Backup { path, backup } => {
            let _lock = lock_exclusively(backup, LOCK_WAIT).map_err(io("lock", backup))?;
            // Writers only ever rename over `path`, so the open file is a consistent snapshot.
            copy_atomically(path, backup).map_err(|error| match error.kind() {
                std::io::ErrorKind::NotFound if !path.exists() => {
                    FileError::MissingOriginal { path: path.clone() }
                }
                _ => io("back up", path)(error),
            })
        }
        FileRequest::Restore { path, backup } => {
            let _lock = lock_exclusively(path, LOCK_WAIT).map_err(io("lock", path))?;
            copy_atomically(backup, path).map_err(|error| match error.kind() {
                std::io::ErrorKind::NotFound if !backup.exists() => FileError::MissingBackup {
                    path: path.clone(),
                    backup: backup.clone(),
                },
                _ => io("restore", path)(error),
            })
        }
    }
}

fn append_to_json_array(
    path: &Path,
    pointer: &str,
    item: &serde_json::Value,
) -> Result<u64, FileError> {
    let tokens = parse_pointer(pointer)?;
    let io = |action: &'static str| {
        move |error| FileError::Io {
            action,
            path: path.to_path_buf(),
            error,
        }
    };
    // Held from the read to the rename, so two runs cannot both read the old array and each
    // write back only their own item.
    let _lock = lock_exclusively(path, LOCK_WAIT).map_err(io("lock"))?;
    let mut document = match std::fs::read(path) {
        Ok(text) => serde_json::from_slice(&text).map_err(|error| FileError::InvalidJson {
            path: path.to_path_buf(),
            error,
        })?,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            serde_json::Value::Object(serde_json::Map::new())
        }
        Err(error) => return Err(io("read")(error)),
    };
    let array =
        find_or_create_array(&mut document, &tokens).map_err(|reason| FileError::NotAnArray {
            path: path.to_path_buf(),
            pointer: pointer.to_string(),
            reason,
        })?;
    array.push(item.clone());
    // Pretty, with a final newline: these files are read and diffed by people too.
    let mut text = serde_json::to_string_pretty(&document).map_err(|error| FileError::Io {
        action: "serialize",
        path: path.to_path_buf(),
        error: error.into(),
    })?;
    text.push('\n');
    write_atomically(path, text.as_bytes()).map_err(io("write"))?;
    Ok(text.len() as u64)
}

/// The reference tokens of an RFC 6901 JSON pointer, unescaped.
fn parse_pointer(pointer: &str) -> Result<Vec<String>, FileError> {
    let invalid = |reason| FileError::InvalidPointer {
        pointer: pointer.to_string(),
        reason,
    };
    if pointer.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = pointer.strip_prefix('/') else {
        return Err(invalid("it must be empty or start with `/`"));
    };
    rest.split('/')
        .map(|token| {
            let mut unescaped = String::with_capacity(token.len());
            let mut characters = token.chars();
            while let Some(character) = characters.next() {
                if character != '~' {
                    unescaped.push(character);
                    continue;
                }
                match characters.next() {
                    Some('0') => unescaped.push('~'),
                    Some('1') => unescaped.push('/'),
                    _ => return Err(invalid("`~` must be followed by 0 or 1")),
                }
            }
            Ok(unescaped)
        })
        .collect()
}

/// The array at `tokens`, creating it and missing intermediate objects. A `null` counts as
/// missing, since it is how many tools write "no entries yet".
fn find_or_create_array<'document>(
    document: &'document mut serde_json::Value,
    tokens: &[String],
) -> Result<&'document mut Vec<serde_json::Value>, String> {
    use serde_json::Value as Json;
    let mut current = document;
    for (index, token) in tokens.iter().enumerate() {
        let last = index + 1 == tokens.len();
        let missing = || {
            if last {
                Json::Array(Vec::new())
            } else {
                Json::Object(serde_json::Map::new())
            }
        };
        current = match current {
            Json::Object(members) => {
                let member = members.entry(token.as_str()).or_insert_with(missing);
                if member.is_null() {
                    *member = missing();
                }
                member
            }
            Json::Array(elements) => {
                let length = elements.len();
                token
                    .parse::<usize>()
                    .ok()
                    .and_then(|position| elements.get_mut(position))
                    .ok_or_else(|| {
                        format!(
                            "`{token}` is not an index of the array of {length} at `{}`",
                            escape_pointer(&tokens[..index])
                        )
                    })?
            }
            other => {
                return Err(format!(
                    "there is {} at `{}`, not an object or array",
                    describe(other),
                    escape_pointer(&tokens[..index])
                ));
            }
        };
    }
    match current {
        Json::Array(elements) => Ok(elements),
        other => Err(format!("there is {} there, not an array", describe(other))),
    }
}

fn escape_pointer(tokens: &[String]) -> String {
    tokens
        .iter()
        .map(|token| format!("/{}", token.replace('~', "~0").replace('/', "~1")))
        .collect()
}

fn describe(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// A fresh directory under the system temporary directory, removed when dropped.
    struct Scratch {
        directory: PathBuf,
    }

    impl Scratch {
        fn new(name: &str) -> Scratch {
            static COUNTER: AtomicU64 = AtomicU64::new(0);
            let directory = std::env::temp_dir().join(format!(
                "protocol-run-file-effects-{}-{}-{name}",
                std::process::id(),
                COUNTER.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = std::fs::remove_dir_all(&directory);
            std::fs::create_dir_all(&directory).unwrap();
            Scratch { directory }
        }

        fn path(&self, relative: &str) -> PathBuf {
            self.directory.join(relative)
        }

        /// Names of the temporary files left anywhere below the directory.
        fn temporary_files(&self) -> Vec<String> {
            let mut found = Vec::new();
            let mut pending = vec![self.directory.clone()];
            while let Some(directory) = pending.pop() {
                for entry in std::fs::read_dir(&directory).unwrap() {
                    let entry = entry.unwrap();
                    let name = entry.file_name().to_string_lossy().into_owned();
                    if entry.file_type().unwrap().is_dir() {
                        pending.push(entry.path());
                    } else if name.ends_with(".tmp") {
                        found.push(name);
                    }
                }
            }
            found
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.directory);
        }
    }

    fn run(request: FileRequest) -> EffectOutcome {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(run_file_effect("file", &request, None))
    }

    fn message(outcome: &EffectOutcome) -> &str {
        outcome.data["message"].as_str().unwrap()
    }

    fn read(path: &Path) -> String {
        std::fs::read_to_string(path).unwrap()
    }

    fn append_to_array(path: &Path, array: &str, item: serde_json::Value) -> EffectOutcome {
        run(FileRequest::AppendToJsonArray {
            path: path.to_path_buf(),
            array: array.to_string(),
            item,
        })
    }

    fn json_file(path: &Path) -> serde_json::Value {
        serde_json::from_str(&read(path)).unwrap()
    }

    #[test]
    fn write_creates_parent_directories_replaces_content_and_leaves_no_temporary_file() {
        let scratch = Scratch::new("write");
        let path = scratch.path("reports/escalations/level-2.md");
        let write = |content: &str| {
            run(FileRequest::Write {
                path: path.clone(),
                content: content.to_string(),
            })
        };
        let first = write("first report, longer than the second");
        assert!(first.succeeded, "{:?}", first.data);
        let second = write("second");
        assert!(second.succeeded);
        assert_eq!(read(&path), "second");
        assert_eq!(second.data["exit_code"], Value::Int(0));
        assert_eq!(second.data["bytes"], Value::Int(6));
        assert_eq!(
            second.data["path"],
            Value::string(path.to_string_lossy().as_ref())
        );
        for key in ["stdout", "stderr"] {
            assert_eq!(second.data[key], Value::string(""));
        }
        for key in ["truncated", "timed_out"] {
            assert_eq!(second.data[key], Value::Bool(false));
        }
        assert!(matches!(second.data["duration_ms"], Value::Int(_)));
        assert!(!second.data.contains_key("message"));
        assert_eq!(scratch.temporary_files(), Vec::<String>::new());
    }

    #[test]
    fn a_failed_write_reports_why_and_leaves_no_temporary_file() {
        let scratch = Scratch::new("write-fails");
        // Renaming a file over a non-empty directory fails after the temporary file is written.
        let path = scratch.path("occupied");
        std::fs::create_dir_all(path.join("inside")).unwrap();
        let outcome = run(FileRequest::Write {
            path: path.clone(),
            content: "content".into(),
        });
        assert!(!outcome.succeeded && !outcome.timed_out);
        assert_eq!(outcome.data["exit_code"], Value::Int(1));
        assert!(message(&outcome).starts_with("cannot write"), "{outcome:?}");
        assert_eq!(outcome.data["stderr"], outcome.data["message"]);
        assert_eq!(scratch.temporary_files(), Vec::<String>::new());
    }

    #[test]
    fn a_reader_polling_during_writes_only_ever_sees_complete_contents() {
        let scratch = Scratch::new("no-partial");
        let path = scratch.path("state.json");
        let contents = ["a".repeat(64 * 1024) + "\n", "b".repeat(64 * 1024) + "\n"];
        write_atomically(&path, contents[0].as_bytes()).unwrap();
        let done = std::sync::atomic::AtomicBool::new(false);
        let reads = std::thread::scope(|scope| {
            scope.spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap();
                for round in 0..200 {
                    let request = FileRequest::Write {
                        path: path.clone(),
                        content: contents[round % 2].clone(),
                    };
                    let outcome = runtime.block_on(run_file_effect("write", &request, None));
                    assert!(outcome.succeeded, "{:?}", outcome.data);
                }
                done.store(true, Ordering::SeqCst);
            });
            let mut reads = 0;
            while !done.load(Ordering::SeqCst) {
                let seen = read(&path);
                assert!(
                    contents.contains(&seen),
                    "saw {} bytes that are neither content",
                    seen.len()
                );
                reads += 1;
            }
            reads
        });
        assert!(reads > 0);
        assert_eq!(scratch.temporary_files(), Vec::<String>::new());
    }

    #[test]
    fn append_adds_lines_with_a_newline_only_where_missing() {
        let scratch = Scratch::new("append");
        let path = scratch.path("ledger/events.jsonl");
        let append = |line: &str| {
            run(FileRequest::Append {
                path: path.clone(),
                line: line.to_string(),
            })
        };
        let first = append(r#"{"event": 1}"#);
        assert!(first.succeeded, "{:?}", first.data);
        assert_eq!(first.data["bytes"], Value::Int(13));
        assert!(append("{\"event\": 2}\n").succeeded);
        assert_eq!(read(&path), "{\"event\": 1}\n{\"event\": 2}\n");
    }

    #[test]
    fn concurrent_appenders_never_interleave_partial_lines() {
        let scratch = Scratch::new("append-concurrent");
        let path = scratch.path("ledger.jsonl");
        std::thread::scope(|scope| {
            for writer in 0..4 {
                let path = &path;
                scope.spawn(move || {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .build()
                        .unwrap();
                    // Long lines make a torn write likely to show, were it possible.
                    let padding = char::from(b'a' + writer).to_string().repeat(300);
                    for sequence in 0..100 {
                        let request = FileRequest::Append {
                            path: path.clone(),
                            line:
                                json!({"writer": writer, "sequence": sequence, "padding": padding})
                                    .to_string(),
                        };
                        let outcome = runtime.block_on(run_file_effect("append", &request, None));
                        assert!(outcome.succeeded, "{:?}", outcome.data);
                    }
                });
            }
        });
        let text = read(&path);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 400);
        let mut seen = std::collections::HashSet::new();
        for line in lines {
            let entry: serde_json::Value = serde_json::from_str(line).unwrap();
            let writer = entry["writer"].as_u64().unwrap();
            let letter = char::from(b'a' + writer as u8).to_string();
            assert_eq!(entry["padding"], json!(letter.repeat(300)));
            assert!(seen.insert((writer, entry["sequence"].as_u64().unwrap())));
        }
    }

    #[test]
    fn append_to_json_array_creates_a_missing_file() {
        let scratch = Scratch::new("json-missing");
        let path = scratch.path("state/workflow.json");
        let outcome = append_to_array(&path, "/failure_escalations", json!({"level": 1}));
        assert!(outcome.succeeded, "{:?}", outcome.data);
        assert_eq!(
            json_file(&path),
            json!({"failure_escalations": [{"level": 1}]})
        );
        assert_eq!(outcome.data["bytes"], Value::Int(read(&path).len() as i64));
        assert_eq!(scratch.temporary_files(), Vec::<String>::new());
    }

    #[test]
    fn append_to_json_array_keeps_other_keys_in_order() {
        let scratch = Scratch::new("json-other");
        let path = scratch.path("workflow.json");
        std::fs::write(&path, r#"{"other": 1}"#).unwrap();
        assert!(append_to_array(&path, "/failure_escalations", json!("esc-1")).succeeded);
        let text = read(&path);
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&text).unwrap(),
            json!({"other": 1, "failure_escalations": ["esc-1"]})
        );
        assert!(text.find("other") < text.find("failure_escalations"));
    }

    #[test]
    fn append_to_json_array_appends_to_an_existing_array() {
        let scratch = Scratch::new("json-existing");
        let path = scratch.path("workflow.json");
        std::fs::write(
            &path,
            r#"{"failure_escalations": [{"level": 1}], "status": "running"}"#,
        )
        .unwrap();
        assert!(append_to_array(&path, "/failure_escalations", json!({"level": 2})).succeeded);
        assert_eq!(
            json_file(&path),
            json!({"failure_escalations": [{"level": 1}, {"level": 2}], "status": "running"})
        );
    }

    #[test]
    fn append_to_json_array_refuses_invalid_json_and_leaves_the_file_unchanged() {
        let scratch = Scratch::new("json-invalid");
        let path = scratch.path("workflow.json");
        let corrupt = r#"{"failure_escalations": [{"level": 1}"#;
        std::fs::write(&path, corrupt).unwrap();
        let outcome = append_to_array(&path, "/failure_escalations", json!({"level": 2}));
        assert!(!outcome.succeeded);
        assert_eq!(outcome.data["exit_code"], Value::Int(1));
        assert!(
            message(&outcome).contains("is not valid JSON"),
            "{outcome:?}"
        );
        assert_eq!(read(&path), corrupt);
        assert_eq!(scratch.temporary_files(), Vec::<String>::new());
    }

    #[test]
    fn append_to_json_array_follows_a_nested_pointer() {
        let scratch = Scratch::new("json-nested");
        let path = scratch.path("workflow.json");
        assert!(append_to_array(&path, "/a/b", json!(1)).succeeded);
        assert!(append_to_array(&path, "/a/b", json!(2)).succeeded);
        assert!(append_to_array(&path, "/a/c~1d", json!(3)).succeeded);
        assert_eq!(json_file(&path), json!({"a": {"b": [1, 2], "c/d": [3]}}));
    }

    #[test]
    fn append_to_json_array_refuses_what_is_not_an_array() {
        let scratch = Scratch::new("json-not-array");
        let path = scratch.path("workflow.json");
        let original = r#"{"a": {"b": 7}}"#;
        std::fs::write(&path, original).unwrap();
        let not_array = append_to_array(&path, "/a/b", json!(1));
        assert!(message(&not_array).contains("a number"), "{not_array:?}");
        let through_scalar = append_to_array(&path, "/a/b/c", json!(1));
        assert!(
            message(&through_scalar).contains("at `/a/b`"),
            "{through_scalar:?}"
        );
        let bad_pointer = append_to_array(&path, "a", json!(1));
        assert!(
            message(&bad_pointer).contains("not a JSON pointer"),
            "{bad_pointer:?}"
        );
        assert_eq!(read(&path), original);
    }

    #[test]
    fn concurrent_read_modify_writes_lose_no_item() {
        let scratch = Scratch::new("json-concurrent");
        let path = scratch.path("workflow.json");
        std::thread::scope(|scope| {
            for writer in 0..4 {
                let path = &path;
                scope.spawn(move || {
                    for sequence in 0..10 {
                        let outcome = append_to_array(path, "/entries", json!([writer, sequence]));
                        assert!(outcome.succeeded, "{:?}", outcome.data);
                    }
                });
            }
        });
        let document = json_file(&path);
        assert_eq!(document["entries"].as_array().unwrap().len(), 40);
    }

    #[test]
    fn backup_then_restore_round_trips() {
        let scratch = Scratch::new("backup");
        let path = scratch.path("workflow.json");
        let backup = scratch.path("backups/workflow.json.bak");
        let original = r#"{"status": "good"}"#;
        std::fs::write(&path, original).unwrap();
        let backed_up = run(FileRequest::Backup {
            path: path.clone(),
            backup: backup.clone(),
        });
        assert!(backed_up.succeeded, "{:?}", backed_up.data);
        assert_eq!(backed_up.data["bytes"], Value::Int(original.len() as i64));
        assert_eq!(
            backed_up.data["backup"],
            Value::string(backup.to_string_lossy().as_ref())
        );
        std::fs::write(&path, "{\"status\": ").unwrap();
        let restored = run(FileRequest::Restore {
            path: path.clone(),
            backup: backup.clone(),
        });
        assert!(restored.succeeded, "{:?}", restored.data);
        assert_eq!(read(&path), original);
        assert_eq!(read(&backup), original);
        assert_eq!(scratch.temporary_files(), Vec::<String>::new());
    }

    #[test]
    fn restore_from_a_missing_backup_fails_clearly() {
        let scratch = Scratch::new("restore-missing");
        let path = scratch.path("workflow.json");
        std::fs::write(&path, "{}").unwrap();
        let backup = scratch.path("workflow.json.bak");
        let outcome = run(FileRequest::Restore {
            path: path.clone(),
            backup: backup.clone(),
        });
        assert!(!outcome.succeeded);
        assert_eq!(
            message(&outcome),
            format!(
                "cannot restore {}: the backup {} does not exist",
                path.display(),
                backup.display()
            )
        );
        assert_eq!(read(&path), "{}");
        let missing_original = run(FileRequest::Backup {
            path: scratch.path("absent.json"),
            backup,
        });
        assert!(
            message(&missing_original).ends_with("absent.json: it does not exist"),
            "{missing_original:?}"
        );
    }
}
