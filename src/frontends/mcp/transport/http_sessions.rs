//! rmcp's in-memory session manager with `MAX_HTTP_SESSIONS` enforced where a session is made (counting and inserting under one lock, so concurrent `initialize` requests cannot overshoot it), each session's transport translating its task dialect.

use std::sync::Arc;

use futures_core::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{RestoreOutcome, ServerSseMessage};
use rmcp::transport::streamable_http_server::{SessionId, SessionManager};

use crate::frontends::mcp::limits::MAX_HTTP_SESSIONS;
use crate::frontends::mcp::server::dialect::Dialect;

/// The sessions of one HTTP server, at most `MAX_HTTP_SESSIONS` of them, each speaking its own
/// task dialect.
pub struct BoundedSessions {
    pub inner: LocalSessionManager,
    /// Held from counting the sessions to inserting a new one.
    creating: tokio::sync::Mutex<()>,
    /// The tools that start runs, for each session's `Dialect`.
    protocols: Arc<Vec<String>>,
}

/// Why a session was not made or used.
#[derive(Debug, thiserror::Error)]
pub enum BoundedSessionError {
    #[error("{}", full_message())]
    Full,
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
}

/// The refusal of a new session past the limit.
pub fn full_message() -> String {
    format!(
        "{MAX_HTTP_SESSIONS} sessions are open, the limit (MAX_HTTP_SESSIONS); close one \
         (DELETE with its Mcp-Session-Id) or wait for an idle one to expire"
    )
}

impl BoundedSessions {
    pub fn new(protocols: Arc<Vec<String>>) -> BoundedSessions {
        BoundedSessions {
            inner: LocalSessionManager::default(),
            creating: tokio::sync::Mutex::default(),
            protocols,
        }
    }

    /// How many sessions are open.
    pub async fn open(&self) -> usize {
        self.inner.sessions.read().await.len()
    }
}

type Transport = Dialect<<LocalSessionManager as SessionManager>::Transport>;

impl SessionManager for BoundedSessions {
    type Error = BoundedSessionError;
    type Transport = Transport;

    async fn create_session(&self) -> Result<(SessionId, Transport), BoundedSessionError> {
        let _creating = self.creating.lock().await;
        if self.open().await >= MAX_HTTP_SESSIONS {
            return Err(BoundedSessionError::Full);
        }
        let (id, transport) = self.inner.create_session().await?;
        Ok((id, Dialect::new(transport, self.protocols.clone())))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, BoundedSessionError> {
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, BoundedSessionError> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), BoundedSessionError> {
        Ok(self.inner.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, BoundedSessionError>
    {
        Ok(self.inner.create_stream(id, message).await?)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), BoundedSessionError> {
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, BoundedSessionError>
    {
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, BoundedSessionError>
    {
        Ok(self.inner.resume(id, last_event_id).await?)
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Transport>, BoundedSessionError> {
        // A restored session is one more as well.
        let _creating = self.creating.lock().await;
        if self.open().await >= MAX_HTTP_SESSIONS {
            return Err(BoundedSessionError::Full);
        }
        Ok(match self.inner.restore_session(id).await? {
            RestoreOutcome::Restored(transport) => {
                RestoreOutcome::Restored(Dialect::new(transport, self.protocols.clone()))
            }
            RestoreOutcome::AlreadyPresent => RestoreOutcome::AlreadyPresent,
            // The local manager restores nothing from an external store.
            _ => RestoreOutcome::NotSupported,
        })
    }

    fn event_store(
        &self,
    ) -> Option<std::sync::Arc<dyn rmcp::transport::streamable_http_server::session::EventStore>>
    {
        self.inner.event_store()
    }
}
