//! Every block and retry policy compiled once on its own: a problem in one nobody uses is an error.

use super::Compiler;
use super::definitions::{Definition, Origin};
use super::expression::Names;
use crate::base::model::Block;
use crate::effects::capabilities::Capabilities;
use crate::pipeline::load::yaml::escape_pointer_token;

impl Compiler<'_> {
    /// Compiles each block and retry policy the protocol can name once, a block's parameters
    /// standing for values of unknown type: its own against the protocol's names, an imported
    /// one against any names (the protocol importing a library gives them; a use checks
    /// them). A `use` inside is checked, not expanded, since the block it names is checked on
    /// its own too. What this compiles is dropped: only its problems are kept, and one found
    /// again at a use is merged with it (`blocks::merge_repeated`).
    pub(super) fn check_blocks_alone(&mut self) {
        let definitions = self.definitions;
        if definitions.blocks.is_empty() && definitions.policies.is_empty() {
            return;
        }
        let event_names = self.event_names.clone();
        let event_types = self.event_types.clone();
        // What an unused block raises or makes possible is not something the protocol does.
        let event_sources = self.event_sources.clone();
        let action_ids = std::mem::take(&mut self.action_ids);
        let send_targets = std::mem::take(&mut self.send_targets);
        let block_actions = std::mem::replace(&mut self.block_actions, 0);
        self.checking_alone = true;
        for (name, definition) in &definitions.blocks {
            self.with_names_of(definition.origin, |compiler| {
                compiler.check_block_alone(name, definition)
            });
            if definition.origin == Origin::Protocol && !self.names.is_open() {
                // Its `send ... to:` names this protocol's invokes, all known by now.
                self.check_send_targets();
            }
            self.send_targets.clear();
        }
        for definition in definitions.policies.values() {
            let source = definitions.source(definition.origin, self.protocol_source);
            self.with_names_of(definition.origin, |compiler| {
                compiler.in_source(source, |compiler| {
                    for (index, retrier) in definition.value.iter().enumerate() {
                        let pointer = format!("{}/{index}", definition.pointer);
                        crate::pipeline::actions::effect::check_retrier(
                            retrier, compiler, &pointer,
                        );
                    }
                })
            });
        }
        self.checking_alone = false;
        self.event_names = event_names;
        self.event_types = event_types;
        self.event_sources = event_sources;
        self.action_ids = action_ids;
        self.send_targets = send_targets;
        self.block_actions = block_actions;
    }

    /// Runs `body` with the names a definition of `origin` is checked against: the
    /// protocol's for its own, any names (and every capability) for an imported one.
    fn with_names_of(&mut self, origin: Origin, body: impl FnOnce(&mut Self)) {
        if origin == Origin::Protocol {
            return body(self);
        }
        let outer_names = std::mem::replace(&mut self.names, Names::open(&self.extensions));
        let outer_capabilities =
            std::mem::replace(&mut self.capabilities, Capabilities::unrestricted());
        body(self);
        self.capabilities = outer_capabilities;
        self.names = outer_names;
    }

    /// Compiles one block's parameter names, defaults and actions, located in its file.
    fn check_block_alone(&mut self, name: &str, definition: &Definition<Block>) {
        let block = &definition.value;
        self.in_block_file(definition, |compiler| {
            for (parameter, declared) in &block.parameters {
                let pointer = format!(
                    "{}/parameters/{}",
                    definition.pointer,
                    escape_pointer_token(parameter)
                );
                compiler.check_identifier(parameter, &pointer, "parameter");
                if let Some(default) = &declared.default {
                    compiler.default_alone(default, &format!("{pointer}/default"));
                }
            }
            let unbound = block.parameters.keys().cloned().collect();
            let outer_parameters = compiler.names.bind_parameters(Vec::new());
            let outer_unbound = compiler.names.leave_unbound(unbound);
            compiler.block_stack.push(name.to_string());
            compiler.actions(&block.body, &format!("{}/do", definition.pointer));
            compiler.block_stack.pop();
            compiler.names.leave_unbound(outer_unbound);
            compiler.names.bind_parameters(outer_parameters);
        });
    }

    /// A parameter's default, which reads the protocol's names and no parameter.
    fn default_alone(&mut self, default: &serde_json::Value, pointer: &str) {
        if let serde_json::Value::String(text) = default {
            self.expression(text, pointer);
        }
    }
}
