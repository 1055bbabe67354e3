//! Text from outside, made safe: lines read with a bound on their length, control characters escaped before printing, a failure's error output cut to its tail.

use std::io::BufRead;

/// `text` with every control character (newline, carriage return, escape, ...) written as an
/// escape sequence (`\n`, `\u{1b}`), so one log record stays one plain line.
pub fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut escaped = String::with_capacity(text.len() + 8);
    for character in text.chars() {
        if character.is_control() {
            escaped.extend(character.escape_default());
        } else {
            escaped.push(character);
        }
    }
    std::borrow::Cow::Owned(escaped)
}

/// Appends the next line, without its newline, to `line`; a line longer than `limit` bytes is
/// read to its end and dropped (`line` as it was), and reported instead. `None` at the end of
/// input or on a read error.
pub fn read_limited_line(
    input: &mut impl BufRead,
    limit: usize,
    line: &mut Vec<u8>,
) -> Option<Result<(), String>> {
    let mut reading = LimitedLine::new(line.len(), limit);
    loop {
        let buffer = match input.fill_buf() {
            Ok(buffer) => buffer,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return None,
        };
        let (consumed, done) = reading.take(buffer, line);
        input.consume(consumed);
        if done {
            return reading.finish(line);
        }
    }
}

/// One line being read in chunks, at most `limit` bytes of it kept: shared by the blocking
/// readers (stdin, `--events`) and the socket's, so every input follows the same rules.
pub struct LimitedLine {
    start: usize,
    length: usize,
    limit: usize,
    /// Whether any byte (or the newline) was read: an empty read then ends the line, not the input.
    begun: bool,
}

impl LimitedLine {
    pub(crate) fn new(start: usize, limit: usize) -> LimitedLine {
        LimitedLine {
            start,
            length: 0,
            limit,
            begun: false,
        }
    }

    /// Takes what `buffer` holds of the line into `line` (past the limit, only counts it):
    /// returns how many bytes were used and whether the line (or the input, on an empty buffer)
    /// ended.
    pub(crate) fn take(&mut self, buffer: &[u8], line: &mut Vec<u8>) -> (usize, bool) {
        if buffer.is_empty() {
            return (0, true);
        }
        self.begun = true;
        let (chunk, newline) = match buffer.iter().position(|byte| *byte == b'\n') {
            Some(position) => (&buffer[..position], true),
            None => (buffer, false),
        };
        self.length += chunk.len();
        if self.length <= self.limit {
            line.extend_from_slice(chunk);
        }
        (chunk.len() + usize::from(newline), newline)
    }

    /// The line read: `None` at the end of input, the problem when it was too long (`line` as it
    /// was before).
    pub(crate) fn finish(self, line: &mut Vec<u8>) -> Option<Result<(), String>> {
        if !self.begun {
            return None;
        }
        if self.length > self.limit {
            line.truncate(self.start);
            return Some(Err(format!(
                "the line is {} bytes, longer than the limit of {} bytes; raise it with \
                 --max-event-bytes",
                self.length, self.limit
            )));
        }
        Some(Ok(()))
    }
}

/// At most this many lines of a failed effect's error output are kept where it is reported.
pub const ERROR_TAIL_LINES: usize = 10;
/// ... and at most this many characters of them.
pub const ERROR_TAIL_CHARACTERS: usize = 1000;

/// The end of a failed effect's error output as telemetry, `logs` and `status` show it: its last
/// `ERROR_TAIL_LINES` non-empty lines, at most `ERROR_TAIL_CHARACTERS` characters (the end is
/// what says why a program failed), with every known secret masked. Masked before it is cut, so
/// a cut never leaves part of a secret that masking would no longer recognise.
pub fn masked_tail(text: &str) -> String {
    let masked = crate::base::secrets::mask(text);
    let lines: Vec<&str> = masked
        .lines()
        .map(str::trim_end)
        .filter(|line| !line.is_empty())
        .collect();
    let kept = lines[lines.len().saturating_sub(ERROR_TAIL_LINES)..].join("\n");
    let characters = kept.chars().count();
    if characters <= ERROR_TAIL_CHARACTERS {
        return kept;
    }
    let cut: String = kept
        .chars()
        .skip(characters - ERROR_TAIL_CHARACTERS)
        .collect();
    format!("…{cut}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tail_keeps_the_last_lines_and_characters() {
        let many: String = (1..=30).map(|line| format!("line {line}\n")).collect();
        let tail = masked_tail(&many);
        assert_eq!(tail.lines().count(), ERROR_TAIL_LINES);
        assert!(
            tail.starts_with("line 21\n") && tail.ends_with("line 30"),
            "{tail}"
        );
        let long = "x".repeat(5000) + "END";
        let tail = masked_tail(&long);
        assert_eq!(tail.chars().count(), ERROR_TAIL_CHARACTERS + 1);
        assert!(tail.starts_with('…') && tail.ends_with("END"));
        assert_eq!(masked_tail("\n\n"), "");
    }
}
