//! What an action needs of the compiler to compile itself, and nothing more: its expressions and templates compiled against the protocol's names, the events, ids and variables it names checked and registered, and its problems reported where they are written.

use std::sync::Arc;

use crate::base::ids::EventType;
use crate::base::model::{self, RetryPlan};
use crate::effects::capabilities::Capabilities;
use crate::pipeline::actions::Action;
use crate::pipeline::actions::effect::CompiledRetrier;
use crate::pipeline::compile::ChildProtocol;
use crate::pipeline::compile::data_schema::DataSchema;
use crate::pipeline::compile::expression::{Expression, Template, ValueTemplate};
use crate::pipeline::compile::machine::{Delay, Machine};
use crate::pipeline::extensions::Extensions;
use crate::pipeline::load::source::Part;

/// The compiler as an action sees it. Every `pointer` is the JSON pointer of what is being
/// compiled in the protocol; every problem is reported there, located, and the result is then
/// `None` (the compile goes on to report every problem at once).
pub trait ActionCompiler {
    /// An expression (`${...}` already stripped) in the protocol's names.
    fn expression(&mut self, text: &str, pointer: &str) -> Option<Expression>;
    /// An expression written inside a key, `lead` bytes into it (`verdicts[r.path]`).
    fn key_expression(&mut self, text: &str, lead: usize, pointer: &str) -> Option<Expression>;
    /// A string with `${...}` parts.
    fn template(&mut self, text: &str, pointer: &str) -> Option<Template>;
    /// A JSON value whose strings are templates.
    fn value_template(&mut self, json: &serde_json::Value, pointer: &str) -> Option<ValueTemplate>;
    /// A duration literal, or an expression giving one.
    fn delay(&mut self, text: &str, pointer: &str) -> Option<Delay>;
    /// A name as written, or a reusable block's parameter it stands for.
    fn fixed_name(&mut self, written: &str, pointer: &str) -> Option<String>;
    /// The value at `pointer` is wrong: `message`, and how to fix it.
    fn value_error(&mut self, pointer: &str, message: String, help: Option<String>);
    /// The key at `pointer` is wrong: `message`, and how to fix it.
    fn key_error(&mut self, pointer: &str, message: String, help: Option<String>);
    /// A nested action block (a branch, a loop's body).
    fn actions(&mut self, list: &[model::Action], pointer: &str) -> Option<Vec<Action>>;
    /// One nested action (a map's effect).
    fn action(&mut self, action: &model::Action, pointer: &str) -> Option<Action>;
    /// The type of an event the engine raises for this action (`done.exec.ID`): registered,
    /// so a handler for it is known to be reachable.
    fn intern_event(&mut self, name: &str) -> EventType;
    /// An event name this action sends (`literal`, or a template whose fixed prefix counts).
    fn produced_event(&mut self, text: &str, literal: bool);
    /// An event name or descriptor the action names, checked against the protocol's events.
    fn check_event_name(&mut self, name: &str, pointer: &str);
    /// A `send ... to:` target, checked once every invoke is known.
    fn send_target(&mut self, target: &str, pointer: &str);
    /// An action id: unique in the protocol, and registered.
    fn check_action_id(&mut self, id: &str, pointer: &str);
    /// The slot of the context variable `name` the action sets, or why it cannot.
    fn writable_context_slot(&mut self, name: &str, pointer: &str, part: Part) -> Option<usize>;
    /// The declared type of the input a bare name reads, if it reads one.
    fn input_type(&self, name: &str) -> Option<model::InputType>;
    /// The declared type of the context variable in `slot`, if it has one.
    fn context_type(&self, slot: usize) -> Option<&DataSchema>;
    /// What the protocol may do, the operator's narrowing included.
    fn capabilities(&self) -> &Capabilities;
    /// The actions and functions the embedding program registered.
    fn extensions(&self) -> &Extensions;
    /// An effect's retriers, named policies replaced by theirs, each compiled (and its problems
    /// reported) where it is written, perhaps in an imported file.
    fn retriers(&mut self, plan: Option<&RetryPlan>, pointer: &str)
    -> Option<Vec<CompiledRetrier>>;
    /// A child protocol (an invoke's or a map's), loaded and compiled once per load, with the
    /// templates of the inputs given it.
    fn child_protocol(
        &mut self,
        protocol: &str,
        given: &indexmap::IndexMap<String, serde_json::Value>,
        pointer: &str,
    ) -> Option<ChildProtocol>;
    /// Claims `id` for a map before its body compiles: refused when another action has it.
    fn claim_map_id(&mut self, id: &str, pointer: &str);
    /// The map `id` compiled: its id is a map's from now on, and `child` the protocol each of
    /// its items runs, if they run one.
    fn map_compiled(&mut self, id: &str, child: Option<Arc<Machine>>);
}
