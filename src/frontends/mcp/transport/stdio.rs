//! Stdio with a bound on each message: a line longer than `MAX_MESSAGE_BYTES` is never held whole, never reaches rmcp, is refused on stderr, and is answered with a JSON-RPC error when its id came before the cut.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rmcp::RoleServer;
use rmcp::model::{ErrorData, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::mpsc;

use crate::frontends::mcp::limits::{MAX_MESSAGE_BYTES, oversized_message};

/// The server's stdio: rmcp's line transport over a reader that keeps oversized lines from it.
pub struct BoundedStdio {
    inner: AsyncRwTransport<RoleServer, BoundedLines<tokio::io::Stdin>, tokio::io::Stdout>,
    /// The ids of refused requests (`None` when the id was not found before the cut).
    refused: mpsc::UnboundedReceiver<Option<RequestId>>,
}

impl BoundedStdio {
    /// The process's stdin and stdout.
    pub fn open() -> BoundedStdio {
        let (stdin, stdout) = rmcp::transport::stdio();
        let (sender, refused) = mpsc::unbounded_channel();
        let lines = BoundedLines::new(stdin, MAX_MESSAGE_BYTES, sender);
        BoundedStdio {
            inner: AsyncRwTransport::new(lines, stdout),
            refused,
        }
    }
}

impl Transport<RoleServer> for BoundedStdio {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            // Both branches may be dropped unfinished: rmcp's line read keeps its partial line,
            // and a refusal stays queued.
            tokio::select! {
                biased;
                Some(id) = self.refused.recv() => {
                    let Some(id) = id else { continue };
                    let error = ErrorData::invalid_request(oversized_message(), None);
                    // Spawned, so that it is written whole even if this read is dropped.
                    tokio::spawn(self.inner.send(TxJsonRpcMessage::<RoleServer>::error(error, Some(id))));
                }
                message = self.inner.receive() => return message,
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.inner.close().await
    }
}

/// A reader that hands on whole lines of at most `limit` bytes (their newline aside), and drops
/// longer ones as they arrive, never holding more than `limit` bytes of one.
pub struct BoundedLines<R> {
    inner: R,
    limit: usize,
    /// The line being read.
    line: Vec<u8>,
    /// Whole lines to hand on, and how much of them was.
    ready: Vec<u8>,
    handed: usize,
    /// Dropping the rest of a refused line, up to its newline.
    discarding: bool,
    refused: mpsc::UnboundedSender<Option<RequestId>>,
}

impl<R> BoundedLines<R> {
    pub fn new(
        inner: R,
        limit: usize,
        refused: mpsc::UnboundedSender<Option<RequestId>>,
    ) -> BoundedLines<R> {
        BoundedLines {
            inner,
            limit,
            line: Vec::new(),
            ready: Vec::new(),
            handed: 0,
            discarding: false,
            refused,
        }
    }

    /// Takes in what was read: whole lines go to `ready`, an oversized one is refused.
    fn take_in(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let newline = bytes.iter().position(|byte| *byte == b'\n');
            let length = newline.map_or(bytes.len(), |index| index + 1);
            let (segment, rest) = bytes.split_at(length);
            bytes = rest;
            let ends = newline.is_some();
            if self.discarding {
                self.discarding = !ends;
                continue;
            }
            let content = segment.len() - usize::from(ends);
            if self.line.len().saturating_add(content) > self.limit {
                let prefix = if self.line.is_empty() {
                    segment
                } else {
                    &self.line
                };
                self.refuse(leading_id(prefix));
                self.line.clear();
                self.discarding = !ends;
                continue;
            }
            self.line.extend_from_slice(segment);
            if ends {
                // A `tools/call` that carries `task` is renamed before rmcp drops the `task`.
                let content = &self.line[..self.line.len() - 1];
                if let Some(mut renamed) =
                    crate::frontends::mcp::server::dialect::rename_task_calls(content)
                {
                    renamed.push(b'\n');
                    self.line = renamed;
                }
                self.ready.append(&mut self.line);
            }
        }
    }

    fn refuse(&self, id: Option<RequestId>) {
        let answer = match &id {
            Some(id) => format!("answered request {id} with an error"),
            None => "no request id before the cut, so no answer".to_string(),
        };
        eprintln!("warning: mcp: {}; {answer}", oversized_message());
        let _ = self.refused.send(id);
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for BoundedLines<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffer: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.handed < this.ready.len() {
                let count = buffer.remaining().min(this.ready.len() - this.handed);
                buffer.put_slice(&this.ready[this.handed..this.handed + count]);
                this.handed += count;
                if this.handed == this.ready.len() {
                    this.ready.clear();
                    this.handed = 0;
                }
                return Poll::Ready(Ok(()));
            }
            let mut chunk = [0u8; 8 * 1024];
            let mut read = ReadBuf::new(&mut chunk);
            match Pin::new(&mut this.inner).poll_read(context, &mut read) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
                // The end: a last line without its newline is dropped, as rmcp drops it.
                Poll::Ready(Ok(())) if read.filled().is_empty() => return Poll::Ready(Ok(())),
                Poll::Ready(Ok(())) => this.take_in(read.filled()),
            }
        }
    }
}

/// The `id` of a JSON-RPC message whose text `prefix` begins, when it comes before the cut
/// (SDKs write it before `params`).
fn leading_id(prefix: &[u8]) -> Option<RequestId> {
    let found = std::cell::RefCell::new(None);
    // The prefix is cut short: the parse fails after the id is found, and its error is moot.
    let _ = serde_json::Deserializer::from_slice(prefix).deserialize_map(IdSeeker(&found));
    let id = found.into_inner()?;
    match id {
        serde_json::Value::Number(number) => number.as_i64().map(RequestId::Number),
        serde_json::Value::String(text) => Some(RequestId::String(Arc::from(text))),
        _ => None,
    }
}

/// Reads a message's keys in order up to `id`, skipping the values before it.
struct IdSeeker<'found>(&'found std::cell::RefCell<Option<serde_json::Value>>);

impl<'de> Visitor<'de> for IdSeeker<'_> {
    type Value = ();

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("a JSON-RPC message")
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<(), M::Error> {
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key == "id" {
                *self.0.borrow_mut() = Some(map.next_value()?);
                return Ok(());
            }
            map.next_value::<IgnoredAny>()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(input: &[u8], limit: usize) -> (Vec<u8>, Vec<Option<RequestId>>) {
        let (sender, mut refused) = mpsc::unbounded_channel();
        let mut lines = BoundedLines::new(input, limit, sender);
        let mut output = Vec::new();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async {
            use tokio::io::AsyncReadExt;
            lines.read_to_end(&mut output).await.unwrap();
        });
        let mut ids = Vec::new();
        while let Ok(id) = refused.try_recv() {
            ids.push(id);
        }
        (output, ids)
    }

    #[test]
    fn lines_within_the_limit_pass_and_longer_ones_are_refused_by_id() {
        let long = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"x\",\"params\":\"{}\"}}",
            "a".repeat(20_000)
        );
        let input = format!("{{\"id\":1}}\n{long}\n{{\"id\":2}}\n");
        let (output, refused) = read_all(input.as_bytes(), 10_000);
        assert_eq!(output, b"{\"id\":1}\n{\"id\":2}\n");
        assert_eq!(refused, [Some(RequestId::Number(7))]);
        // Exactly at the limit, a line passes.
        let (output, refused) = read_all(b"12345\n123456\n", 5);
        assert_eq!((output.as_slice(), refused.len()), (&b"12345\n"[..], 1));
    }

    #[test]
    fn the_id_is_found_when_it_comes_before_the_cut() {
        assert_eq!(
            leading_id(br#"{"jsonrpc":"2.0","id":"a-1","params":{"x":[1,2"#),
            Some(RequestId::String(Arc::from("a-1")))
        );
        assert_eq!(
            leading_id(br#"{"jsonrpc":"2.0","params":{"id":3},"id":4,"#),
            Some(RequestId::Number(4))
        );
        assert_eq!(leading_id(br#"{"jsonrpc":"2.0","params":{"x":"#), None);
        assert_eq!(leading_id(b"not json"), None);
    }
}
