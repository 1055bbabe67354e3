//! `use:` of a named block: its actions compiled in its place, its parameters bound to the arguments.

use std::collections::HashMap;

use super::Compiler;
use super::definitions::Definition;
use super::parameters::{Binding, substitute};
use crate::base::diagnostic::{Diagnostic, did_you_mean};
use crate::base::model::{Block, UseAction};
use crate::pipeline::actions::Action;
use crate::pipeline::load::source::Part;
use crate::pipeline::load::yaml::escape_pointer_token;

/// The most actions compiled inside blocks in one protocol, each `use` counting its block's
/// actions again (and those of the blocks it uses): a block used twice by a block used twice
/// ... would otherwise grow the machine exponentially.
pub const MAX_BLOCK_ACTIONS: usize = 10_000;

impl<'a> Compiler<'a> {
    /// The compiled actions of the block `usage` names, for this use, or `None` when it is
    /// unknown, uses itself, is given wrong arguments, or its actions have problems (each
    /// reported at the line in the block, with a note naming this use).
    pub(super) fn use_block(&mut self, usage: &UseAction, pointer: &str) -> Option<Vec<Action>> {
        let definitions = self.definitions;
        let name_pointer = format!("{pointer}/use");
        let Some(definition) = definitions.blocks.get(&usage.block) else {
            if definitions.incomplete {
                // The import that failed is reported; the name may be one of its blocks.
                return None;
            }
            let known = definitions.blocks.keys().map(String::as_str);
            let help = did_you_mean(&usage.block, known).unwrap_or_else(|| {
                if definitions.blocks.is_empty() {
                    "define it under `blocks:`, or import a file that does".into()
                } else {
                    let names: Vec<&str> = definitions.blocks.keys().map(String::as_str).collect();
                    format!("the blocks are: {}", names.join(", "))
                }
            });
            self.value_error(
                &name_pointer,
                format!("no block is named `{}`", usage.block),
                Some(help),
            );
            return None;
        };
        if let Some(start) = self
            .block_stack
            .iter()
            .position(|name| *name == usage.block)
        {
            let mut chain = self.block_stack[start..].to_vec();
            chain.push(usage.block.clone());
            self.value_error(
                &name_pointer,
                format!(
                    "the block `{}` uses itself: {}",
                    usage.block,
                    chain.join(" → ")
                ),
                Some("a block cannot use itself, directly or through other blocks".into()),
            );
            return None;
        }
        let bindings = self.bind_arguments(usage, definition, pointer)?;
        if self.checking_alone {
            // The block used is checked on its own too: its actions are not compiled again here.
            return Some(Vec::new());
        }
        let used_at = self.source.location(&name_pointer, Part::Value);
        let note = format!(
            "in the block `{}` used at {}:{}:{}",
            usage.block, used_at.file, used_at.position.line, used_at.position.column
        );
        let first_new = self.diagnostics.len();
        let outer_source = self.source;
        self.source = definitions.source(definition.origin, self.protocol_source);
        let outer_parameters = self.names.bind_parameters(bindings);
        self.block_stack.push(usage.block.clone());
        let compiled = self.actions(
            &definition.value.body,
            &format!("{}/do", definition.pointer),
        );
        self.block_stack.pop();
        self.names.bind_parameters(outer_parameters);
        self.source = outer_source;
        for diagnostic in &mut self.diagnostics[first_new..] {
            diagnostic.notes.push(note.clone());
        }
        compiled
    }

    /// Each parameter of the block bound to its argument (or default), checked where written.
    fn bind_arguments(
        &mut self,
        usage: &UseAction,
        definition: &'a Definition<Block>,
        pointer: &str,
    ) -> Option<Vec<Binding>> {
        let block = &definition.value;
        let mut ok = true;
        for name in usage
            .with
            .keys()
            .filter(|name| !block.parameters.contains_key(*name))
        {
            let known: Vec<&str> = block.parameters.keys().map(String::as_str).collect();
            let help = did_you_mean(name, known.iter().copied()).unwrap_or_else(|| {
                if known.is_empty() {
                    format!("the block `{}` takes no parameters", usage.block)
                } else {
                    format!("its parameters are: {}", known.join(", "))
                }
            });
            self.key_error(
                &format!("{pointer}/with/{}", escape_pointer_token(name)),
                format!("the block `{}` has no parameter `{name}`", usage.block),
                Some(help),
            );
            ok = false;
        }
        let mut bindings = Vec::with_capacity(block.parameters.len());
        for (name, parameter) in &block.parameters {
            let argument = match (usage.with.get(name), &parameter.default) {
                (Some(value), _) => {
                    let argument_pointer = format!("{pointer}/with/{}", escape_pointer_token(name));
                    self.argument(value, &argument_pointer)
                }
                (None, Some(default)) => self.default_argument(definition, name, default),
                (None, None) => {
                    self.key_error(
                        &format!("{pointer}/use"),
                        format!("the block `{}` needs the parameter `{name}`", usage.block),
                        Some(format!("add `{name}: ...` under `with:`")),
                    );
                    None
                }
            };
            match argument {
                Some(argument)
                    if super::is_identifier(name) && !super::RESERVED_NAMES.contains(&&**name) =>
                {
                    bindings.push(Binding {
                        name: name.clone(),
                        argument,
                    })
                }
                Some(_) => {
                    let parameter_pointer = format!(
                        "{}/parameters/{}",
                        definition.pointer,
                        escape_pointer_token(name)
                    );
                    self.in_block_file(definition, |compiler| {
                        compiler.check_identifier(name, &parameter_pointer, "parameter")
                    });
                    ok = false;
                }
                None => ok = false,
            }
        }
        ok.then_some(bindings)
    }

    /// An argument's CEL text, checked where it is written; the parameters of the block the
    /// `use` is in are replaced in it, so the block used sees only its own.
    fn argument(&mut self, value: &serde_json::Value, pointer: &str) -> Option<String> {
        let text = match value {
            serde_json::Value::String(text) => text.clone(),
            literal => serde_json::to_string(literal).unwrap_or_default(),
        };
        self.expression(&text, pointer)?;
        Some(substitute(&text, self.names.parameters()).text)
    }

    /// A parameter's default, checked in the block's file against the protocol's names only.
    fn default_argument(
        &mut self,
        definition: &'a Definition<Block>,
        name: &str,
        default: &serde_json::Value,
    ) -> Option<String> {
        let pointer = format!(
            "{}/parameters/{}/default",
            definition.pointer,
            escape_pointer_token(name)
        );
        let outer_parameters = self.names.bind_parameters(Vec::new());
        let argument =
            self.in_block_file(definition, |compiler| compiler.argument(default, &pointer));
        self.names.bind_parameters(outer_parameters);
        argument
    }

    /// Runs `body` with problems located in the file the definition is written in.
    pub(super) fn in_block_file<T>(
        &mut self,
        definition: &Definition<Block>,
        body: impl FnOnce(&mut Self) -> T,
    ) -> T {
        let outer_source = self.source;
        self.source = self
            .definitions
            .source(definition.origin, self.protocol_source);
        let result = body(self);
        self.source = outer_source;
        result
    }

    /// An effect id as written; inside a block, `${parameter}` stands for the parameter's
    /// argument, which must then be a string literal: ids name events and mocks, so they are
    /// fixed when the protocol loads. `None` when it is not (reported).
    pub fn fixed_name(&mut self, written: &str, pointer: &str) -> Option<String> {
        let Some(name) = written
            .strip_prefix("${")
            .and_then(|rest| rest.strip_suffix('}'))
            .map(str::trim)
        else {
            return Some(written.to_string());
        };
        if self.names.is_unbound_parameter(name) {
            // Checked on its own, the block's id is one its uses give: any valid id stands in.
            return Some(name.to_string());
        }
        let Some(binding) = self
            .names
            .parameters()
            .iter()
            .find(|binding| binding.name == name)
        else {
            return Some(written.to_string());
        };
        match super::parameters::string_literal(&binding.argument) {
            Some(text) => Some(text.to_string()),
            None => {
                let message = format!(
                    "an id is fixed when the protocol loads: the parameter `{name}` is `{}`, not a \
                     string literal",
                    binding.argument
                );
                self.value_error(
                    pointer,
                    message,
                    Some(format!(
                        "give it a quoted name, e.g. `{name}: \"'tool_call'\"`"
                    )),
                );
                None
            }
        }
    }

    /// Counts actions compiled inside blocks, refusing more than `MAX_BLOCK_ACTIONS` (reported
    /// once, at the outermost `use` that reaches it).
    pub(super) fn count_block_actions(&mut self, count: usize, pointer: &str) -> Option<()> {
        if self.block_stack.is_empty() {
            return Some(());
        }
        self.block_actions = self.block_actions.saturating_add(count);
        if self.block_actions <= MAX_BLOCK_ACTIONS {
            return Some(());
        }
        if !self.block_limit_reported {
            self.block_limit_reported = true;
            self.value_error(
                pointer,
                format!(
                    "the blocks used in this protocol expand to more than the limit of \
                     {MAX_BLOCK_ACTIONS} actions"
                ),
                Some(
                    "a block used by a block used by a block ... repeats its actions at each use: \
                     use fewer levels, or move the repeated work into a child protocol (`invoke`)"
                        .into(),
                ),
            );
        }
        None
    }
}

/// Diagnostics found inside a block once for each of its uses, and once when it was checked on
/// its own, become one, noting every use.
pub(super) fn merge_repeated(diagnostics: Vec<Diagnostic>) -> Vec<Diagnostic> {
    let mut merged: Vec<Diagnostic> = Vec::with_capacity(diagnostics.len());
    let mut seen: HashMap<(String, String, usize), usize> = HashMap::new();
    for diagnostic in diagnostics {
        let key = diagnostic.location.as_ref().map(|location| {
            (
                diagnostic.message.clone(),
                location.file.clone(),
                location.position.offset,
            )
        });
        match key {
            Some(key) => match seen.get(&key) {
                Some(&index) => {
                    let kept = &mut merged[index];
                    for note in diagnostic.notes {
                        if !kept.notes.contains(&note) {
                            kept.notes.push(note);
                        }
                    }
                }
                None => {
                    seen.insert(key, merged.len());
                    merged.push(diagnostic);
                }
            },
            None => merged.push(diagnostic),
        }
    }
    merged
}
