//! Tools around protocols: scenarios (tests), the linter, the language server, graphs and the SCXML importer.

pub mod graph;
pub mod import;
pub mod lint;
pub mod lsp;
pub mod scenario;
