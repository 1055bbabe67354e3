//! `exec`: resolves a process request from templates (pure); the driver runs it under the
//! action's retry plan and reports `done.exec.<id>`, `error.exec.<id>` or `error.exec.timeout.<id>`.

use std::path::PathBuf;

use super::Execution;
use super::effect::{CompiledMarkers, EffectPolicy};
use crate::compile::Compiler;
use crate::compile::expression::{EvaluationError, Template};
use crate::effects::EffectKind;
use crate::effects::process::ProcessRequest;
use crate::model::effect::{ExecAction, ExecCommand};

#[derive(Debug)]
pub struct Exec {
    policy: EffectPolicy,
    argv: Vec<Template>,
    shell: bool,
    cwd: Option<Template>,
    env: Vec<(String, Template)>,
    stdin: Option<Template>,
    incomplete_markers: CompiledMarkers,
}

impl Exec {
    pub fn compile(action: &ExecAction, compiler: &mut Compiler, pointer: &str) -> Option<Exec> {
        let policy = EffectPolicy::compile(&action.options, compiler, pointer);
        let command_pointer = format!("{pointer}/exec");
        let argv: Vec<Option<Template>> = match (&action.exec, action.shell) {
            (ExecCommand::Arguments(arguments), false) => {
                if arguments.is_empty() {
                    compiler.value_error(
                        &command_pointer,
                        "`exec` needs at least the program".into(),
                        Some("write e.g. `exec: [ls, -l]`".into()),
                    );
                }
                arguments
                    .iter()
                    .enumerate()
                    .map(|(index, argument)| {
                        compiler.template(argument, &format!("{command_pointer}/{index}"))
                    })
                    .collect()
            }
            (ExecCommand::Line(line), true) => vec![compiler.template(line, &command_pointer)],
            (ExecCommand::Line(_), false) => {
                compiler.value_error(
                    &command_pointer,
                    "a command line needs `shell: true`".into(),
                    Some("write the program and its arguments as a list, e.g. `exec: [grep, -n, x, file]`, or add `shell: true`".into()),
                );
                return None;
            }
            (ExecCommand::Arguments(_), true) => {
                compiler.value_error(
                    &command_pointer,
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
        let incomplete_markers = CompiledMarkers::compile(
            action.incomplete_markers.as_ref(),
            compiler,
            &format!("{pointer}/incomplete_markers"),
        );
        Some(Exec {
            policy: policy?,
            argv: argv.into_iter().collect::<Option<_>>()?,
            shell: action.shell,
            cwd: crate::compile::optional(cwd)?,
            env: env
                .into_iter()
                .map(|(name, value)| value.map(|value| (name, value)))
                .collect::<Option<_>>()?,
            stdin: crate::compile::optional(stdin)?,
            incomplete_markers: incomplete_markers?,
        })
    }

    /// Pure: the process to run, with every template rendered.
    pub fn resolve(
        &self,
        execution: &Execution,
    ) -> Result<crate::effects::EffectRequest, EvaluationError> {
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
            process.cwd = self
                .cwd
                .as_ref()
                .map(|cwd| cwd.render(scope).map(PathBuf::from))
                .transpose()?;
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
            self.policy.request(
                EffectKind::Process(process),
                scope,
                self.incomplete_markers.evaluate(scope)?,
            )
        })
    }

    pub fn execute(&self, execution: &mut Execution) -> Result<(), EvaluationError> {
        let request = self.resolve(execution)?;
        execution.host.start_effect(request);
        Ok(())
    }
}
