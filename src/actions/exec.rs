//! `exec`: resolves a process request from templates (pure); the driver runs it and reports the
//! outcome as `done.exec.<id>`, `error.exec.<id>` or `error.exec.timeout.<id>`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::compile::Compiler;
use crate::compile::expression::{EvaluationError, Template};
use crate::compile::machine::{Delay, EventType};
use crate::effects::process::ProcessRequest;
use crate::effects::{EffectKind, EffectRequest, OutcomeEvents};
use crate::model::action::{ExecAction, ExecCommand};

use super::Execution;

#[derive(Debug)]
pub struct Exec {
    id: Arc<str>,
    argv: Vec<Template>,
    shell: bool,
    cwd: Option<Template>,
    env: Vec<(String, Template)>,
    stdin: Option<Template>,
    timeout: Option<Delay>,
    events: OutcomeEvents,
}

/// Interns the three outcome event names of an effect with this id.
pub fn outcome_events(compiler: &mut Compiler, kind: &str, id: &str) -> OutcomeEvents {
    OutcomeEvents {
        done: compiler.intern_event(&format!("done.{kind}.{id}")),
        failed: compiler.intern_event(&format!("error.{kind}.{id}")),
        timed_out: compiler.intern_event(&format!("error.{kind}.timeout.{id}")),
    }
}

impl Exec {
    pub fn compile(action: &ExecAction, compiler: &mut Compiler, pointer: &str) -> Option<Exec> {
        let id_pointer = format!("{pointer}/id");
        compiler.check_action_id(&action.id, &id_pointer);
        let argv: Vec<Option<Template>> = match (&action.exec, action.shell) {
            (ExecCommand::Arguments(arguments), false) => {
                if arguments.is_empty() {
                    compiler.value_error(
                        &format!("{pointer}/exec"),
                        "`exec` needs at least the program".into(),
                        Some("write e.g. `exec: [ls, -l]`".into()),
                    );
                }
                arguments
                    .iter()
                    .enumerate()
                    .map(|(index, argument)| {
                        compiler.template(argument, &format!("{pointer}/exec/{index}"))
                    })
                    .collect()
            }
            (ExecCommand::Line(line), true) => {
                vec![compiler.template(line, &format!("{pointer}/exec"))]
            }
            (ExecCommand::Line(_), false) => {
                compiler.value_error(
                    &format!("{pointer}/exec"),
                    "a command line needs `shell: true`".into(),
                    Some("write the program and arguments as a list, e.g. `exec: [grep, -n, x, file]`, or add `shell: true`".into()),
                );
                return None;
            }
            (ExecCommand::Arguments(_), true) => {
                compiler.value_error(
                    &format!("{pointer}/exec"),
                    "with `shell: true`, `exec` is one command string".into(),
                    Some("write e.g. `exec: \"ls | wc -l\"`".into()),
                );
                return None;
            }
        };
        let cwd = action
            .cwd
            .as_ref()
            .map(|cwd| compiler.template(cwd, &format!("{pointer}/cwd")));
        let env: Vec<(String, Option<Template>)> = action
            .env
            .iter()
            .map(|(name, value)| {
                let value_pointer = format!(
                    "{pointer}/env/{}",
                    crate::load::yaml::escape_pointer_token(name)
                );
                (name.clone(), compiler.template(value, &value_pointer))
            })
            .collect();
        let stdin = action
            .stdin
            .as_ref()
            .map(|stdin| compiler.template(stdin, &format!("{pointer}/stdin")));
        let timeout = action
            .timeout
            .as_ref()
            .map(|timeout| compiler.delay(timeout, &format!("{pointer}/timeout")));
        let events = outcome_events(compiler, "exec", &action.id);
        Some(Exec {
            id: Arc::from(action.id.as_str()),
            argv: argv.into_iter().collect::<Option<_>>()?,
            shell: action.shell,
            cwd: cwd.map_or(Some(None), |cwd| cwd.map(Some))?,
            env: env
                .into_iter()
                .map(|(name, value)| value.map(|value| (name, value)))
                .collect::<Option<_>>()?,
            stdin: stdin.map_or(Some(None), |stdin| stdin.map(Some))?,
            timeout: timeout.map_or(Some(None), |timeout| timeout.map(Some))?,
            events,
        })
    }

    /// Pure: the process to run, with every template rendered.
    pub fn resolve(&self, execution: &Execution) -> Result<EffectRequest, EvaluationError> {
        execution.with_scope(|scope| {
            let rendered: Vec<String> = self
                .argv
                .iter()
                .map(|argument| argument.render(scope))
                .collect::<Result<_, _>>()?;
            let argv = if self.shell {
                vec!["sh".to_string(), "-c".to_string(), rendered.concat()]
            } else {
                rendered
            };
            let mut process = ProcessRequest::new(argv);
            process.cwd = match &self.cwd {
                Some(cwd) => Some(PathBuf::from(cwd.render(scope)?)),
                None => execution.machine.base_directory.clone(),
            };
            process.env = self
                .env
                .iter()
                .map(|(name, value)| Ok((name.clone(), value.render(scope)?)))
                .collect::<Result<_, EvaluationError>>()?;
            process.stdin = self
                .stdin
                .as_ref()
                .map(|stdin| stdin.render(scope))
                .transpose()?;
            process.timeout = self
                .timeout
                .as_ref()
                .map(|timeout| timeout.evaluate(scope).map(Duration::from_millis))
                .transpose()?;
            Ok(EffectRequest {
                id: self.id.clone(),
                kind: EffectKind::Process(process),
                events: self.events,
            })
        })
    }

    pub fn execute(&self, execution: &mut Execution) -> Result<(), EvaluationError> {
        let request = self.resolve(execution)?;
        execution.host.start_effect(request);
        Ok(())
    }
}

/// The event type of an outcome, for effects and their tests.
pub fn outcome_event_type(events: &OutcomeEvents, succeeded: bool, timed_out: bool) -> EventType {
    match (succeeded, timed_out) {
        (_, true) => events.timed_out,
        (true, false) => events.done,
        (false, false) => events.failed,
    }
}
