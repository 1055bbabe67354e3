//! `read_file`, `list_dir`, `grep_search`: the built-in tools, resolved here (pure) and run by the
//! driver with the same outcome events, timeouts and retries as `exec`.

use super::Execution;
use super::effect::EffectPolicy;
use crate::base::model::effect::{GrepSearchAction, ListDirAction, ReadFileAction};
use crate::effects::process::DEFAULT_OUTPUT_LIMIT;
use crate::effects::tools::{ToolCall, ToolRequest};
use crate::effects::{EffectKind, EffectRequest};
use crate::pipeline::actions::ActionCompiler;
use crate::pipeline::compile::expression::{EvaluationError, Template};

/// Matches reported by `grep_search` when the action sets no `limit`.
const DEFAULT_MATCH_LIMIT: usize = 100;

#[derive(Debug)]
pub struct Tool {
    policy: EffectPolicy,
    operation: Operation,
}

#[derive(Debug)]
enum Operation {
    ReadFile {
        path: Template,
    },
    ListDir {
        path: Template,
    },
    GrepSearch {
        pattern: Template,
        path: Template,
        limit: usize,
    },
}

impl Tool {
    /// Its shared options: id, timeout, retries.
    pub fn policy(&self) -> &EffectPolicy {
        &self.policy
    }

    /// The action's key and id (`read_file check`), for diagrams.
    pub fn kind_and_id(&self) -> (&'static str, &str) {
        let kind = match self.operation {
            Operation::ReadFile { .. } => "read_file",
            Operation::ListDir { .. } => "list_dir",
            Operation::GrepSearch { .. } => "grep_search",
        };
        (kind, &self.policy.id)
    }

    pub fn read_file(
        action: &ReadFileAction,
        compiler: &mut dyn ActionCompiler,
        pointer: &str,
    ) -> Option<Tool> {
        let policy = EffectPolicy::compile(&action.options, compiler, pointer);
        let path = compiler.template(&action.read_file, &format!("{pointer}/read_file"));
        Some(Tool {
            policy: policy?,
            operation: Operation::ReadFile { path: path? },
        })
    }

    pub fn list_dir(
        action: &ListDirAction,
        compiler: &mut dyn ActionCompiler,
        pointer: &str,
    ) -> Option<Tool> {
        let policy = EffectPolicy::compile(&action.options, compiler, pointer);
        let path = compiler.template(&action.list_dir, &format!("{pointer}/list_dir"));
        Some(Tool {
            policy: policy?,
            operation: Operation::ListDir { path: path? },
        })
    }

    pub fn grep_search(
        action: &GrepSearchAction,
        compiler: &mut dyn ActionCompiler,
        pointer: &str,
    ) -> Option<Tool> {
        let policy = EffectPolicy::compile(&action.options, compiler, pointer);
        let pattern = compiler.template(&action.grep_search, &format!("{pointer}/grep_search"));
        let path = compiler.template(&action.path, &format!("{pointer}/path"));
        let limit = action.limit.map_or(DEFAULT_MATCH_LIMIT, |limit| {
            usize::try_from(limit).unwrap_or(usize::MAX)
        });
        Some(Tool {
            policy: policy?,
            operation: Operation::GrepSearch {
                pattern: pattern?,
                path: path?,
                limit,
            },
        })
    }

    /// Pure: the tool call with its paths rendered (relative paths are relative to the working
    /// directory, as for a shell command).
    pub fn resolve(&self, execution: &Execution) -> Result<EffectRequest, EvaluationError> {
        execution.with_scope(|scope| {
            let path = |template: &Template| -> Result<std::path::PathBuf, EvaluationError> {
                Ok(std::path::PathBuf::from(template.render(scope)?))
            };
            let tool = match &self.operation {
                Operation::ReadFile { path: file } => ToolRequest::ReadFile { path: path(file)? },
                Operation::ListDir { path: directory } => ToolRequest::ListDir {
                    path: path(directory)?,
                },
                Operation::GrepSearch {
                    pattern,
                    path: target,
                    limit,
                } => ToolRequest::GrepSearch {
                    pattern: pattern.render(scope)?,
                    path: path(target)?,
                    limit: *limit,
                },
            };
            let call = ToolCall {
                tool,
                timeout: None,
                output_limit: DEFAULT_OUTPUT_LIMIT,
            };
            self.policy
                .request(EffectKind::Tool(call), scope, Vec::new())
        })
    }

    pub fn execute(&self, execution: &mut Execution) -> Result<(), EvaluationError> {
        let request = self.resolve(execution)?;
        super::effect::start(execution, request);
        Ok(())
    }
}
