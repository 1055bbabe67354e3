//! A library's lint: what applies to its blocks on their own (the rest is linted where protocols use them).

use super::unused_definitions::unread_parameters;
use crate::base::diagnostic::Diagnostic;
use crate::base::model::Library;
use crate::pipeline::load::source::{Part, Source};
use crate::pipeline::load::yaml::escape_pointer_token;

/// The warnings about `library` (read from `source`), in source order: each block parameter
/// nothing in its block reads.
pub fn check_library(source: &Source, library: &Library) -> Vec<Diagnostic> {
    library
        .blocks
        .iter()
        .flat_map(|(name, block)| {
            unread_parameters(
                name,
                block,
                &format!("/blocks/{}", escape_pointer_token(name)),
            )
        })
        .map(|unread| {
            Diagnostic::warning(unread.message)
                .at(source.location(&unread.pointer, Part::Key))
                .with_help(unread.help)
        })
        .collect()
}
