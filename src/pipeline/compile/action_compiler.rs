//! The compiler as actions see it (`actions::ActionCompiler`): each method the compiler's own, or a step of one that actions used to run with the whole compiler in hand.

use std::sync::Arc;

use super::expression::{Expression, Template, ValueTemplate};
use super::machine::{Delay, Machine};
use super::{ChildProtocol, Compiler};
use crate::base::ids::EventType;
use crate::base::model::{self, RetryPlan};
use crate::effects::capabilities::Capabilities;
use crate::pipeline::actions::effect::{CompiledRetrier, compile_retrier};
use crate::pipeline::actions::{Action, ActionCompiler};
use crate::pipeline::compile::data_schema::DataSchema;
use crate::pipeline::extensions::Extensions;
use crate::pipeline::load::source::Part;

impl ActionCompiler for Compiler<'_> {
    fn expression(&mut self, text: &str, pointer: &str) -> Option<Expression> {
        Compiler::expression(self, text, pointer)
    }

    fn key_expression(&mut self, text: &str, lead: usize, pointer: &str) -> Option<Expression> {
        Compiler::key_expression(self, text, lead, pointer)
    }

    fn template(&mut self, text: &str, pointer: &str) -> Option<Template> {
        Compiler::template(self, text, pointer)
    }

    fn value_template(&mut self, json: &serde_json::Value, pointer: &str) -> Option<ValueTemplate> {
        Compiler::value_template(self, json, pointer)
    }

    fn delay(&mut self, text: &str, pointer: &str) -> Option<Delay> {
        Compiler::delay(self, text, pointer)
    }

    fn fixed_name(&mut self, written: &str, pointer: &str) -> Option<String> {
        Compiler::fixed_name(self, written, pointer)
    }

    fn value_error(&mut self, pointer: &str, message: String, help: Option<String>) {
        Compiler::value_error(self, pointer, message, help);
    }

    fn key_error(&mut self, pointer: &str, message: String, help: Option<String>) {
        Compiler::key_error(self, pointer, message, help);
    }

    fn actions(&mut self, list: &[model::Action], pointer: &str) -> Option<Vec<Action>> {
        Compiler::actions(self, list, pointer)
    }

    fn action(&mut self, action: &model::Action, pointer: &str) -> Option<Action> {
        Compiler::action(self, action, pointer)
    }

    fn intern_event(&mut self, name: &str) -> EventType {
        Compiler::intern_event(self, name)
    }

    fn produced_event(&mut self, text: &str, literal: bool) {
        Compiler::produced_event(self, text, literal);
    }

    fn check_event_name(&mut self, name: &str, pointer: &str) {
        Compiler::check_event_name(self, name, pointer);
    }

    fn send_target(&mut self, target: &str, pointer: &str) {
        Compiler::send_target(self, target, pointer);
    }

    fn check_action_id(&mut self, id: &str, pointer: &str) {
        Compiler::check_action_id(self, id, pointer);
    }

    fn writable_context_slot(&mut self, name: &str, pointer: &str, part: Part) -> Option<usize> {
        Compiler::writable_context_slot(self, name, pointer, part)
    }

    fn input_type(&self, name: &str) -> Option<model::InputType> {
        self.names.input_type(name)
    }

    fn context_type(&self, slot: usize) -> Option<&DataSchema> {
        Compiler::context_type(self, slot)
    }

    fn capabilities(&self) -> &Capabilities {
        Compiler::capabilities(self)
    }

    fn extensions(&self) -> &Extensions {
        Compiler::extensions(self)
    }

    fn retriers(
        &mut self,
        plan: Option<&RetryPlan>,
        pointer: &str,
    ) -> Option<Vec<CompiledRetrier>> {
        // Every site is compiled, so each problem is reported, before any failure counts.
        let compiled: Vec<Option<CompiledRetrier>> = Compiler::retriers(self, plan, pointer)
            .into_iter()
            .map(|site| {
                let site = site?;
                self.in_source(site.source, |compiler| {
                    compile_retrier(&site.retrier, compiler, &site.pointer)
                })
            })
            .collect();
        compiled.into_iter().collect()
    }

    fn child_protocol(
        &mut self,
        protocol: &str,
        given: &indexmap::IndexMap<String, serde_json::Value>,
        pointer: &str,
    ) -> Option<ChildProtocol> {
        Compiler::child_protocol(self, protocol, given, pointer)
    }

    fn claim_map_id(&mut self, id: &str, pointer: &str) {
        Compiler::claim_map_id(self, id, pointer);
    }

    fn map_compiled(&mut self, id: &str, child: Option<Arc<Machine>>) {
        if let Some(machine) = child {
            self.map_children.push((Arc::from(id), machine));
        }
        self.map_ids.push(id.to_string());
    }
}
