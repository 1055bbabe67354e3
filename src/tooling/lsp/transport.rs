//! JSON-RPC messages over stdio with `Content-Length` framing, every read bounded.

use std::io::{self, BufRead, Write};

/// The largest message body a client may send: a whole document (see
/// `documents::MAX_DOCUMENT_BYTES`) JSON-escaped, with room for the envelope.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// The longest header line read before the message is refused.
const MAX_HEADER_LINE_BYTES: usize = 1024;

/// The most header lines one message may have.
const MAX_HEADER_LINES: usize = 16;

/// Why no message could be read.
#[derive(Debug)]
pub enum ReadError {
    /// The client closed its end.
    Closed,
    /// The stream broke, or the framing is wrong: the connection cannot go on.
    Broken(String),
    /// A body that is not JSON; the framing held, so the next message can still be read.
    NotJson(String),
}

/// Reads one message: headers up to a blank line, then exactly `Content-Length` bytes of JSON.
pub fn read_message(input: &mut impl BufRead) -> Result<serde_json::Value, ReadError> {
    let mut length = None;
    for index in 0.. {
        if index == MAX_HEADER_LINES {
            return Err(ReadError::Broken(format!(
                "more than {MAX_HEADER_LINES} header lines (the limit MAX_HEADER_LINES)"
            )));
        }
        let line = read_header_line(input)?;
        if line.is_empty() {
            if index == 0 {
                // A stray blank line between messages.
                continue;
            }
            break;
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(ReadError::Broken(format!(
                "a header line without `:`: {line:?}"
            )));
        };
        if name.trim().eq_ignore_ascii_case("content-length") {
            let value: usize = value.trim().parse().map_err(|_| {
                ReadError::Broken(format!("Content-Length is not a number: {value:?}"))
            })?;
            length = Some(value);
        }
    }
    let length = length.ok_or_else(|| ReadError::Broken("no Content-Length header".into()))?;
    if length > MAX_MESSAGE_BYTES {
        return Err(ReadError::Broken(format!(
            "a message of {length} bytes, more than the limit of {MAX_MESSAGE_BYTES} \
             (MAX_MESSAGE_BYTES)"
        )));
    }
    let mut body = vec![0; length];
    input
        .read_exact(&mut body)
        .map_err(|error| match error.kind() {
            io::ErrorKind::UnexpectedEof => ReadError::Closed,
            _ => ReadError::Broken(error.to_string()),
        })?;
    serde_json::from_slice(&body).map_err(|error| ReadError::NotJson(error.to_string()))
}

/// One header line without its `\r\n`, read at most `MAX_HEADER_LINE_BYTES` long.
fn read_header_line(input: &mut impl BufRead) -> Result<String, ReadError> {
    let mut line = Vec::new();
    loop {
        let available = input
            .fill_buf()
            .map_err(|error| ReadError::Broken(error.to_string()))?;
        if available.is_empty() {
            return Err(ReadError::Closed);
        }
        let (taken, done) = match available.iter().position(|byte| *byte == b'\n') {
            Some(newline) => (newline + 1, true),
            None => (available.len(), false),
        };
        line.extend_from_slice(&available[..taken]);
        input.consume(taken);
        if line.len() > MAX_HEADER_LINE_BYTES {
            return Err(ReadError::Broken(format!(
                "a header line longer than {MAX_HEADER_LINE_BYTES} bytes \
                 (the limit MAX_HEADER_LINE_BYTES)"
            )));
        }
        if done {
            let text = String::from_utf8_lossy(&line);
            return Ok(text.trim_end_matches(['\r', '\n']).to_string());
        }
    }
}

/// Writes one message with its `Content-Length` header.
pub fn write_message(output: &mut impl Write, message: &serde_json::Value) -> io::Result<()> {
    let body = serde_json::to_vec(message)?;
    write!(output, "Content-Length: {}\r\n\r\n", body.len())?;
    output.write_all(&body)?;
    output.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_framed_messages_and_refuses_oversized_ones() {
        let body = r#"{"jsonrpc":"2.0","method":"exit"}"#;
        let framed = format!("Content-Length: {}\r\n\r\n{body}", body.len());
        let message = read_message(&mut framed.as_bytes()).unwrap();
        assert_eq!(message["method"], "exit");

        let huge = format!("Content-Length: {}\r\n\r\n", MAX_MESSAGE_BYTES + 1);
        let Err(ReadError::Broken(why)) = read_message(&mut huge.as_bytes()) else {
            panic!("an oversized message was accepted");
        };
        assert!(why.contains("MAX_MESSAGE_BYTES"), "{why}");

        let endless = "X".repeat(10_000);
        let Err(ReadError::Broken(why)) = read_message(&mut endless.as_bytes()) else {
            panic!("an endless header was accepted");
        };
        assert!(why.contains("MAX_HEADER_LINE_BYTES"), "{why}");
    }
}
