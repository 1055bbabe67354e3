//! Blocks and retry policies a protocol defines but never names, and what its blocks read.

use super::{Lint, Rule, Usage};
use crate::load::source::Part;
use crate::load::yaml::escape_pointer_token;
use crate::model;

impl Usage {
    /// What the protocol's own blocks and retry policies read, set and raise, once each (not
    /// per use). Those of imported files are the library's concern.
    pub(super) fn definitions(&mut self, protocol: &model::Protocol) {
        for (name, block) in &protocol.blocks {
            let pointer = format!("/blocks/{}", escape_pointer_token(name));
            for default in block.parameters.values().filter_map(|p| p.default.as_ref()) {
                if let serde_json::Value::String(text) = default {
                    self.expression(text);
                }
            }
            self.actions(&block.body, &format!("{pointer}/do"));
        }
        for retrier in protocol.retry_policies.values().flatten() {
            self.retrier(retrier);
        }
    }
}

impl Lint<'_> {
    /// A block no `use` names, or a retry policy no `retry:` names, is dead text.
    pub(super) fn unused_definitions(&mut self, usage: &Usage) {
        let protocol = &self.loaded.protocol;
        for name in protocol.blocks.keys() {
            if !usage.used_blocks.contains(name) {
                self.warn(
                    Rule::UnusedDefinition,
                    &format!("/blocks/{}", escape_pointer_token(name)),
                    Part::Key,
                    format!("the block `{name}` is never used"),
                    format!("run it with `- use: {name}` where it is needed, or remove it"),
                );
            }
        }
        for name in protocol.retry_policies.keys() {
            if !usage.used_policies.contains(name) {
                self.warn(
                    Rule::UnusedDefinition,
                    &format!("/retry_policies/{}", escape_pointer_token(name)),
                    Part::Key,
                    format!("the retry policy `{name}` is never used"),
                    format!("name it in an effect's `retry: {name}`, or remove it"),
                );
            }
        }
    }
}
