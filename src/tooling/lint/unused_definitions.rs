//! Blocks and retry policies a protocol defines but never names, and what its blocks read.

use super::{Lint, Rule, Usage};
use crate::base::model;
use crate::pipeline::compile::definitions::{Definitions, Origin};
use crate::pipeline::load::Loaded;
use crate::pipeline::load::source::Part;
use crate::pipeline::load::yaml::escape_pointer_token;

impl Usage {
    /// What the protocol's own blocks and retry policies read, set and raise, once each (not
    /// per use); then what the imported ones read, set and raise, without their places, which
    /// are in other files: their own warnings are the library's concern.
    pub(super) fn definitions(&mut self, loaded: &Loaded) {
        let protocol = &loaded.protocol;
        for (name, block) in &protocol.blocks {
            self.block(block, &format!("/blocks/{}", escape_pointer_token(name)));
        }
        for retrier in protocol.retry_policies.values().flatten() {
            self.retrier(retrier);
        }
        let definitions = Definitions::gather(loaded);
        let mut imported = Usage::default();
        for definition in definitions.blocks.values() {
            if definition.origin != Origin::Protocol {
                imported.block(&definition.value, &definition.pointer);
            }
        }
        for definition in definitions.policies.values() {
            if definition.origin != Origin::Protocol {
                definition
                    .value
                    .iter()
                    .for_each(|retrier| imported.retrier(retrier));
            }
        }
        self.read.extend(imported.read);
        self.assigned.extend(imported.assigned);
        self.used_blocks.extend(imported.used_blocks);
        self.used_policies.extend(imported.used_policies);
        self.produced_prefixes.extend(imported.produced_prefixes);
        self.produced_prefixes
            .extend(imported.produced.into_iter().map(|produced| produced.name));
    }

    fn block(&mut self, block: &model::Block, pointer: &str) {
        for default in block.parameters.values().filter_map(|p| p.default.as_ref()) {
            if let serde_json::Value::String(text) = default {
                self.expression(text);
            }
        }
        self.actions(&block.body, &format!("{pointer}/do"));
    }
}

/// A parameter of a block that nothing in it reads: where it is declared, the warning and
/// its help.
pub(super) struct UnreadParameter {
    pub pointer: String,
    pub message: String,
    pub help: String,
}

/// The parameters of the block `name` (written at `pointer`) that none of its actions,
/// arguments or ids reads: every `use` must give one (or its default is computed) for nothing.
pub(super) fn unread_parameters(
    name: &str,
    block: &model::Block,
    pointer: &str,
) -> Vec<UnreadParameter> {
    let mut usage = Usage::default();
    usage.block(block, pointer);
    block
        .parameters
        .keys()
        .filter(|parameter| !usage.read.contains(*parameter))
        .map(|parameter| UnreadParameter {
            pointer: format!("{pointer}/parameters/{}", escape_pointer_token(parameter)),
            message: format!("the parameter `{parameter}` of the block `{name}` is never read"),
            help: format!(
                "read it in the block (`${{{parameter}}}` in a template), or remove it and the \
                 arguments given for it"
            ),
        })
        .collect()
}

impl Lint<'_> {
    /// A block no `use` names, or a retry policy no `retry:` names, is dead text; so is a
    /// parameter its block never reads.
    pub(super) fn unused_definitions(&mut self, usage: &Usage) {
        let protocol = &self.loaded.protocol;
        for (name, block) in &protocol.blocks {
            let pointer = format!("/blocks/{}", escape_pointer_token(name));
            for unread in unread_parameters(name, block, &pointer) {
                self.warn(
                    Rule::UnusedDefinition,
                    &unread.pointer,
                    Part::Key,
                    unread.message,
                    unread.help,
                );
            }
        }
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
