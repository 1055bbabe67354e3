//! `protocol-run lsp`: a language server over stdio, diagnosing with the engine's own loader,
//! compiler and lint, completing and explaining the names a protocol declares.

mod completion;
mod cursor;
mod definition;
pub mod diagnostics;
pub mod documents;
mod events;
mod functions;
mod hover;
pub mod outline;
pub mod positions;
mod scenario;
mod schemas;
pub mod transport;

use std::io::{BufRead, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};

use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use documents::Documents;
use outline::Outline;
use transport::{ReadError, read_message, write_message};

/// JSON-RPC error codes this server answers with.
mod error_code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INTERNAL_ERROR: i64 = -32603;
}

/// The server's state between messages.
#[derive(Default)]
struct Server {
    documents: Documents,
    shut_down: bool,
}

/// What handling one message gives back.
enum Reply {
    /// A request's result.
    Result(Value),
    /// A request's error: code and message.
    Error(i64, String),
    /// Notifications to send (a notification has no reply of its own).
    Notifications(Vec<Value>),
}

/// Serves one client on `input`/`output` until it sends `exit`; returns the process exit code
/// (0 after a `shutdown`, 1 otherwise, as the protocol says).
pub fn serve(input: &mut impl BufRead, output: &mut impl Write) -> u8 {
    let mut server = Server::default();
    loop {
        let message = match read_message(input) {
            Ok(message) => message,
            Err(ReadError::Closed) => return u8::from(!server.shut_down),
            Err(ReadError::Broken(why)) => {
                eprintln!("protocol-run lsp: cannot read the client's messages: {why}");
                return 1;
            }
            Err(ReadError::NotJson(why)) => {
                let error = error_response(Value::Null, error_code::PARSE_ERROR, &why);
                if write_message(output, &error).is_err() {
                    return 1;
                }
                continue;
            }
        };
        let method = message.get("method").and_then(Value::as_str).unwrap_or("");
        if method == "exit" {
            return u8::from(!server.shut_down);
        }
        let id = message.get("id").cloned();
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        let reply = guarded(method, || server.handle(method, params));
        let outgoing = match (id, reply) {
            (Some(id), Reply::Result(result)) => {
                vec![json!({ "jsonrpc": "2.0", "id": id, "result": result })]
            }
            (Some(id), Reply::Error(code, why)) => vec![error_response(id, code, &why)],
            (Some(id), Reply::Notifications(notifications)) => {
                let mut all = notifications;
                all.push(json!({ "jsonrpc": "2.0", "id": id, "result": null }));
                all
            }
            (None, Reply::Notifications(notifications)) => notifications,
            (None, Reply::Error(_, why)) => {
                eprintln!("protocol-run lsp: {method}: {why}");
                Vec::new()
            }
            (None, Reply::Result(_)) => Vec::new(),
        };
        for message in outgoing {
            if write_message(output, &message).is_err() {
                return 1;
            }
        }
    }
}

/// Runs a handler; a bug in it (a panic) costs that one request an error, not every later one.
fn guarded(method: &str, handler: impl FnOnce() -> Reply) -> Reply {
    catch_unwind(AssertUnwindSafe(handler)).unwrap_or_else(|panic| {
        let why = panic
            .downcast_ref::<&str>()
            .map(|text| text.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Reply::Error(
            error_code::INTERNAL_ERROR,
            format!("internal error in `{method}`: {why}"),
        )
    })
}

fn error_response(id: Value, code: i64, message: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
}

/// The request's parameters as their LSP type.
fn parameters<T: DeserializeOwned>(params: Value) -> Result<T, Reply> {
    serde_json::from_value(params).map_err(|error| {
        Reply::Error(
            error_code::INVALID_PARAMS,
            format!("invalid parameters: {error}"),
        )
    })
}

impl Server {
    fn handle(&mut self, method: &str, params: Value) -> Reply {
        let reply = match method {
            "initialize" => Ok(Reply::Result(capabilities())),
            "initialized" | "$/cancelRequest" | "$/setTrace" => Ok(Reply::Notifications(vec![])),
            "shutdown" => {
                self.shut_down = true;
                Ok(Reply::Result(Value::Null))
            }
            "textDocument/didOpen" => parameters(params).map(|opened| self.did_open(opened)),
            "textDocument/didChange" => parameters(params).map(|changed| self.did_change(changed)),
            "textDocument/didClose" => parameters(params).map(|closed| self.did_close(closed)),
            "textDocument/didSave" => Ok(Reply::Notifications(vec![])),
            "textDocument/completion" => parameters(params).map(|asked| self.completion(asked)),
            "textDocument/hover" => parameters(params).map(|asked| self.hover(asked)),
            "textDocument/definition" => parameters(params).map(|asked| self.definition(asked)),
            _ => Ok(Reply::Error(
                error_code::METHOD_NOT_FOUND,
                format!("`{method}` is not supported by protocol-run lsp"),
            )),
        };
        reply.unwrap_or_else(|error| error)
    }

    fn did_open(&mut self, opened: lsp_types::DidOpenTextDocumentParams) -> Reply {
        let uri = opened.text_document.uri.as_str().to_string();
        let result = self
            .documents
            .open(&uri, opened.text_document.text)
            .map(|_| ());
        self.refresh(&uri, result)
    }

    fn did_change(&mut self, changed: lsp_types::DidChangeTextDocumentParams) -> Reply {
        let uri = changed.text_document.uri.as_str().to_string();
        // Full sync: the last change holds the whole text.
        let Some(last) = changed.content_changes.into_iter().last() else {
            return Reply::Notifications(vec![]);
        };
        let result = self.documents.change(&uri, last.text).map(|_| ());
        self.refresh(&uri, result)
    }

    fn did_close(&mut self, closed: lsp_types::DidCloseTextDocumentParams) -> Reply {
        let uri = closed.text_document.uri.as_str().to_string();
        self.documents.close(&uri);
        Reply::Notifications(vec![publish(&uri, Vec::new())])
    }

    /// After a document's text changed: its outline (kept when the text is no YAML) and its
    /// diagnostics; a document refused by a limit is closed with that limit as its diagnostic.
    fn refresh(&mut self, uri: &str, stored: Result<(), String>) -> Reply {
        if let Err(why) = stored {
            self.documents.close(uri);
            let refused = lsp_types::Diagnostic {
                severity: Some(lsp_types::DiagnosticSeverity::ERROR),
                source: Some("protocol-run".into()),
                message: why,
                ..Default::default()
            };
            return Reply::Notifications(vec![publish(uri, vec![refused])]);
        }
        let Some(document) = self.documents.get(uri) else {
            return Reply::Notifications(vec![]);
        };
        let diagnostics = diagnostics::analyse(&document.path, &document.text);
        // A scenario buffer's names are its protocol's.
        let outline = if scenario::is_scenario_buffer(&document.path, &document.text) {
            scenario::protocol_outline(&document.path, &document.text)
        } else {
            Outline::read(&document.path, &document.text)
        };
        if let (Some(outline), Some(document)) = (outline, self.documents.get_mut(uri)) {
            document.outline = Some(outline);
        }
        Reply::Notifications(vec![publish(uri, diagnostics)])
    }

    /// The document at `uri`, its text, and the byte offset of `position` in it.
    fn located(
        &self,
        place: &lsp_types::TextDocumentPositionParams,
    ) -> Option<(&documents::Document, usize)> {
        let document = self.documents.get(place.text_document.uri.as_str())?;
        let offset = positions::offset_of(&document.text, place.position);
        Some((document, offset))
    }

    fn completion(&self, asked: lsp_types::CompletionParams) -> Reply {
        let items = self
            .located(&asked.text_document_position)
            .and_then(|(document, offset)| {
                let outline = document.outline.as_ref()?;
                Some(if document.is_scenario() {
                    completion::complete_scenario(&document.text, offset, outline)
                } else {
                    completion::complete(&document.text, offset, outline)
                })
            })
            .unwrap_or_default();
        Reply::Result(json!(items))
    }

    fn hover(&self, asked: lsp_types::HoverParams) -> Reply {
        let hover =
            self.located(&asked.text_document_position_params)
                .and_then(|(document, offset)| {
                    let outline = document.outline.as_ref()?;
                    if document.is_scenario() {
                        scenario::hover(&document.text, offset, outline)
                    } else {
                        hover::hover(&document.text, offset, outline)
                    }
                });
        Reply::Result(json!(hover))
    }

    fn definition(&self, asked: lsp_types::GotoDefinitionParams) -> Reply {
        let location =
            self.located(&asked.text_document_position_params)
                .and_then(|(document, offset)| {
                    if document.is_scenario() {
                        let word = cursor::word_around(&document.text, offset);
                        let outline = document.outline.as_ref()?;
                        return scenario::definition(outline, &document.text[word]);
                    }
                    definition::definition(
                        &document.text,
                        &document.path,
                        offset,
                        document.outline.as_ref()?,
                    )
                });
        Reply::Result(json!(location))
    }
}

fn publish(uri: &str, diagnostics: Vec<lsp_types::Diagnostic>) -> Value {
    json!({
        "jsonrpc": "2.0",
        "method": "textDocument/publishDiagnostics",
        "params": { "uri": uri, "diagnostics": diagnostics },
    })
}

/// What the server offers: full-text sync, completion, hover, definition.
fn capabilities() -> Value {
    json!({
        "capabilities": {
            "textDocumentSync": { "openClose": true, "change": 1 },
            "completionProvider": { "triggerCharacters": [":", " ", "'", "\"", "{", "[", ",", "."] },
            "hoverProvider": true,
            "definitionProvider": true,
        },
        "serverInfo": { "name": "protocol-run", "version": env!("CARGO_PKG_VERSION") },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_handler_answers_an_internal_error() {
        let reply = guarded("textDocument/hover", || panic!("a bug"));
        let Reply::Error(code, why) = reply else {
            panic!("the panic was not turned into an error");
        };
        assert_eq!(code, error_code::INTERNAL_ERROR);
        assert_eq!(why, "internal error in `textDocument/hover`: a bug");
    }

    /// Every cut of a protocol (as if typed so far), every cursor place in it: no handler panics.
    #[test]
    fn half_typed_documents_never_break_the_handlers() {
        let text = "id: demo\ninputs: { n: { type: integer, default: 1 } }\ncontext: { é: 0 }\n\
                    types: { é: { enum: [0, 1] } }\nevents: { go: { properties: { é: {} } } }\n\
                    states:\n  a:\n    on:\n      go: { target: b, guard: \"In('b') && n > ${é} \
                    && event.data.é\" }\n      \
                    stop: b\n    entry: [{ use: x }, { exec: [true], id: run, retry: [p] }]\n  \
                    b: { type: final }\n";
        let file = std::path::Path::new("/nonexistent/demo.yaml");
        let outline = Outline::read(file, text).unwrap();
        let cuts = text.char_indices().map(|(index, _)| index).step_by(5);
        for cut in cuts.chain([text.len()]) {
            let typed = &text[..cut];
            diagnostics::analyse(file, typed);
            for offset in 0..=typed.len() + 2 {
                completion::complete(typed, offset, &outline);
                hover::hover(typed, offset, &outline);
                definition::definition(typed, file, offset, &outline);
            }
        }
    }
}
