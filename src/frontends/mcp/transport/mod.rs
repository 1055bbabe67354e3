//! How clients reach the server: stdio (lines bounded before rmcp sees them) and Streamable HTTP (sessions and connections bounded).

pub mod http;
pub mod http_sessions;
pub mod stdio;
