//! Checks a scenario file against its protocol, for `validate` and `check`: located problems.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::base::diagnostic::{Diagnostic, did_you_mean};
use crate::base::model::scenario::{ScenarioFile, SendOutcome, Step};
use crate::effects::mock::Mocks;
use crate::pipeline::compile::machine::{EventDescriptor, Machine};
use crate::pipeline::load::LoadError;
use crate::pipeline::load::schema::DocumentKind;
use crate::pipeline::load::source::{Part, Source};

/// A scenario file that checked clean of errors (warnings may remain).
pub struct CheckedScenarios {
    pub file: ScenarioFile,
    pub machine: Arc<Machine>,
    /// What `check` reports and `validate` does not: sends no `on:` of the protocol handles.
    pub warnings: Vec<Diagnostic>,
}

/// Whether `path` is a scenario file: named `*.scenario.yaml`, or a YAML file whose top level
/// has both `protocol:` and `scenarios:` (a protocol has neither).
pub fn is_scenario(path: &Path) -> bool {
    super::runner::is_scenario_file(path)
        || crate::pipeline::load::read_text(path).is_ok_and(|text| looks_like_scenarios(&text))
}

/// Whether the text's top level has the two keys of a scenario file.
pub fn looks_like_scenarios(text: &str) -> bool {
    // A line starting with the key: the text's first, or one after a line feed (`lines` splits
    // at `\n` too), found with a substring search rather than a walk over every line.
    let top_level =
        |key: &str, after_line_feed: &str| text.starts_with(key) || text.contains(after_line_feed);
    top_level("protocol:", "\nprotocol:") && top_level("scenarios:", "\nscenarios:")
}

/// Loads the scenario file and its protocol and checks every name the scenarios use: every
/// error at once, or the file with the warnings `check` adds.
pub fn check_scenario_file(path: &Path) -> Result<CheckedScenarios, Vec<Diagnostic>> {
    let text = crate::pipeline::load::read_text(path).map_err(|error| match error {
        LoadError::Invalid(diagnostics) => diagnostics,
        other => vec![Diagnostic::error(
            other.to_string().replacen("error: ", "", 1),
        )],
    })?;
    check_scenario_text(path, text)
}

/// Checks `text` as the scenario file at `path` (an editor's unsaved buffer, say); its
/// protocol is read from disk, relative to `path`.
pub fn check_scenario_text(path: &Path, text: String) -> Result<CheckedScenarios, Vec<Diagnostic>> {
    let (source, value) = crate::pipeline::load::parse_document(
        DocumentKind::Scenario,
        &path.display().to_string(),
        text,
    )?;
    let file: ScenarioFile = serde_json::from_value(value).map_err(|error| {
        vec![
            Diagnostic::error(format!("the scenario file does not fit the model: {error}"))
                .at(source.location("", Part::Value)),
        ]
    })?;
    let machine = protocol_of(path, &file, &source)?;
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    for (index, scenario) in file.scenarios.iter().enumerate() {
        let at = format!("/scenarios/{index}");
        check_mocks(&machine, &source, &at, scenario.mocks.keys(), &mut errors);
        for (id, script) in &scenario.mocks {
            for (place, outcomes) in super::mocks::outcome_texts(script) {
                if let Err(error) = Mocks::parse(&[format!("{id}={outcomes}")]) {
                    let pointer = format!("{at}/mocks/{}{place}", escape(id));
                    errors.push(
                        Diagnostic::error(format!("mock `{id}`: {}", error.message))
                            .at(source.location(&pointer, Part::Value)),
                    );
                }
            }
        }
        check_inputs(&machine, &source, &at, scenario, &mut errors);
        if let Some(start) = &scenario.start {
            check_start(
                &machine,
                &source,
                &format!("{at}/start"),
                start,
                &mut errors,
            );
        }
        for (number, step) in scenario.steps.iter().enumerate() {
            let pointer = format!("{at}/steps/{number}");
            match step {
                // A send that expects its refusal (or whose next step does) is meant to be
                // refused.
                Step::Send(send)
                    if send.outcome == Some(SendOutcome::Refused)
                        || super::runner::expects_refusal(
                            scenario.steps.get(number + 1),
                            &send.send,
                        ) => {}
                // A send meant to be discarded need not be handled.
                Step::Send(send) => check_send(&machine, &source, &pointer, send, &mut errors)
                    .filter(|_| {
                        send.outcome != Some(SendOutcome::Discarded)
                            && !matches!(
                                scenario.steps.get(number + 1),
                                Some(Step::Expect(next))
                                    if next.expect.discarded.as_ref() == Some(&send.send)
                            )
                    })
                    .into_iter()
                    .for_each(|warning| warnings.push(warning)),
                Step::Expect(expect) => {
                    let expect = &expect.expect;
                    if let Some(states) = &expect.configuration {
                        let pointer = format!("{pointer}/expect/configuration");
                        check_states(&machine, &source, &pointer, states, &mut errors);
                    }
                    if let Some(state) = expect.finished.as_ref().and_then(|f| f.state.as_ref()) {
                        let pointer = format!("{pointer}/expect/finished/state");
                        check_state(&machine, &source, &pointer, state, &mut errors);
                    }
                    if let Some(effects) = &expect.effects {
                        let ids = effects.iter().map(|effect| &effect.id);
                        let pointer = format!("{pointer}/expect/effects");
                        check_effect_ids(&machine, &source, &pointer, ids, &mut errors);
                        for (index, effect) in effects.iter().enumerate() {
                            if let Some(pattern) = &effect.content {
                                let at = format!("{pointer}/{index}/content");
                                check_pattern(&source, &at, pattern, &mut errors);
                            }
                        }
                    }
                    for (path, pattern) in expect.files.iter().flatten() {
                        let at = format!("{pointer}/expect/files/{}", escape(path));
                        check_pattern(&source, &at, pattern, &mut errors);
                    }
                }
                Step::After(_) => {}
            }
        }
    }
    if errors.is_empty() {
        Ok(CheckedScenarios {
            file,
            machine,
            warnings,
        })
    } else {
        Err(errors)
    }
}

/// The protocol the file names, relative to the file, loaded and compiled; its own problems
/// come first, then where the scenario file names it.
fn protocol_of(
    path: &Path,
    file: &ScenarioFile,
    source: &Source,
) -> Result<Arc<Machine>, Vec<Diagnostic>> {
    let protocol_path: PathBuf = path.parent().unwrap_or(Path::new("")).join(&file.protocol);
    let named_here = source.location("/protocol", Part::Value);
    let loaded = match crate::pipeline::load::load_file(&protocol_path) {
        Ok(loaded) => loaded,
        Err(LoadError::NotFound { path }) => {
            return Err(vec![
                Diagnostic::error(format!("the protocol `{}` does not exist", file.protocol))
                    .at(named_here)
                    .with_help(format!(
                        "`protocol:` is relative to the scenario file: it names {path}"
                    )),
            ]);
        }
        Err(LoadError::Unreadable { path, error }) => {
            return Err(vec![
                Diagnostic::error(format!("cannot read the protocol {path}: {error}"))
                    .at(named_here),
            ]);
        }
        Err(LoadError::Invalid(mut diagnostics)) => {
            diagnostics.push(invalid_protocol(file, named_here));
            return Err(diagnostics);
        }
    };
    match crate::pipeline::compile::compile(&loaded) {
        Ok(machine) => Ok(Arc::new(machine)),
        Err(mut diagnostics) => {
            diagnostics.push(invalid_protocol(file, named_here));
            Err(diagnostics)
        }
    }
}

fn invalid_protocol(file: &ScenarioFile, at: crate::base::diagnostic::Location) -> Diagnostic {
    Diagnostic::error(format!("the protocol `{}` is not valid", file.protocol))
        .at(at)
        .with_help("fix the problems reported above in the protocol; its scenarios cannot run")
}

/// A start configuration names states of the protocol that together are a configuration it
/// can be in; its context names declared variables.
fn check_start(
    machine: &Machine,
    source: &Source,
    pointer: &str,
    start: &crate::base::model::scenario::Start,
    errors: &mut Vec<Diagnostic>,
) {
    let configuration = format!("{pointer}/configuration");
    let before = errors.len();
    check_states(
        machine,
        source,
        &configuration,
        &start.configuration,
        errors,
    );
    if errors.len() == before
        && let Err(problems) = super::start::closed_configuration(machine, &start.configuration)
    {
        for problem in problems {
            errors.push(
                Diagnostic::error(format!(
                    "not a configuration the protocol can be in: {problem}"
                ))
                .at(source.location(&configuration, Part::Value))
                .with_help(
                    "list the active atomic states: one per parallel region, their ancestors \
                         are active with them",
                ),
            );
        }
    }
    for name in super::start::unknown_variables(machine, start) {
        let known = machine
            .context
            .iter()
            .map(|(variable, _)| variable.as_str());
        errors.push(
            Diagnostic::error(format!(
                "protocol `{}` declares no context variable `{name}`",
                machine.id
            ))
            .at(source.location(&format!("{pointer}/context/{}", escape(name)), Part::Key))
            .with_help(
                did_you_mean(name, known)
                    .unwrap_or_else(|| "set only variables of the protocol's `context:`".into()),
            ),
        );
    }
}

fn check_states(
    machine: &Machine,
    source: &Source,
    pointer: &str,
    states: &[String],
    errors: &mut Vec<Diagnostic>,
) {
    for (index, state) in states.iter().enumerate() {
        check_state(
            machine,
            source,
            &format!("{pointer}/{index}"),
            state,
            errors,
        );
    }
}

fn check_state(
    machine: &Machine,
    source: &Source,
    pointer: &str,
    state: &str,
    errors: &mut Vec<Diagnostic>,
) {
    if machine.state_id(state).is_some() {
        return;
    }
    let known = machine.states.iter().skip(1).map(|state| &*state.id);
    errors.push(
        Diagnostic::error(format!("no state `{state}` in protocol `{}`", machine.id))
            .at(source.location(pointer, Part::Value))
            .with_help(did_you_mean(state, known).unwrap_or_else(|| {
                "name a state id of the protocol (`protocol-run graph` lists them)".to_string()
            })),
    );
}

/// Each mocked id must be an effect id of the protocol, or `ID[N]` for the N-th item of a
/// `map` over effect `ID`.
fn check_mocks<'a>(
    machine: &Machine,
    source: &Source,
    at: &str,
    ids: impl Iterator<Item = &'a String>,
    errors: &mut Vec<Diagnostic>,
) {
    for id in ids {
        // A map's child item is scripted like an effect (see `map_children`).
        if machine.is_child_map_item(id) {
            continue;
        }
        if let Some(problem) = unknown_effect(machine, id) {
            errors.push(
                problem.at(source.location(&format!("{at}/mocks/{}", escape(id)), Part::Key)),
            );
        }
    }
}

fn check_effect_ids<'a>(
    machine: &Machine,
    source: &Source,
    pointer: &str,
    ids: impl Iterator<Item = &'a String>,
    errors: &mut Vec<Diagnostic>,
) {
    for (index, id) in ids.enumerate() {
        if let Some(problem) = unknown_effect(machine, id) {
            errors.push(problem.at(source.location(&format!("{pointer}/{index}/id"), Part::Value)));
        }
    }
}

/// Why `id` names no effect of the protocol, if it does not.
fn unknown_effect(machine: &Machine, id: &str) -> Option<Diagnostic> {
    if machine.is_child_map_item(id) {
        return Some(Diagnostic::error(format!(
            "`{id}` is a map's child protocol, not an effect: `effects:` lists effects only"
        )));
    }
    let base = crate::effects::mock::map_of_item(id).unwrap_or(id);
    if machine.action_ids.iter().any(|known| known == base) {
        return None;
    }
    let known = machine.action_ids.iter().map(String::as_str);
    let help = did_you_mean(base, known).unwrap_or_else(|| {
        if machine.action_ids.is_empty() {
            "the protocol has no effectful action to mock".to_string()
        } else {
            format!("its effect ids are: {}", machine.action_ids.join(", "))
        }
    });
    Some(
        Diagnostic::error(format!(
            "`{id}` is not an effect id of protocol `{}`",
            machine.id
        ))
        .with_help(help),
    )
}

/// A sent event the protocol refuses is an error (with `events:` declared, the step would
/// fail); one no `on:` handles is a warning, `check`'s own for a protocol's `send`: it would be
/// delivered and change nothing.
fn check_send(
    machine: &Machine,
    source: &Source,
    pointer: &str,
    send: &crate::base::model::scenario::SendStep,
    errors: &mut Vec<Diagnostic>,
) -> Option<Diagnostic> {
    let name = send.send.as_str();
    let at = source.location(&format!("{pointer}/send"), Part::Value);
    if let Some(refusal) = crate::base::event::refuse_platform_event(name) {
        errors.push(
            Diagnostic::error(format!("the protocol refuses event `{name}`: {refusal}"))
                .at(at)
                .with_help(
                    "to test how the protocol handles an outcome, mock the effect (`mocks:`); \
                     to test the refusal, give the send `outcome: refused`",
                ),
        );
        return None;
    }
    let data = send.data.clone().unwrap_or(serde_json::Value::Null);
    if machine.declared_events.is_some()
        && let Err(refusal) = machine.admit_external(name, &data)
    {
        errors.push(
            Diagnostic::error(format!("the protocol refuses event `{name}`: {refusal}"))
                .at(at)
                .with_help(
                    "send an event the protocol's `events:` declares, with data that fits it; \
                     to test the refusal, give the send `outcome: refused`",
                ),
        );
        return None;
    }
    let handled = machine
        .transitions
        .iter()
        .flat_map(|transition| &transition.events)
        .any(|descriptor| descriptor.matches(name));
    if handled {
        return None;
    }
    let handled_names = machine
        .transitions
        .iter()
        .flat_map(|transition| &transition.events)
        .filter_map(|descriptor| match descriptor {
            EventDescriptor::Prefix(prefix) => Some(&**prefix),
            EventDescriptor::Any => None,
        });
    let (message, help) = crate::pipeline::compile::handled_events::unhandled_event(
        name,
        "send",
        Some(handled_names),
    );
    Some(Diagnostic::warning(message).at(at).with_help(help))
}

/// The scenario's inputs bind as a run's would: each known, of its type, every required one
/// given. Located at the input named, or at the scenario for a missing one.
fn check_inputs(
    machine: &Machine,
    source: &Source,
    at: &str,
    scenario: &crate::base::model::scenario::Scenario,
    errors: &mut Vec<Diagnostic>,
) {
    let supplied: Vec<(String, serde_json::Value)> = scenario
        .inputs
        .iter()
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    let Err(problems) = machine.bind_input_values(&supplied) else {
        return;
    };
    for problem in problems {
        let pointer = match &problem {
            crate::pipeline::compile::inputs::InputError::Unknown { name, .. } => {
                format!("{at}/inputs/{}", escape(name))
            }
            crate::pipeline::compile::inputs::InputError::Invalid { name, .. } => {
                format!("{at}/inputs/{}", escape(name))
            }
            _ => format!("{at}/name"),
        };
        let part = if pointer.ends_with("/name") {
            Part::Value
        } else {
            Part::Key
        };
        errors.push(
            Diagnostic::error(format!("inputs: {problem}"))
                .at(source.location(&pointer, part))
                .with_help(
                    "give the scenario's `inputs:` as the protocol's `inputs:` declares them",
                ),
        );
    }
}

/// A regular expression an expectation matches content with.
fn check_pattern(source: &Source, pointer: &str, pattern: &str, errors: &mut Vec<Diagnostic>) {
    if let Err(error) = regex::Regex::new(pattern) {
        // The regex crate's message draws the pattern; its last line says what is wrong.
        let message = error.to_string();
        let last_line = message.lines().last().unwrap_or_default().trim();
        let reason = last_line.trim_start_matches("error: ");
        errors.push(
            Diagnostic::error(format!("`{pattern}` is not a regular expression: {reason}"))
                .at(source.location(pointer, Part::Value))
                .with_help(
                    "write a Rust `regex` pattern; escape `\\`, `(`, `[`, `{`, `.` to match them",
                ),
        );
    }
}

/// A mock id as one JSON pointer segment (`~` and `/` escaped).
fn escape(id: &str) -> String {
    id.replace('~', "~0").replace('/', "~1")
}
