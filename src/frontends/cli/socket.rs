//! `serve --socket`: clients send event lines and get every output line, each line bounded, each client's output queue bounded, the accept loop kept alive at the descriptor limit.

use std::cell::{Cell, RefCell};
use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

use crate::base::text::LimitedLine;
use crate::runtime::run::driver::{InputBatches, LineBatch};
use crate::runtime::run::input::LineOrigin;

/// The most bytes of output waiting for one client by default: past it, a client that does not
/// read is disconnected rather than buffered without end.
pub const MAX_CLIENT_QUEUE_BYTES: usize = 16 << 20;

/// The connected clients. Every output line goes to each; an answer to a bad line goes to the
/// client that sent it.
#[derive(Clone)]
pub struct Clients {
    connected: Rc<RefCell<Vec<Client>>>,
    max_queued_bytes: usize,
}

/// One client: its name for messages, its output queue, and the tasks serving it (aborted to
/// disconnect it: a writer stuck on a client that does not read would otherwise stay).
struct Client {
    id: u64,
    name: String,
    outgoing: mpsc::UnboundedSender<Rc<str>>,
    /// Bytes sent to `outgoing` and not yet written to the socket.
    queued: Rc<Cell<usize>>,
    tasks: [AbortHandle; 2],
}

impl Clients {
    pub fn new(max_queued_bytes: usize) -> Clients {
        Clients {
            connected: Rc::default(),
            max_queued_bytes,
        }
    }

    /// Queues `bytes` (output lines) for every client; decoded only when one is connected, so
    /// a host without clients pays nothing per line.
    pub fn broadcast(&self, bytes: &[u8]) {
        if self.connected.borrow().is_empty() {
            return;
        }
        let text: Rc<str> = Rc::from(String::from_utf8_lossy(bytes));
        self.connected
            .borrow_mut()
            .retain(|client| self.queue(client, &text));
    }

    /// Queues `text` for the client `id`, if it is still connected.
    pub fn reply(&self, id: u64, text: &str) {
        let text: Rc<str> = Rc::from(text);
        self.connected
            .borrow_mut()
            .retain(|client| client.id != id || self.queue(client, &text));
    }

    /// Drops the client `id` (gone): its tasks end and its descriptor is closed.
    fn forget(&self, id: u64) {
        self.connected.borrow_mut().retain(|client| {
            if client.id == id {
                client.tasks.iter().for_each(AbortHandle::abort);
            }
            client.id != id
        });
    }

    /// Queues `text` for `client`; false when the client is gone or is disconnected here for
    /// not reading.
    fn queue(&self, client: &Client, text: &Rc<str>) -> bool {
        let queued = client.queued.get() + text.len();
        if queued > self.max_queued_bytes {
            eprintln!(
                "warning: {} does not read its output: {queued} bytes would wait, more than the \
                 limit of {} bytes; disconnected (raise it with --max-client-queue-bytes)",
                client.name, self.max_queued_bytes
            );
            client.tasks.iter().for_each(AbortHandle::abort);
            return false;
        }
        if client.outgoing.send(text.clone()).is_err() {
            return false;
        }
        client.queued.set(queued);
        true
    }
}

/// Refuses a socket path that holds anything but a stale socket (one nothing listens on, left by
/// a host that died), which is removed so the new host can bind.
pub fn claim_socket_path(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::FileTypeExt;
    let shown = path.display();
    let metadata = match std::fs::symlink_metadata(path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(format!("cannot inspect {shown}: {error}")),
    };
    if !metadata.file_type().is_socket() {
        return Err(format!(
            "{shown} exists and is not a socket: it is left as it is; give --socket a path that \
             does not exist"
        ));
    }
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(_) => Err(format!(
            "{shown} is the socket of a host that is running: stop it first, or give --socket \
             another path"
        )),
        Err(error) if error.kind() == std::io::ErrorKind::ConnectionRefused => {
            std::fs::remove_file(path)
                .map_err(|error| format!("cannot remove the stale socket {shown}: {error}"))
        }
        Err(error) => Err(format!(
            "{shown} is a socket that cannot be checked ({error}): it is left as it is"
        )),
    }
}

/// Accepts clients on `path` (already claimed); their lines (each at most `max_line_bytes`)
/// arrive on one channel, each as a batch of its own that names the client, so a bad line is
/// answered to it.
pub fn listen(
    path: &Path,
    clients: Clients,
    max_line_bytes: usize,
) -> Result<InputBatches, String> {
    let listener = tokio::net::UnixListener::bind(path)
        .map_err(|error| format!("cannot listen on {}: {error}", path.display()))?;
    let (sender, receiver) = mpsc::channel(1024);
    let shown = path.display().to_string();
    tokio::task::spawn_local(async move {
        let mut next_id = 0u64;
        let mut pause = MIN_ACCEPT_PAUSE;
        let mut failing = false;
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    if failing {
                        eprintln!("{shown}: accepting clients again");
                    }
                    failing = false;
                    pause = MIN_ACCEPT_PAUSE;
                    next_id += 1;
                    serve_client(stream, next_id, &clients, sender.clone(), max_line_bytes);
                }
                Err(error) => {
                    // At the descriptor limit (EMFILE) accepting fails until a client leaves:
                    // waiting and trying again keeps the host serving instead of deaf for good.
                    if !failing {
                        eprintln!(
                            "warning: {shown}: cannot accept a client ({error}); trying again \
                             as clients leave"
                        );
                    }
                    failing = true;
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_ACCEPT_PAUSE);
                }
            }
        }
    });
    Ok(receiver)
}

const MIN_ACCEPT_PAUSE: Duration = Duration::from_millis(10);
const MAX_ACCEPT_PAUSE: Duration = Duration::from_millis(500);

/// Starts the writer and reader of one client and adds it to `clients`.
fn serve_client(
    stream: tokio::net::UnixStream,
    id: u64,
    clients: &Clients,
    lines: mpsc::Sender<LineBatch>,
    max_line_bytes: usize,
) {
    let name = match stream
        .peer_cred()
        .ok()
        .and_then(|credentials| credentials.pid())
    {
        Some(pid) => format!("client {id} (pid {pid})"),
        None => format!("client {id}"),
    };
    let (reader, mut writer) = stream.into_split();
    let (outgoing, mut waiting) = mpsc::unbounded_channel::<Rc<str>>();
    let queued = Rc::new(Cell::new(0usize));
    let written = queued.clone();
    let writing = tokio::task::spawn_local(async move {
        // What waits is written in one go: one write per round of output, not per line.
        let mut texts = Vec::new();
        let mut bytes = Vec::new();
        while waiting.recv_many(&mut texts, 1024).await > 0 {
            bytes.clear();
            texts
                .iter()
                .for_each(|text| bytes.extend_from_slice(text.as_bytes()));
            texts.clear();
            if writer.write_all(&bytes).await.is_err() {
                break;
            }
            written.set(written.get().saturating_sub(bytes.len()));
        }
    });
    let owners = clients.clone();
    let reading = tokio::task::spawn_local(async move {
        let mut reader = tokio::io::BufReader::with_capacity(1 << 16, reader);
        let mut lines_read = 0;
        loop {
            let first = LineOrigin {
                client: id,
                line: lines_read + 1,
            };
            let mut batch = LineBatch::from_client(first);
            // Lines already received go together, as stdin's do: one round of the host each.
            let ended = loop {
                let Some(read) = read_line(&mut reader, max_line_bytes, batch.line_buffer()).await
                else {
                    break true;
                };
                batch.end_line(read);
                lines_read += 1;
                if batch.len() >= MAX_BATCH_LINES || reader.buffer().is_empty() {
                    break false;
                }
            };
            if !batch.is_empty() && lines.send(batch).await.is_err() {
                break;
            }
            if ended {
                // A client that closed its socket is forgotten now, not at the next output
                // (at the descriptor limit there may be none); one that only stopped sending
                // (`shutdown(SHUT_WR)`) still gets its output.
                let gone = reader
                    .get_ref()
                    .as_ref()
                    .ready(tokio::io::Interest::WRITABLE)
                    .await
                    .is_ok_and(|ready| ready.is_write_closed());
                if gone {
                    owners.forget(id);
                }
                break;
            }
        }
    });
    clients.connected.borrow_mut().push(Client {
        id,
        name,
        outgoing,
        queued,
        tasks: [writing.abort_handle(), reading.abort_handle()],
    });
}

/// The most lines of one client handed over together.
const MAX_BATCH_LINES: usize = 1024;

/// Reads the next line of a client into `line`, at most `limit` bytes of it kept (a longer one
/// is read to its end and reported); `None` when the client has closed or failed.
async fn read_line(
    reader: &mut (impl tokio::io::AsyncBufRead + Unpin),
    limit: usize,
    line: &mut Vec<u8>,
) -> Option<Result<(), String>> {
    let mut reading = LimitedLine::new(line.len(), limit);
    loop {
        let buffer = reader.fill_buf().await.ok()?;
        let (consumed, done) = reading.take(buffer, line);
        reader.consume(consumed);
        if done {
            return reading.finish(line);
        }
    }
}
