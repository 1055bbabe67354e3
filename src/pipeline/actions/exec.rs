//! `exec`: resolves a process request from templates (pure); the driver runs it under the
//! action's retry plan and reports `done.exec.<id>`, `error.exec.<id>` or `error.exec.timeout.<id>`.

use std::path::PathBuf;

use super::Execution;
use super::effect::{CompiledMarkers, EffectPolicy};
use crate::base::model::effect::{ExecAction, ExecCommand};
use crate::base::value::Value;
use crate::effects::EffectKind;
use crate::effects::process::ProcessRequest;
use crate::pipeline::actions::ActionCompiler;
use crate::pipeline::compile::expression::{EvaluationError, Expression, Scope, Template};

#[derive(Debug)]
pub struct Exec {
    policy: EffectPolicy,
    argv: Argv,
    cwd: Option<Template>,
    env: Vec<(String, Template)>,
    stdin: Option<Template>,
    incomplete_markers: CompiledMarkers,
}

/// How the program and its arguments are given.
#[derive(Debug)]
enum Argv {
    /// One template per argument.
    Listed(Vec<Template>),
    /// One expression giving the whole list, each element one argument.
    Computed(Expression),
    /// A command line for `sh -c`, only with `shell: true`.
    Shell(Template),
}

impl Argv {
    fn render(&self, scope: &Scope) -> Result<Vec<String>, EvaluationError> {
        match self {
            Argv::Listed(arguments) => arguments
                .iter()
                .map(|argument| argument.render(scope))
                .collect(),
            Argv::Shell(line) => Ok(vec!["sh".into(), "-c".into(), line.render(scope)?]),
            Argv::Computed(expression) => {
                let failure = |message: String| EvaluationError {
                    expression: expression.text.clone(),
                    message,
                };
                let Value::List(items) = expression.evaluate(scope)? else {
                    return Err(failure(
                        "`exec` needs a list: the program and its arguments".into(),
                    ));
                };
                if items.is_empty() {
                    return Err(failure(
                        "`exec` got an empty list: the program is missing".into(),
                    ));
                }
                items
                    .iter()
                    .map(|item| match item {
                        Value::String(text) => Ok(text.to_string()),
                        Value::Int(_) | Value::UInt(_) | Value::Float(_) | Value::Bool(_) => {
                            Ok(item.to_json().to_string())
                        }
                        other => Err(failure(format!(
                            "each argument must be a string or a number, not {}",
                            other.type_name()
                        ))),
                    })
                    .collect()
            }
        }
    }
}

impl Exec {
    /// The action's id, for diagrams.
    pub fn id(&self) -> &str {
        &self.policy.id
    }

    /// Its shared options: id, timeout, retries.
    pub fn policy(&self) -> &EffectPolicy {
        &self.policy
    }

    /// The program it runs as written, for diagrams: the first argument, the expression that
    /// computes the list, or `sh -c` for a shell line.
    pub fn program(&self) -> String {
        match &self.argv {
            Argv::Listed(arguments) => arguments
                .first()
                .map(Template::source_text)
                .unwrap_or_default(),
            Argv::Computed(expression) => format!("${{{}}}", expression.text),
            Argv::Shell(_) => "sh -c".to_string(),
        }
    }

    pub fn compile(
        action: &ExecAction,
        compiler: &mut dyn ActionCompiler,
        pointer: &str,
    ) -> Option<Exec> {
        let policy = EffectPolicy::compile(&action.options, compiler, pointer);
        let command_pointer = format!("{pointer}/exec");
        let argv = match (&action.exec, action.shell) {
            (ExecCommand::Arguments(arguments), false) => {
                if arguments.is_empty() {
                    compiler.value_error(
                        &command_pointer,
                        "`exec` needs at least the program".into(),
                        Some("write e.g. `exec: [ls, -l]`".into()),
                    );
                }
                let templates: Vec<Option<Template>> = arguments
                    .iter()
                    .enumerate()
                    .map(|(index, argument)| {
                        compiler.template(argument, &format!("{command_pointer}/{index}"))
                    })
                    .collect();
                templates
                    .into_iter()
                    .collect::<Option<_>>()
                    .map(Argv::Listed)
            }
            (ExecCommand::Line(line), true) => {
                compiler.template(line, &command_pointer).map(Argv::Shell)
            }
            (ExecCommand::Line(line), false) => {
                // `exec: "${command}"`: a list computed at run time, still one argument per
                // element and no shell.
                let template = compiler.template(line, &command_pointer)?;
                match template.single_expression() {
                    Ok(expression) => Some(Argv::Computed(expression)),
                    Err(_) => {
                        compiler.value_error(
                            &command_pointer,
                            "a command line needs `shell: true`".into(),
                            Some("write the program and its arguments as a list, e.g. `exec: [grep, -n, x, file]`, give a list expression as `exec: \"${command}\"`, or add `shell: true`".into()),
                        );
                        return None;
                    }
                }
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
                    crate::pipeline::load::yaml::escape_pointer_token(name)
                );
                // Setting a process's environment is a capability of its own.
                if let Err(message) = compiler.capabilities().may_set_variable(name) {
                    compiler.key_error(
                        &value_pointer,
                        message,
                        Some(format!(
                            "list `{name}` in `permissions.env` if the protocol needs it \
                             (`validate` shows such grants as dangerous), or drop it"
                        )),
                    );
                    return (name.clone(), None);
                }
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
            argv: argv?,
            cwd: crate::pipeline::compile::optional(cwd)?,
            env: env
                .into_iter()
                .map(|(name, value)| value.map(|value| (name, value)))
                .collect::<Option<_>>()?,
            stdin: crate::pipeline::compile::optional(stdin)?,
            incomplete_markers: incomplete_markers?,
        })
    }

    /// Pure: the process to run, with every template rendered.
    pub fn resolve(
        &self,
        execution: &Execution,
    ) -> Result<crate::effects::EffectRequest, EvaluationError> {
        execution.with_scope(|scope| {
            let argv = self.argv.render(scope)?;
            let mut process = ProcessRequest::new(argv);
            process.shell = matches!(self.argv, Argv::Shell(_));
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
        super::effect::start(execution, request);
        Ok(())
    }
}
