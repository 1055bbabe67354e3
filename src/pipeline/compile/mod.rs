//! Model → machine: names become indices, every check runs, all problems are reported at once.

mod action_compiler;
mod block_check;
mod blocks;
mod bounded;
pub mod budget;
pub mod context_types;
pub mod data_schema;
pub mod declared_events;
mod deferral;
pub(crate) mod definitions;
mod duration_inputs;
mod event_data_reads;
mod event_index;
pub mod events;
pub mod expression;
mod fast;
mod fast_from_cel;
mod fast_syntax;
mod fast_time_check;
mod functions;
pub mod grants;
pub mod handled_events;
pub mod inputs;
pub mod library;
pub mod machine;
mod map_functions;
mod matching;
pub mod parameters;
pub mod policies;
pub mod set_aside;
mod time_check;
mod time_functions;

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use crate::base::diagnostic::{Diagnostic, did_you_mean};
use crate::base::model::{self, StateType, Targets, TransitionType};
use crate::base::read_file::ReadFile;
use crate::base::value::Value;
use crate::effects::capabilities::Capabilities;
use crate::pipeline::actions::{self, Action};
use crate::pipeline::extensions::Extensions;
use crate::pipeline::load::Loaded;
use crate::pipeline::load::source::{Part, Source};
use crate::pipeline::load::yaml::escape_pointer_token;
use expression::{Expression, ExpressionProblem, Names, Template, ValueTemplate};
use machine::{
    CandidateIndex, Delay, EventDescriptor, EventType, Machine, StateId, StateKind, StateNode,
    Timer, TransitionId, TransitionNode,
};

/// The largest exit code a protocol may declare: 64 and above belong to the engine.
pub const MAX_EXIT_CODE: i64 = 63;

/// The most states a protocol may have.
pub const MAX_STATES: usize = 10_000;

/// Compiles a loaded protocol, or returns every problem found.
pub fn compile(loaded: &Loaded) -> Result<Machine, Vec<Diagnostic>> {
    compile_with(loaded, &Arc::new(Extensions::default()))
}

/// Compiles a protocol that may call the functions and actions an embedding program
/// registered; child protocols it invokes get them too.
pub fn compile_with(
    loaded: &Loaded,
    extensions: &Arc<Extensions>,
) -> Result<Machine, Vec<Diagnostic>> {
    compile_limited(loaded, extensions, &Capabilities::unrestricted())
}

/// Compiles a protocol whose capabilities are at most `limit` (the operator's narrowing), and
/// those of its children at most its own.
pub fn compile_limited(
    loaded: &Loaded,
    extensions: &Arc<Extensions>,
    limit: &Capabilities,
) -> Result<Machine, Vec<Diagnostic>> {
    let file = std::path::Path::new(&loaded.source.path);
    let ancestry = vec![file.canonicalize().unwrap_or_else(|_| file.to_path_buf())];
    compile_nested(loaded, ancestry, extensions, limit, &RefCell::default())
}

/// The child protocols compiled so far in one load, by canonical path, each with the
/// capabilities it was compiled under and the machine (`None` when it was invalid, its problems
/// already reported). A protocol invoked twice by each of 20 nested levels is compiled once,
/// not a million times. A cached machine has no invoke cycle through any protocol above it:
/// such a cycle would have passed through it, and been reported, when it was compiled.
type CompiledChildren =
    RefCell<HashMap<std::path::PathBuf, Vec<(Capabilities, Option<Arc<Machine>>)>>>;

/// Compiles a protocol invoked (directly or not) by the files in `ancestry`, the last being
/// this one, so an invoke cycle is caught.
fn compile_nested(
    loaded: &Loaded,
    ancestry: Vec<std::path::PathBuf>,
    extensions: &Arc<Extensions>,
    limit: &Capabilities,
    children: &CompiledChildren,
) -> Result<Machine, Vec<Diagnostic>> {
    let protocol = &loaded.protocol;
    let working_directory = std::env::current_dir().unwrap_or_default();
    let capabilities = match &protocol.permissions {
        Some(permissions) => limit.narrowed(permissions, &working_directory),
        None => Ok(limit.clone()),
    };
    let granted = capabilities.clone().unwrap_or_default();
    let definitions = definitions::Definitions::gather(loaded);
    let mut compiler = Compiler::new(
        &loaded.source,
        &definitions,
        granted,
        extensions.clone(),
        ancestry,
        children,
    );
    compiler.context_names = protocol.context.keys().cloned().collect();
    if let Err(message) = &capabilities {
        compiler.value_error("/permissions", message.clone(), None);
    }
    grants::check(&mut compiler, protocol);
    let mut outline = Outline::default();
    outline.collect(&mut compiler, protocol);
    // The outline holds the document's root too, which the author did not write.
    let written_states = outline.states.len().saturating_sub(1);
    if written_states > MAX_STATES {
        compiler.value_error(
            "/states",
            format!(
                "the protocol has {written_states} states, more than the limit of {MAX_STATES}"
            ),
            Some("split it into child protocols".into()),
        );
        return Err(compiler.diagnostics);
    }
    compiler.check_data_names(protocol);
    compiler.declared_events =
        declared_events::DeclaredEvents::compile(&mut compiler, &protocol.events);
    compiler.event_sources.declared = protocol.events.keys().cloned().collect();
    let state_indices = outline
        .ids
        .iter()
        .map(|(id, state)| (id.to_string(), state.index()))
        .collect();
    compiler.names = Names::new(
        protocol.context.keys().cloned(),
        protocol.inputs.keys().cloned(),
        state_indices,
    )
    .with_input_types(protocol.inputs.values().map(|input| input.kind).collect())
    .with_host_functions(extensions)
    // A grant naming an input is checked once it is resolved (the run compiles again then).
    .with_environment_grant(
        Some(&compiler.capabilities)
            .filter(|capabilities| capabilities.is_resolved())
            .and_then(Capabilities::inherited_environment),
    )
    .with_read_grant(&compiler.capabilities);
    let inputs = inputs::compile(&mut compiler, &protocol.inputs);
    let context = protocol
        .context
        .iter()
        .map(|(name, value)| (name.clone(), Value::from_json(value)))
        .collect();
    let error_execution = compiler.intern_event("error.execution");
    // A `send` to a child or the parent that cannot be delivered reports this.
    compiler.intern_event("error.communication");
    compiler.context_types = context_types::compile(&mut compiler, protocol);
    let mut builder = Builder {
        outline: &outline,
        states: Vec::with_capacity(outline.states.len()),
        transitions: Vec::new(),
    };
    builder.build_root(&mut compiler, protocol);
    for index in 1..outline.states.len() {
        builder.build_state(&mut compiler, StateId(index as u32));
    }
    let done_events = outline
        .states
        .iter()
        .map(|entry| compiler.intern_event(&format!("done.state.{}", entry.id)))
        .collect();
    let Builder {
        mut states,
        mut transitions,
        ..
    } = builder;
    compiler.check_send_targets();
    let unmatched_handlers = compiler.check_handlers();
    // A child takes events only if something sends it some: others end, as before, when they
    // have nothing left to wait for.
    for invoke in states.iter_mut().flat_map(|state| &mut state.invokes) {
        invoke.takes_events = invoke.autoforward
            || compiler
                .send_targets
                .iter()
                .any(|(target, _)| *target == *invoke.id);
    }
    let mut private_timers = vec![false; compiler.event_names.len()];
    for timer in states.iter().flat_map(|state| &state.timers) {
        private_timers[timer.event_type.0 as usize] = timer.private;
    }
    let matcher = event_index::Matcher::new(&compiler.event_names, private_timers);
    for transition in &mut transitions {
        transition.known_matches = matcher.known_matches(&transition.events);
    }
    link_family(&mut states);
    let has_eventless = states.iter().any(|state| !state.eventless.is_empty());
    let single_leaf = states.iter().all(|state| state.kind != StateKind::Parallel);
    let has_history = states.iter().any(StateNode::is_history);
    let has_defer = states.iter().any(|state| !state.defer.is_empty());
    let error_types: Vec<bool> = compiler
        .event_names
        .iter()
        .map(|name| EventDescriptor::Prefix(Arc::from("error")).matches(name))
        .collect();
    let candidates = CandidateIndex::build(&states, &transitions, &error_types);
    compiler.check_blocks_alone();
    if compiler.diagnostics.iter().any(Diagnostic::is_error) {
        return Err(blocks::merge_repeated(compiler.diagnostics));
    }
    let machine = Machine {
        id: protocol.id.clone(),
        version: protocol.version.clone(),
        title: protocol.title.clone(),
        states,
        transitions,
        inputs,
        context,
        names: compiler.names,
        state_ids: outline.ids.clone(),
        event_names: compiler.event_names,
        event_types: compiler.event_types,
        done_events,
        error_execution,
        strict_errors: protocol.errors == crate::base::model::ErrorMode::Strict,
        has_eventless,
        has_defer,
        single_leaf,
        has_history,
        candidates,
        error_types,
        source_path: loaded.source.path.clone(),
        action_ids: compiler.action_ids,
        capabilities: compiler.capabilities,
        read_files: std::iter::once(&loaded.source)
            .chain(&definitions.sources)
            .map(|source| ReadFile::new(&source.path, &source.text))
            .collect(),
        declared_events: compiler.declared_events.map(Arc::new),
        context_types: compiler.context_types,
        unmatched_handlers,
        map_children: compiler.map_children,
    };
    Ok(machine)
}

/// A child protocol compiled, and the templates of the inputs its parent gives it, by the
/// child's input slot.
pub type ChildProtocol = (Arc<Machine>, Vec<(usize, ValueTemplate)>);

/// Fills in children, ancestors and descendant ranges from the parent links.
fn link_family(states: &mut [StateNode]) {
    for index in (1..states.len()).rev() {
        if let Some(parent) = states[index].parent {
            states[parent.index()]
                .children
                .insert(0, StateId(index as u32));
        }
    }
    for index in 0..states.len() {
        let mut ancestors = Vec::new();
        let mut current = states[index].parent;
        while let Some(ancestor) = current {
            ancestors.push(ancestor);
            current = states[ancestor.index()].parent;
        }
        states[index].ancestors = ancestors;
    }
    for index in (0..states.len()).rev() {
        let end = states[index]
            .children
            .last()
            .map_or(StateId(index as u32 + 1), |last| {
                states[last.index()].descendants_end
            });
        states[index].descendants_end = end;
    }
}

/// An optional part that was compiled if present: `None` when it failed, `Some(None)` when it
/// was absent, `Some(Some(part))` when it compiled.
pub fn optional<T>(compiled: Option<Option<T>>) -> Option<Option<T>> {
    match compiled {
        None => Some(None),
        Some(part) => part.map(Some),
    }
}

/// Shared compile services: expressions, templates, events and located diagnostics.
pub struct Compiler<'a> {
    /// What this protocol may do; its children get at most this.
    capabilities: Capabilities,
    /// Functions and actions the embedding program registered.
    extensions: Arc<Extensions>,
    /// Canonical paths of the protocols invoking this one, then this one.
    ancestry: Vec<std::path::PathBuf>,
    children: &'a CompiledChildren,
    /// The file whose problems are being located: the protocol's, or while a block or policy
    /// defined elsewhere compiles, that file's.
    source: &'a Source,
    /// The protocol's own file.
    protocol_source: &'a Source,
    /// The blocks and retry policies the protocol can name.
    definitions: &'a definitions::Definitions,
    /// The blocks being expanded, outermost first, for cycles.
    block_stack: Vec<String>,
    /// Actions compiled inside blocks so far (see `blocks::MAX_BLOCK_ACTIONS`).
    block_actions: usize,
    block_limit_reported: bool,
    /// While each block is compiled on its own (`block_check`): a `use` is checked, not expanded.
    checking_alone: bool,
    names: Names,
    context_names: Vec<String>,
    diagnostics: Vec<Diagnostic>,
    event_names: Vec<Arc<str>>,
    event_types: HashMap<Arc<str>, EventType>,
    action_ids: Vec<String>,
    /// The ids of this protocol's maps: each names its items alone (`check[0]`, ...).
    map_ids: Vec<String>,
    /// The child protocol of each map with an `invoke` body, by the map's id.
    pub map_children: Vec<(Arc<str>, Arc<Machine>)>,
    /// The ids of this protocol's invokes, for `send ... to:`.
    invoke_ids: Vec<String>,
    /// Each `send ... to: <invoke id>`: the id and where it is written, checked once every
    /// invoke is known.
    send_targets: Vec<(String, String)>,
    /// Every event that can reach a transition, for `check_handlers`.
    event_sources: handled_events::EventSources,
    /// Every `on:` descriptor as written.
    handlers: Vec<handled_events::Handler>,
    /// `events:`, compiled; `None` when the protocol declares none.
    declared_events: Option<declared_events::DeclaredEvents>,
    /// The declared type of each context variable, by slot (`types:`).
    context_types: Vec<Option<data_schema::DataSchema>>,
}

impl<'a> Compiler<'a> {
    /// A compiler for the file `source`, its definitions' problems already reported.
    fn new(
        source: &'a Source,
        definitions: &'a definitions::Definitions,
        capabilities: Capabilities,
        extensions: Arc<Extensions>,
        ancestry: Vec<std::path::PathBuf>,
        children: &'a CompiledChildren,
    ) -> Compiler<'a> {
        Compiler {
            capabilities,
            extensions,
            ancestry,
            children,
            source,
            protocol_source: source,
            definitions,
            block_stack: Vec::new(),
            block_actions: 0,
            block_limit_reported: false,
            checking_alone: false,
            names: Names::default(),
            context_names: Vec::new(),
            diagnostics: definitions.diagnostics.clone(),
            event_names: Vec::new(),
            event_types: HashMap::new(),
            action_ids: Vec::new(),
            invoke_ids: Vec::new(),
            map_ids: Vec::new(),
            map_children: Vec::new(),
            send_targets: Vec::new(),
            event_sources: handled_events::EventSources::default(),
            handlers: Vec::new(),
            declared_events: None,
            context_types: Vec::new(),
        }
    }
}

impl Compiler<'_> {
    pub fn extensions(&self) -> &Extensions {
        &self.extensions
    }

    /// What the protocol may do, the operator's narrowing included.
    pub fn capabilities(&self) -> &Capabilities {
        &self.capabilities
    }

    pub fn names(&self) -> &Names {
        &self.names
    }

    pub fn context_names(&self) -> impl Iterator<Item = &str> {
        self.context_names.iter().map(String::as_str)
    }

    /// The event type of an event the engine raises or the protocol sends (a state's, an
    /// effect's, an invoke's, a timer's, a literal `send`), adding it to the known names if
    /// new: handlers of it can match (see `check_handlers`).
    pub fn intern_event(&mut self, name: &str) -> EventType {
        self.event_sources.platform.push(name.to_string());
        self.intern_name(name)
    }

    /// The event type of a name, adding it to the known names if new, without counting it as
    /// an event that can occur (what an `on:` key names).
    fn intern_name(&mut self, name: &str) -> EventType {
        if let Some(known) = self.event_types.get(name) {
            return *known;
        }
        let event_type = EventType(self.event_names.len() as u32);
        let name: Arc<str> = Arc::from(name);
        self.event_names.push(name.clone());
        self.event_types.insert(name, event_type);
        event_type
    }

    /// Records an event name a `raise` or `send` writes: `literal` when it has no `${...}`,
    /// otherwise only its start before the first `${` is known.
    pub fn produced_event(&mut self, text: &str, literal: bool) {
        match (literal, text.find("${")) {
            (false, Some(start)) => self
                .event_sources
                .produced_prefixes
                .push(text[..start].to_string()),
            _ => self.event_sources.produced.push(text.to_string()),
        }
    }

    /// The declared type of the context variable in `slot`, if `types:` gives one.
    pub fn context_type(&self, slot: usize) -> Option<&data_schema::DataSchema> {
        self.context_types.get(slot)?.as_ref()
    }

    /// The names `events:` declares, when it declares any.
    pub fn declared_event_names(&self) -> Option<Vec<String>> {
        Some(
            self.declared_events
                .as_ref()?
                .names()
                .map(String::from)
                .collect(),
        )
    }

    /// The declared data schema of event `name`, if `events:` declares it.
    pub fn declared_event(&self, name: &str) -> Option<&data_schema::DataSchema> {
        self.declared_events.as_ref()?.schema(name)
    }

    /// With `events:` declared, an `on:` key that no event can match is an error; without, the
    /// handlers of engine events that match nothing go to `check`, which warns about them.
    fn check_handlers(&mut self) -> Vec<handled_events::UnmatchedHandler> {
        let declared = self.declared_events.is_some();
        let unmatched = self.event_sources.unmatched(&self.handlers, !declared);
        if !declared {
            return unmatched;
        }
        for handler in unmatched {
            self.key_error(&handler.pointer, handler.message(true), Some(handler.help));
        }
        Vec::new()
    }

    /// Records a `send`'s `to:`, checked when every invoke of the protocol is known.
    pub fn send_target(&mut self, target: &str, pointer: &str) {
        if target != "parent" {
            self.send_targets
                .push((target.to_string(), pointer.to_string()));
        }
    }

    /// Every `send ... to:` names one of this protocol's invokes (or `parent`).
    fn check_send_targets(&mut self) {
        let unknown: Vec<(String, String)> = self
            .send_targets
            .iter()
            .filter(|(target, _)| !self.invoke_ids.contains(target))
            .cloned()
            .collect();
        for (target, pointer) in unknown {
            let help = crate::base::diagnostic::did_you_mean(
                &target,
                self.invoke_ids.iter().map(String::as_str),
            )
            .unwrap_or_else(|| {
                if self.invoke_ids.is_empty() {
                    "`to` takes `parent` or the id of one of this protocol's invokes, and it has \
                     none"
                        .into()
                } else {
                    format!(
                        "`to` takes `parent` or an invoke id: {}",
                        self.invoke_ids.join(", ")
                    )
                }
            });
            self.value_error(
                &pointer,
                format!("no invoke has the id `{target}`"),
                Some(help),
            );
        }
    }

    /// An event name is dot-separated tokens of letters, digits, `_`, `-` (and `*` in descriptors).
    pub fn check_event_name(&mut self, name: &str, pointer: &str) {
        self.check_event_name_at(name, pointer, Part::Value);
    }

    /// `check_event_name`, reporting at the key or the value at `pointer`.
    pub fn check_event_name_at(&mut self, name: &str, pointer: &str, part: Part) {
        let valid = !name.is_empty()
            && name.split('.').all(|token| {
                !token.is_empty()
                    && token
                        .chars()
                        .all(|c| c.is_alphanumeric() || c == '_' || c == '-' || c == '*')
            });
        if !valid {
            self.error(
                pointer,
                part,
                format!("`{name}` is not a valid event name"),
                Some("use dot-separated words, e.g. `error.exec.timeout`".into()),
            );
        }
    }

    pub fn error(&mut self, pointer: &str, part: Part, message: String, help: Option<String>) {
        let location = self.source.location(pointer, part);
        self.diagnostics.push(
            Diagnostic::error(message)
                .at(location)
                .with_optional_help(help),
        );
    }

    pub fn value_error(&mut self, pointer: &str, message: String, help: Option<String>) {
        self.error(pointer, Part::Value, message, help);
    }

    pub fn key_error(&mut self, pointer: &str, message: String, help: Option<String>) {
        self.error(pointer, Part::Key, message, help);
    }

    /// Reports expression problems at their place inside the string at `pointer`.
    fn expression_problems(&mut self, pointer: &str, problems: Vec<ExpressionProblem>) {
        self.expression_problems_in(pointer, Part::Value, 0, problems);
    }

    /// Reports expression problems of an expression that starts `lead` bytes into the key or
    /// the value (`part`) at `pointer`.
    fn expression_problems_in(
        &mut self,
        pointer: &str,
        part: Part,
        lead: usize,
        problems: Vec<ExpressionProblem>,
    ) {
        let node = self.source.positions.nearest(pointer);
        let start = match part {
            Part::Key => node.key.unwrap_or(node.value),
            Part::Value => node.value,
        };
        let quoted = self
            .source
            .text
            .get(start.offset..)
            .and_then(|rest| rest.chars().next())
            .is_some_and(|first| first == '"' || first == '\'');
        let text = &self.source.text;
        let mut expression_start = (start.offset + usize::from(quoted)).min(text.len());
        let lead_start = expression_start;
        expression_start = (expression_start + lead).min(text.len());
        while !text.is_char_boundary(expression_start) {
            expression_start -= 1;
        }
        let lead_characters = text
            .get(lead_start..expression_start)
            .map_or(lead, |before| before.chars().count());
        for problem in problems {
            let mut position = start;
            position.column += lead_characters;
            // The problem's offset counts bytes of the expression; the column counts characters.
            let mut end = (expression_start + problem.offset).min(text.len());
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            let characters = text
                .get(expression_start..end)
                .map_or(problem.offset, |before| before.chars().count());
            position.column += characters + usize::from(quoted);
            let mut location = self.source.location_at(position, Part::Value);
            location.width = location.width.min(
                problem
                    .message
                    .split('`')
                    .nth(1)
                    .map_or(1, |name| name.chars().count().max(1)),
            );
            self.diagnostics.push(
                Diagnostic::error(problem.message)
                    .at(location)
                    .with_optional_help(problem.help),
            );
        }
    }

    pub fn expression(&mut self, text: &str, pointer: &str) -> Option<Expression> {
        Expression::compile(text, &self.names)
            .map_err(|problems| self.expression_problems(pointer, problems))
            .ok()
    }

    /// An expression written inside the key at `pointer`, `lead` bytes into it (an `assign`
    /// key's `[r.path]`): its problems are located there.
    pub fn key_expression(&mut self, text: &str, lead: usize, pointer: &str) -> Option<Expression> {
        Expression::compile(text, &self.names)
            .map_err(|problems| self.expression_problems_in(pointer, Part::Key, lead, problems))
            .ok()
    }

    pub fn template(&mut self, text: &str, pointer: &str) -> Option<Template> {
        Template::compile(text, &self.names)
            .map_err(|problems| self.expression_problems(pointer, problems))
            .ok()
    }

    pub fn value_template(
        &mut self,
        json: &serde_json::Value,
        pointer: &str,
    ) -> Option<ValueTemplate> {
        ValueTemplate::compile(json, &self.names)
            .map_err(|problems| {
                for (relative, problem) in problems {
                    self.expression_problems(&format!("{pointer}{relative}"), vec![problem]);
                }
            })
            .ok()
    }

    /// A delay: a duration literal, or an expression giving milliseconds.
    pub fn delay(&mut self, text: &str, pointer: &str) -> Option<Delay> {
        match model::Duration::parse(text) {
            Some(duration) => Some(Delay::Fixed(duration)),
            None => self.expression(text, pointer).map(Delay::Computed),
        }
    }

    /// A deadline: an expression giving a timestamp. What is plainly not one (a duration
    /// literal, a number, a quoted text) is refused here with what to write.
    pub fn until(&mut self, text: &str, pointer: &str) -> Option<Delay> {
        let trimmed = text.trim();
        let quoted = trimmed.len() >= 2
            && (trimmed.starts_with('\'') && trimmed.ends_with('\'')
                || trimmed.starts_with('"') && trimmed.ends_with('"'));
        let help = if model::Duration::parse(trimmed).is_some() {
            Some(format!(
                "`{trimmed}` is a span of time: write `delay: {trimmed}`, or `until: started + duration('{trimmed}')` with the instant it counts from"
            ))
        } else if trimmed.parse::<f64>().is_ok() {
            Some(
                "a number is no instant: write e.g. `until: timestamp('2026-01-01T09:00:00Z')`"
                    .into(),
            )
        } else if quoted {
            Some(format!(
                "a text is no instant: write `until: timestamp({trimmed})`"
            ))
        } else {
            None
        };
        if let Some(help) = help {
            self.value_error(
                pointer,
                format!("`until` takes a timestamp expression, not `{trimmed}`"),
                Some(help),
            );
            return None;
        }
        self.expression(text, pointer).map(Delay::Until)
    }

    /// Compiles a block of actions.
    pub fn actions(&mut self, list: &[model::Action], pointer: &str) -> Option<Vec<Action>> {
        let mut compiled = Vec::with_capacity(list.len());
        let mut ok = true;
        self.count_block_actions(list.len(), pointer)?;
        for (index, action) in list.iter().enumerate() {
            let action_pointer = format!("{pointer}/{index}");
            // A block's actions take the place of its `use`.
            if let model::Action::Use(usage) = action {
                match self.use_block(usage, &action_pointer) {
                    Some(actions) => compiled.extend(actions),
                    None => ok = false,
                }
                continue;
            }
            match self.action(action, &action_pointer) {
                Some(action) => compiled.push(action),
                None => ok = false,
            }
        }
        ok.then_some(compiled)
    }

    /// Compiles one action, written at `pointer`.
    pub fn action(&mut self, action: &model::Action, pointer: &str) -> Option<Action> {
        match action {
            model::Action::Log(log) => {
                actions::log::Log::compile(log, self, pointer).map(Action::Log)
            }
            model::Action::Assign(assign) => {
                actions::assign::Assign::compile(assign, self, pointer).map(Action::Assign)
            }
            model::Action::Raise(raise) => {
                actions::raise::Raise::compile(raise, self, pointer).map(Action::Raise)
            }
            model::Action::Send(send) => actions::send::Send::compile(send, self, pointer)
                .map(|send| Action::Send(Box::new(send))),
            model::Action::Cancel(cancel) => {
                actions::cancel::Cancel::compile(cancel, self, pointer).map(Action::Cancel)
            }
            model::Action::ReadFile(read) => actions::tool::Tool::read_file(read, self, pointer)
                .map(|action| Action::Tool(Box::new(action))),
            model::Action::ListDir(list) => actions::tool::Tool::list_dir(list, self, pointer)
                .map(|action| Action::Tool(Box::new(action))),
            model::Action::GrepSearch(grep) => {
                actions::tool::Tool::grep_search(grep, self, pointer)
                    .map(|action| Action::Tool(Box::new(action)))
            }
            model::Action::Write(write) => actions::file::File::write(write, self, pointer)
                .map(|action| Action::File(Box::new(action))),
            model::Action::Backup(backup) => actions::file::File::backup(backup, self, pointer)
                .map(|action| Action::File(Box::new(action))),
            model::Action::Restore(restore) => actions::file::File::restore(restore, self, pointer)
                .map(|action| Action::File(Box::new(action))),
            model::Action::Emit(emit) => {
                actions::emit::Emit::compile(emit, self, pointer).map(Action::Emit)
            }
            model::Action::Call(call) => {
                actions::call::Call::compile(call, self, pointer).map(Action::Call)
            }
            model::Action::Exec(exec) => actions::exec::Exec::compile(exec, self, pointer)
                .map(|action| Action::Exec(Box::new(action))),
            model::Action::If(conditional) => {
                actions::conditional::Conditional::compile(conditional, self, pointer)
                    .map(Action::If)
            }
            model::Action::Foreach(foreach) => {
                actions::foreach::Foreach::compile(foreach, self, pointer).map(Action::Foreach)
            }
            model::Action::Map(map) => {
                actions::map::Map::compile(map, self, pointer).map(|map| Action::Map(Box::new(map)))
            }
            model::Action::Use(_) => {
                // `actions` splices a block in place of its `use`; one action alone (a map's
                // effect) cannot be a `use`.
                self.value_error(
                    pointer,
                    "a `use` cannot stand here: it expands to a list of actions".to_string(),
                    Some("write the effect itself here".into()),
                );
                None
            }
        }
    }

    /// An action id names events (`done.exec.<id>`) and mocks: one word, unique in the file.
    pub fn check_action_id(&mut self, id: &str, pointer: &str) {
        if self.map_ids.iter().any(|known| known == id) {
            self.duplicate_map_id(id, pointer);
        }
        if !self.action_ids.iter().any(|known| known == id) {
            self.action_ids.push(id.to_string());
        }
        let valid = id
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid {
            self.value_error(
                pointer,
                format!("`{id}` is not a valid action id"),
                Some("use letters, digits, `_` and `-`, starting with a letter".into()),
            );
        }
    }

    /// Claims `id` for a map, whose items alone use it: any other action with that id (a map
    /// included) is refused, wherever it is written. The map's body, compiled next, registers
    /// the id as usual; `map_compiled` then makes it a map's.
    pub fn claim_map_id(&mut self, id: &str, pointer: &str) {
        // Another map's id is refused by the body's own id check, once.
        let taken = self.action_ids.iter().any(|known| known == id)
            && !self.map_ids.iter().any(|known| known == id);
        if taken {
            self.duplicate_map_id(id, pointer);
        }
    }

    fn duplicate_map_id(&mut self, id: &str, pointer: &str) {
        self.value_error(
            pointer,
            format!("`{id}` is already the id of a map, or of an action beside one"),
            Some(format!(
                "a map's id names its items (`{id}[0]`, `{id}[1]`, ...) and its events (`done.map.{id}`): give every map an id no other action has"
            )),
        );
    }

    /// Loads and compiles a child protocol, checking its inputs against what the parent gives.
    fn invoke(&mut self, invoke: &model::Invoke, pointer: &str) -> Option<machine::InvokeNode> {
        self.check_action_id(&invoke.id, &format!("{pointer}/id"));
        // Registered first: a handler of these is right even when the child fails to compile.
        let done = self.intern_event(&format!("done.invoke.{}", invoke.id));
        let failed = self.intern_event(&format!("error.invoke.{}", invoke.id));
        self.invoke_ids.push(invoke.id.clone());
        let (child, inputs) = self.child_protocol(&invoke.protocol, &invoke.inputs, pointer)?;
        Some(machine::InvokeNode {
            id: Arc::from(invoke.id.as_str()),
            machine: child,
            inputs,
            done,
            failed,
            autoforward: invoke.autoforward,
            takes_events: invoke.autoforward,
        })
    }

    /// The child protocol `protocol` (an invoke's or a map's, written at `pointer`), loaded
    /// and compiled once per load, and the templates of the inputs given it by input slot.
    pub fn child_protocol(
        &mut self,
        protocol: &str,
        given: &indexmap::IndexMap<String, serde_json::Value>,
        pointer: &str,
    ) -> Option<ChildProtocol> {
        let invoke = model::Invoke {
            protocol: protocol.to_string(),
            id: String::new(),
            inputs: given.clone(),
            autoforward: false,
        };
        let invoke = &invoke;
        let protocol_pointer = format!("{pointer}/protocol");
        let parent = std::path::Path::new(&self.source.path)
            .parent()
            .unwrap_or(std::path::Path::new(""));
        let path = parent.join(&invoke.protocol);
        let canonical = path.canonicalize().unwrap_or_else(|_| path.clone());
        if self.ancestry.contains(&canonical) {
            self.value_error(
                &protocol_pointer,
                format!(
                    "invoke cycle: `{}` is already running above this one",
                    invoke.protocol
                ),
                Some("a protocol cannot invoke itself, directly or through others".into()),
            );
            return None;
        }
        // A child's file is the operator's to load, as the parent's is: its path is fixed in
        // the protocol, no input chooses it, so `read` (the protocol's data access) does not
        // apply. It must still be a protocol file: a load error would otherwise print lines of
        // any file the path names (`/etc/shadow`).
        let is_protocol_file = path
            .extension()
            .is_some_and(|extension| extension == "yaml" || extension == "yml");
        if !is_protocol_file {
            self.value_error(
                &protocol_pointer,
                format!("`{}` is not a protocol file", invoke.protocol),
                Some("a child protocol is a `.yaml` (or `.yml`) file".into()),
            );
            return None;
        }
        let child = match self.compiled_child(&canonical) {
            Some(Some(machine)) => machine,
            Some(None) => {
                self.value_error(
                    &protocol_pointer,
                    format!("the child protocol `{}` is invalid", invoke.protocol),
                    Some("its problems are listed where it is first invoked".into()),
                );
                return None;
            }
            None => {
                let compiled = self.compile_child(invoke, &path, &canonical, &protocol_pointer);
                self.children
                    .borrow_mut()
                    .entry(canonical)
                    .or_default()
                    .push((self.capabilities.clone(), compiled.clone()));
                compiled?
            }
        };
        let inputs = self.check_child_inputs(invoke, &child, pointer)?;
        Some((child, inputs))
    }

    /// The child at `canonical` if it was compiled under these capabilities already in this
    /// load: `Some(None)` when it was invalid.
    fn compiled_child(&self, canonical: &std::path::Path) -> Option<Option<Arc<Machine>>> {
        let children = self.children.borrow();
        let compiled = children.get(canonical)?;
        compiled
            .iter()
            .find(|(capabilities, _)| *capabilities == self.capabilities)
            .map(|(_, machine)| machine.clone())
    }

    /// Reads and compiles a child protocol for the first time, reporting its problems.
    fn compile_child(
        &mut self,
        invoke: &model::Invoke,
        path: &std::path::Path,
        canonical: &std::path::Path,
        protocol_pointer: &str,
    ) -> Option<Arc<Machine>> {
        use crate::pipeline::load::{LoadError, OwnFileError};
        let text = match crate::pipeline::load::read_own_file(path, &["states"]) {
            // `load_text` refuses a library by its name, saying what to do with it instead.
            _ if crate::pipeline::load::is_library_file(path) => Ok(String::new()),
            Ok(text) => Ok(text),
            Err(OwnFileError::NotOfKind(reason)) => {
                self.value_error(
                    protocol_pointer,
                    format!("`{}` is not a protocol: {reason}", invoke.protocol),
                    Some(format!(
                        "a child protocol is a protocol file (`id:`, `states:`); none of this \
                         file's lines are shown, as the path may name any file (`protocol-run \
                         validate {}` shows its problems)",
                        path.display()
                    )),
                );
                return None;
            }
            Err(OwnFileError::Unloadable(error)) => Err(error),
        };
        let loaded = match text.and_then(|text| {
            crate::pipeline::load::load_text(&path.display().to_string(), text)
                .map_err(LoadError::Invalid)
        }) {
            Ok(loaded) => loaded,
            Err(LoadError::Invalid(diagnostics)) => {
                self.value_error(
                    protocol_pointer,
                    format!("the child protocol `{}` is invalid", invoke.protocol),
                    None,
                );
                self.diagnostics.extend(diagnostics);
                return None;
            }
            Err(error) => {
                let message = error.to_string();
                let message = message.trim_start_matches("error: ").trim_end().to_string();
                self.value_error(
                    protocol_pointer,
                    message,
                    Some("the path is relative to this protocol's file".into()),
                );
                return None;
            }
        };
        let mut ancestry = self.ancestry.clone();
        ancestry.push(canonical.to_path_buf());
        let extensions = self.extensions.clone();
        let limit = self.capabilities.clone().bounding_unbound_grants();
        match compile_nested(&loaded, ancestry, &extensions, &limit, self.children) {
            Ok(child) => Some(Arc::new(child)),
            Err(diagnostics) => {
                self.value_error(
                    protocol_pointer,
                    format!("the child protocol `{}` is invalid", invoke.protocol),
                    None,
                );
                self.diagnostics.extend(diagnostics);
                None
            }
        }
    }

    /// The compiled templates of the inputs an invoke gives its child (by the child's input
    /// slot), or `None` when one is unknown, missing or invalid (each reported).
    fn check_child_inputs(
        &mut self,
        invoke: &model::Invoke,
        child: &Machine,
        pointer: &str,
    ) -> Option<Vec<(usize, ValueTemplate)>> {
        let mut inputs = Vec::with_capacity(invoke.inputs.len());
        let mut ok = true;
        for (name, value) in &invoke.inputs {
            let input_pointer = format!("{pointer}/inputs/{}", escape_pointer_token(name));
            match child.inputs.iter().position(|input| &input.name == name) {
                Some(slot) => match self.value_template(value, &input_pointer) {
                    Some(template) => inputs.push((slot, template)),
                    None => ok = false,
                },
                None => {
                    let help =
                        did_you_mean(name, child.inputs.iter().map(|input| input.name.as_str()));
                    self.key_error(
                        &input_pointer,
                        format!("`{}` has no input `{name}`", invoke.protocol),
                        help,
                    );
                    ok = false;
                }
            }
        }
        for input in child
            .inputs
            .iter()
            .filter(|input| input.required && !invoke.inputs.contains_key(&input.name))
        {
            self.key_error(
                &format!("{pointer}/inputs"),
                format!("the child protocol needs the input `{}`", input.name),
                Some(format!("add `{}: ...` under `inputs`", input.name)),
            );
            ok = false;
        }
        ok.then_some(inputs)
    }

    /// Context, input and reserved names must not collide.
    fn check_data_names(&mut self, protocol: &model::Protocol) {
        for name in protocol.inputs.keys() {
            let pointer = format!("/inputs/{}", escape_pointer_token(name));
            self.check_identifier(name, &pointer, "input");
            if protocol.context.contains_key(name) {
                self.key_error(
                    &format!("/context/{}", escape_pointer_token(name)),
                    format!("`{name}` is both an input and a context variable"),
                    Some("expressions read both by bare name: rename one of them".into()),
                );
            }
        }
        for name in protocol.context.keys() {
            self.check_identifier(
                name,
                &format!("/context/{}", escape_pointer_token(name)),
                "context variable",
            );
        }
    }

    /// The slot of the context variable `name`, which an action sets (`assign`, a `foreach`'s
    /// item), or a located error at `pointer` saying why it cannot be set.
    pub fn writable_context_slot(
        &mut self,
        name: &str,
        pointer: &str,
        part: Part,
    ) -> Option<usize> {
        match self.names.binding(name) {
            Some(expression::NameBinding::Context(slot)) => return Some(slot),
            // A library's block checked on its own sets the variables of a protocol not known
            // yet: no slot, and no variable's type, is its (the action is checked, never run).
            None if self.names.is_open() && is_identifier(name) => return Some(usize::MAX),
            Some(expression::NameBinding::Input(_)) => {
                self.error(
                    pointer,
                    part,
                    format!("`{name}` is an input, and inputs are read-only"),
                    Some(format!("declare a context variable, e.g. `context: {{ {name}_value: null }}`, and use that")),
                );
                return None;
            }
            _ => {}
        }
        if !is_identifier(name) {
            self.error(
                pointer,
                part,
                format!("`{name}` is not a variable name"),
                Some(
                    "name a context variable: letters, digits and `_`, starting with a letter"
                        .into(),
                ),
            );
            return None;
        }
        let help = did_you_mean(name, self.context_names())
            .unwrap_or_else(|| format!("declare it under `context:` first, e.g. `{name}: null`"));
        self.error(
            pointer,
            part,
            format!("unknown context variable `{name}`"),
            Some(help),
        );
        None
    }

    fn check_identifier(&mut self, name: &str, pointer: &str, what: &str) {
        if !is_identifier(name) {
            self.key_error(
                pointer,
                format!("`{name}` is not a valid {what} name"),
                Some("use letters, digits and `_`, starting with a letter, so expressions can read it".into()),
            );
        } else if RESERVED_NAMES.contains(&name) {
            self.key_error(
                pointer,
                format!("`{name}` is reserved and cannot name a {what}"),
                Some("choose another name".into()),
            );
        }
    }
}

/// Names expressions give a meaning of their own, which no input, variable or parameter takes.
const RESERVED_NAMES: [&str; 8] = [
    "event", "true", "false", "null", "in", "In", "int", "string",
];

/// Letters, digits and `_`, starting with a letter or `_`: a name expressions can read.
fn is_identifier(name: &str) -> bool {
    name.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The states of the document in pre-order, before compiling them.
#[derive(Default)]
struct Outline<'a> {
    states: Vec<OutlineEntry<'a>>,
    ids: HashMap<Arc<str>, StateId>,
}

struct OutlineEntry<'a> {
    id: Arc<str>,
    state: Option<&'a model::State>,
    parent: Option<StateId>,
    pointer: String,
}

impl<'a> Outline<'a> {
    fn collect(&mut self, compiler: &mut Compiler, protocol: &'a model::Protocol) {
        self.states.push(OutlineEntry {
            id: Arc::from(protocol.id.as_str()),
            state: None,
            parent: None,
            pointer: String::new(),
        });
        // An explicit stack (pre-order, children pushed in reverse) keeps deep documents
        // from overflowing the call stack.
        let mut pending: Vec<(StateId, String, &'a str, &'a model::State)> = protocol
            .states
            .iter()
            .rev()
            .map(|(id, state)| {
                (
                    StateId::ROOT,
                    format!("/states/{}", escape_pointer_token(id)),
                    id.as_str(),
                    state,
                )
            })
            .collect();
        while let Some((parent, pointer, id, state)) = pending.pop() {
            let index = StateId(self.states.len() as u32);
            self.add_id(compiler, id, index, &pointer);
            for (child_id, child) in state.states.iter().rev() {
                pending.push((
                    index,
                    format!("{pointer}/states/{}", escape_pointer_token(child_id)),
                    child_id,
                    child,
                ));
            }
            self.states.push(OutlineEntry {
                id: Arc::from(id),
                state: Some(state),
                parent: Some(parent),
                pointer,
            });
        }
    }

    fn add_id(&mut self, compiler: &mut Compiler, id: &str, index: StateId, pointer: &str) {
        let valid = id
            .chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_')
            && id
                .chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '-');
        if !valid {
            compiler.key_error(
                pointer,
                format!("`{id}` is not a valid state id"),
                Some("use letters, digits, `_` and `-`, starting with a letter or `_`".into()),
            );
        }
        if let Some(first) = self.ids.get(id) {
            let first_position = compiler
                .source
                .positions
                .nearest(&self.states[first.index()].pointer);
            let line = first_position.key.unwrap_or(first_position.value).line;
            compiler.key_error(
                pointer,
                format!("duplicate state id `{id}`"),
                Some(format!(
                    "state ids are unique in the whole file; the first `{id}` is on line {line}"
                )),
            );
            return;
        }
        self.ids.insert(Arc::from(id), index);
    }
}

/// Builds the state and transition tables from the outline.
struct Builder<'o, 'a> {
    outline: &'o Outline<'a>,
    states: Vec<StateNode>,
    transitions: Vec<TransitionNode>,
}

impl Builder<'_, '_> {
    fn empty_node(&self, index: StateId, kind: StateKind) -> StateNode {
        let entry = &self.outline.states[index.index()];
        StateNode {
            id: entry.id.clone(),
            kind,
            parent: entry.parent,
            children: Vec::new(),
            descendants_end: StateId(index.0 + 1),
            ancestors: Vec::new(),
            initial: None,
            transitions: Vec::new(),
            eventless: Vec::new(),
            entry: Vec::new(),
            exit: Vec::new(),
            timers: Vec::new(),
            defer: Vec::new(),
            invokes: Vec::new(),
            exit_code: 0,
            output: None,
            pointer: entry.pointer.clone(),
        }
    }

    fn build_root(&mut self, compiler: &mut Compiler, protocol: &model::Protocol) {
        let mut root = self.empty_node(StateId::ROOT, StateKind::Root);
        let first_child = self.first_child(StateId::ROOT);
        root.initial = self.initial_transition(
            compiler,
            StateId::ROOT,
            protocol.initial.as_ref(),
            "/initial",
            first_child,
        );
        root.defer = deferral::compile(compiler, &protocol.defer, "/defer");
        if protocol.states.is_empty() {
            compiler.value_error(
                "/states",
                "a protocol needs at least one state".into(),
                None,
            );
        }
        self.states.push(root);
    }

    /// The first non-history child, the default initial state.
    fn first_child(&self, parent: StateId) -> Option<StateId> {
        self.outline
            .states
            .iter()
            .enumerate()
            .find(|(_, entry)| {
                entry.parent == Some(parent)
                    && entry
                        .state
                        .is_none_or(|state| state.kind != Some(StateType::History))
            })
            .map(|(index, _)| StateId(index as u32))
    }

    fn build_state(&mut self, compiler: &mut Compiler, index: StateId) {
        let entry = &self.outline.states[index.index()];
        let Some(state) = entry.state else { return };
        let pointer = entry.pointer.clone();
        let kind = self.state_kind(compiler, index, state, &pointer);
        let mut node = self.empty_node(index, kind);
        self.check_fields(compiler, state, kind, &pointer);
        node.entry = compiler
            .actions(&state.entry, &format!("{pointer}/entry"))
            .unwrap_or_default();
        node.exit = compiler
            .actions(&state.exit, &format!("{pointer}/exit"))
            .unwrap_or_default();
        node.defer = deferral::compile(compiler, &state.defer, &format!("{pointer}/defer"));
        match kind {
            StateKind::Compound => {
                let first_child = self.first_child(index);
                node.initial = self.initial_transition(
                    compiler,
                    index,
                    state.initial.as_ref(),
                    &format!("{pointer}/initial"),
                    first_child,
                );
            }
            StateKind::History { .. } => {
                let parent = entry.parent.unwrap_or(StateId::ROOT);
                let fallback = self.first_child(parent);
                node.initial =
                    self.history_default(compiler, index, parent, state, &pointer, fallback);
            }
            StateKind::Final => {
                if let Some(code) = state.exit_code {
                    if (0..=MAX_EXIT_CODE).contains(&code) {
                        node.exit_code = code as u8;
                    } else {
                        compiler.value_error(
                            &format!("{pointer}/exit_code"),
                            format!("exit code {code} is outside 0–{MAX_EXIT_CODE}"),
                            Some("codes 64 and above are the engine's own (64 usage, 65 invalid input, 66 no file, 70 internal, 74 I/O)".into()),
                        );
                    }
                }
                if let Some(output) = &state.output {
                    node.output = compiler.value_template(output, &format!("{pointer}/output"));
                }
            }
            _ => {}
        }
        for (events, transitions) in &state.on {
            let on_pointer = format!("{pointer}/on/{}", escape_pointer_token(events));
            let descriptors = self.descriptors(compiler, events, &on_pointer);
            for (position, spec) in transitions.as_slice().iter().enumerate() {
                let spec_pointer = match transitions {
                    model::Transitions::One(_) => on_pointer.clone(),
                    model::Transitions::Many(_) => format!("{on_pointer}/{position}"),
                };
                let id = self.transition(
                    compiler,
                    index,
                    spec,
                    &spec_pointer,
                    descriptors.clone(),
                    TransitionPlace::On,
                );
                node.transitions.extend(id);
            }
        }
        for (position, transition) in state.after.iter().enumerate() {
            let after_pointer = format!("{pointer}/after/{position}");
            let event_name = format!("after.{}.{}", entry.id, position);
            let event_type = compiler.intern_event(&event_name);
            let delay = match (&transition.delay, &transition.until) {
                (Some(delay), None) => compiler.delay(delay, &format!("{after_pointer}/delay")),
                (None, Some(until)) => compiler.until(until, &format!("{after_pointer}/until")),
                (Some(_), Some(_)) => {
                    compiler.key_error(
                        &format!("{after_pointer}/until"),
                        "a transition under `after` has a `delay` or an `until`, not both".into(),
                        Some(
                            "keep `delay` for a span from entry, or `until` for an instant".into(),
                        ),
                    );
                    None
                }
                (None, None) => {
                    compiler.key_error(
                        &after_pointer,
                        "a transition under `after` needs a `delay` or an `until`".into(),
                        Some(
                            "add e.g. `delay: 30s`, or `until: started + duration('1h')` for a deadline"
                                .into(),
                        ),
                    );
                    None
                }
            };
            let spec = model::transition::TransitionSpec::Full(transition.transition.clone());
            let descriptors = vec![EventDescriptor::Prefix(Arc::from(event_name.as_str()))];
            if let Some(id) = self.transition(
                compiler,
                index,
                &spec,
                &after_pointer,
                descriptors,
                TransitionPlace::After,
            ) {
                node.transitions.push(id);
            }
            if let Some(delay) = delay {
                node.timers.push(Timer {
                    delay,
                    event: Arc::from(event_name),
                    event_type,
                    private: true,
                });
            }
        }
        if let Some(timeout) = &state.timeout {
            let timeout_pointer = format!("{pointer}/timeout");
            if matches!(kind, StateKind::Final | StateKind::History { .. }) {
                compiler.key_error(
                    &timeout_pointer,
                    "final and history states have no timeout".into(),
                    None,
                );
            }
            let event_name = format!("timeout.{}", entry.id);
            let event_type = compiler.intern_event(&event_name);
            let delay = match timeout {
                model::timeout::StateTimeout::After(text) => compiler.delay(text, &timeout_pointer),
                model::timeout::StateTimeout::Until(deadline) => {
                    compiler.until(&deadline.until, &format!("{timeout_pointer}/until"))
                }
            };
            if let Some(delay) = delay {
                node.timers.push(Timer {
                    delay,
                    event: Arc::from(event_name),
                    event_type,
                    private: false,
                });
            }
        }
        for (index, invoke) in state.invoke.iter().enumerate() {
            if matches!(kind, StateKind::Final | StateKind::History { .. }) {
                compiler.key_error(
                    &format!("{pointer}/invoke"),
                    "final and history states invoke nothing".into(),
                    None,
                );
                break;
            }
            if let Some(invoked) = compiler.invoke(invoke, &format!("{pointer}/invoke/{index}")) {
                node.invokes.push(invoked);
            }
        }
        if let Some(always) = &state.always {
            for (position, spec) in always.as_slice().iter().enumerate() {
                let spec_pointer = match always {
                    model::Transitions::One(_) => format!("{pointer}/always"),
                    model::Transitions::Many(_) => format!("{pointer}/always/{position}"),
                };
                let id = self.transition(
                    compiler,
                    index,
                    spec,
                    &spec_pointer,
                    Vec::new(),
                    TransitionPlace::Always,
                );
                node.eventless.extend(id);
            }
        }
        self.states.push(node);
    }

    fn state_kind(
        &self,
        compiler: &mut Compiler,
        index: StateId,
        state: &model::State,
        pointer: &str,
    ) -> StateKind {
        let has_children = !state.states.is_empty();
        let kind = match state.kind {
            None if has_children => StateKind::Compound,
            None => StateKind::Atomic,
            Some(StateType::Atomic) => StateKind::Atomic,
            Some(StateType::Compound) => StateKind::Compound,
            Some(StateType::Parallel) => StateKind::Parallel,
            Some(StateType::Final) => StateKind::Final,
            Some(StateType::History) => StateKind::History {
                deep: state.history == Some(model::HistoryDepth::Deep),
            },
        };
        let children_pointer = format!("{pointer}/states");
        match kind {
            StateKind::Atomic if has_children => compiler.key_error(
                &children_pointer,
                "an atomic state cannot have child states".into(),
                Some("remove `type: atomic` to make it compound".into()),
            ),
            StateKind::Compound | StateKind::Parallel if !has_children => compiler.key_error(
                &format!("{pointer}/type"),
                "this state needs child `states`".into(),
                Some("add `states:`, or remove `type` for an atomic state".into()),
            ),
            StateKind::Final if has_children => compiler.key_error(
                &children_pointer,
                "a final state cannot have child states".into(),
                Some(
                    "move the children to a compound state, and put a final state inside it".into(),
                ),
            ),
            StateKind::History { .. } => {
                if has_children {
                    compiler.key_error(
                        &children_pointer,
                        "a history state cannot have child states".into(),
                        None,
                    );
                }
                let parent = self.outline.states[index.index()]
                    .parent
                    .unwrap_or(StateId::ROOT);
                if parent == StateId::ROOT {
                    compiler.key_error(
                        pointer,
                        "misplaced history state: it must be a child of a compound or parallel state".into(),
                        Some("move it inside the state whose history it records".into()),
                    );
                }
            }
            _ => {}
        }
        kind
    }

    /// Fields that only make sense for some kinds of state.
    fn check_fields(
        &self,
        compiler: &mut Compiler,
        state: &model::State,
        kind: StateKind,
        pointer: &str,
    ) {
        let is_final = kind == StateKind::Final;
        let is_history = matches!(kind, StateKind::History { .. });
        let misplaced: [(&str, bool, &str); 6] = [
            (
                "exit_code",
                state.exit_code.is_some() && !is_final,
                "only final states have an exit code",
            ),
            (
                "output",
                state.output.is_some() && !is_final,
                "only final states have an output",
            ),
            (
                "history",
                state.history.is_some() && !is_history,
                "`history` belongs to history states (`type: history`)",
            ),
            (
                "target",
                state.target.is_some() && !is_history,
                "`target` on a state belongs to history states; transitions go under `on`",
            ),
            (
                "initial",
                state.initial.is_some() && kind != StateKind::Compound,
                "only compound states have an `initial` child",
            ),
            (
                "on",
                !state.on.is_empty() && (is_final || is_history),
                "final and history states have no transitions",
            ),
        ];
        for (key, wrong, message) in misplaced {
            if wrong {
                compiler.key_error(&format!("{pointer}/{key}"), message.into(), None);
            }
        }
        if (is_final || is_history) && (state.always.is_some() || !state.after.is_empty()) {
            let key = if state.always.is_some() {
                "always"
            } else {
                "after"
            };
            compiler.key_error(
                &format!("{pointer}/{key}"),
                "final and history states have no transitions".into(),
                None,
            );
        }
        if is_history && (!state.entry.is_empty() || !state.exit.is_empty()) {
            let key = if state.entry.is_empty() {
                "exit"
            } else {
                "entry"
            };
            compiler.key_error(
                &format!("{pointer}/{key}"),
                "a history state has no entry or exit actions".into(),
                None,
            );
        }
    }

    fn descriptors(
        &self,
        compiler: &mut Compiler,
        events: &str,
        pointer: &str,
    ) -> Vec<EventDescriptor> {
        let descriptors: Vec<EventDescriptor> = events
            .split_whitespace()
            .map(|token| {
                if token != "*" {
                    compiler.check_event_name(token.trim_end_matches(".*"), pointer);
                }
                compiler.handlers.push(handled_events::Handler {
                    token: token.to_string(),
                    pointer: pointer.to_string(),
                });
                let descriptor = EventDescriptor::parse(token);
                if let EventDescriptor::Prefix(name) = &descriptor {
                    compiler.intern_name(name);
                }
                descriptor
            })
            .collect();
        if descriptors.is_empty() {
            compiler.key_error(
                pointer,
                "empty event descriptor".into(),
                Some("name an event, or use `always` for eventless transitions".into()),
            );
        }
        descriptors
    }

    fn transition(
        &mut self,
        compiler: &mut Compiler,
        source: StateId,
        spec: &model::transition::TransitionSpec,
        pointer: &str,
        events: Vec<EventDescriptor>,
        place: TransitionPlace,
    ) -> Option<TransitionId> {
        let (targets, guard, actions, internal) = match spec {
            model::transition::TransitionSpec::Target(target) => (
                self.resolve_targets(compiler, &Targets::One(target.clone()), pointer),
                None,
                Some(Vec::new()),
                false,
            ),
            model::transition::TransitionSpec::Full(transition) => {
                let targets = match &transition.target {
                    Some(targets) => {
                        self.resolve_targets(compiler, targets, &format!("{pointer}/target"))
                    }
                    None => Some(Vec::new()),
                };
                let guard = transition
                    .guard
                    .as_ref()
                    .map(|guard| compiler.expression(guard, &format!("{pointer}/guard")));
                let actions = compiler.actions(&transition.actions, &format!("{pointer}/actions"));
                if place == TransitionPlace::On {
                    event_data_reads::check(compiler, &events, transition, pointer);
                }
                let internal = transition.kind == Some(TransitionType::Internal);
                (targets, guard, actions, internal)
            }
        };
        let guard = match guard {
            Some(None) => return None,
            Some(Some(guard)) => Some(guard),
            None => None,
        };
        let id = TransitionId(self.transitions.len() as u32);
        self.transitions.push(TransitionNode {
            source,
            events,
            known_matches: Default::default(),
            guard,
            targets: targets?,
            internal,
            actions: actions?,
            pointer: pointer.to_string(),
            reach: std::sync::OnceLock::new(),
        });
        Some(id)
    }

    /// Resolves target ids, suggesting the nearest id for a typo; several targets must be
    /// able to be active together.
    fn resolve_targets(
        &self,
        compiler: &mut Compiler,
        targets: &Targets,
        pointer: &str,
    ) -> Option<Vec<StateId>> {
        let mut resolved = Vec::new();
        let mut ok = true;
        for (position, target) in targets.as_slice().iter().enumerate() {
            let target_pointer = match targets {
                Targets::One(_) => pointer.to_string(),
                Targets::Many(_) => format!("{pointer}/{position}"),
            };
            match self.outline.ids.get(target.as_str()) {
                Some(state) => resolved.push(*state),
                None => {
                    ok = false;
                    let help = did_you_mean(target, self.outline.ids.keys().map(|id| &**id))
                        .unwrap_or_else(|| {
                            "targets name states by their id (the key under `states:`)".into()
                        });
                    compiler.value_error(
                        &target_pointer,
                        format!("unknown target `{target}`"),
                        Some(help),
                    );
                }
            }
        }
        if ok && resolved.len() > 1 && !self.orthogonal(&resolved) {
            compiler.value_error(
                pointer,
                "these targets cannot be active together".into(),
                Some("several targets must be in different regions of a parallel state".into()),
            );
            ok = false;
        }
        ok.then_some(resolved)
    }

    /// No target is an ancestor of another, and any two targets' nearest common ancestor is
    /// a parallel state (so they are in different regions).
    fn orthogonal(&self, targets: &[StateId]) -> bool {
        // A history state stands for its parent: restoring it re-enters the parent's regions,
        // so it is in no region of its own.
        let standing_for = |state: StateId| {
            let entry = &self.outline.states[state.index()];
            match (entry.state.and_then(|state| state.kind), entry.parent) {
                (Some(StateType::History), Some(parent)) => parent,
                _ => state,
            }
        };
        let ancestors = |state: StateId| {
            std::iter::successors(Some(standing_for(state)), |s| {
                self.outline.states[s.index()].parent
            })
            .collect::<Vec<_>>()
        };
        for (i, left) in targets.iter().enumerate() {
            for right in &targets[i + 1..] {
                let left_chain = ancestors(*left);
                let right_chain = ancestors(*right);
                let Some(common) = left_chain.iter().find(|state| right_chain.contains(state))
                else {
                    return false;
                };
                if *common == standing_for(*left) || *common == standing_for(*right) {
                    return false;
                }
                let is_parallel = self.outline.states[common.index()]
                    .state
                    .is_some_and(|state| state.kind == Some(StateType::Parallel));
                if !is_parallel {
                    return false;
                }
            }
        }
        true
    }

    /// The initial transition of a compound state: its targets must be proper descendants.
    fn initial_transition(
        &mut self,
        compiler: &mut Compiler,
        state: StateId,
        initial: Option<&Targets>,
        pointer: &str,
        first_child: Option<StateId>,
    ) -> Option<TransitionId> {
        let outside = |id: &str| DefaultProblem {
            message: format!("invalid initial state `{id}`: it is not inside this state"),
            help: Some("the initial state must be a child or deeper descendant".into()),
        };
        self.default_transition(
            compiler,
            state,
            state,
            initial,
            pointer,
            first_child,
            &outside,
        )
    }

    /// The default transition of a history state: its targets must be inside the parent.
    fn history_default(
        &mut self,
        compiler: &mut Compiler,
        history: StateId,
        parent: StateId,
        state: &model::State,
        pointer: &str,
        fallback: Option<StateId>,
    ) -> Option<TransitionId> {
        let outside = |id: &str| DefaultProblem {
            message: format!("a history state's default target `{id}` must be inside its parent"),
            help: None,
        };
        let target_pointer = format!("{pointer}/target");
        self.default_transition(
            compiler,
            history,
            parent,
            state.target.as_ref(),
            &target_pointer,
            fallback,
            &outside,
        )
    }

    /// A transition with no event or guard whose targets must lie inside `container`: written
    /// targets, or `fallback` when none are written.
    #[allow(clippy::too_many_arguments)]
    fn default_transition(
        &mut self,
        compiler: &mut Compiler,
        source: StateId,
        container: StateId,
        written: Option<&Targets>,
        pointer: &str,
        fallback: Option<StateId>,
        outside: &dyn Fn(&str) -> DefaultProblem,
    ) -> Option<TransitionId> {
        let targets = match written {
            Some(targets) => {
                let resolved = self.resolve_targets(compiler, targets, pointer)?;
                if let Some(stray) = resolved
                    .iter()
                    .find(|target| !self.is_outline_descendant(**target, container))
                {
                    let problem = outside(&self.outline.states[stray.index()].id);
                    compiler.value_error(pointer, problem.message, problem.help);
                    return None;
                }
                resolved
            }
            None => vec![fallback?],
        };
        let id = TransitionId(self.transitions.len() as u32);
        self.transitions.push(TransitionNode {
            source,
            events: Vec::new(),
            known_matches: Default::default(),
            guard: None,
            targets,
            internal: false,
            actions: Vec::new(),
            pointer: pointer.to_string(),
            reach: std::sync::OnceLock::new(),
        });
        Some(id)
    }

    fn is_outline_descendant(&self, state: StateId, ancestor: StateId) -> bool {
        std::iter::successors(self.outline.states[state.index()].parent, |s| {
            self.outline.states[s.index()].parent
        })
        .any(|s| s == ancestor)
    }
}

/// Why a default transition's target is refused.
struct DefaultProblem {
    message: String,
    help: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TransitionPlace {
    On,
    After,
    Always,
}
