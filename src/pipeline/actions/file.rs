//! `write`, `backup`, `restore`: file effects resolved here (pure) and run by the driver, with
//! atomic replacement, JSON-lines appends and JSON read-modify-write.

use std::path::PathBuf;

use super::Execution;
use super::effect::EffectPolicy;
use crate::base::model::effect::{BackupAction, RestoreAction, WriteAction};
use crate::effects::files::FileRequest;
use crate::effects::{EffectKind, EffectRequest};
use crate::pipeline::actions::ActionCompiler;
use crate::pipeline::compile::expression::{EvaluationError, Template, ValueTemplate};

#[derive(Debug)]
pub struct File {
    policy: EffectPolicy,
    operation: Operation,
}

#[derive(Debug)]
enum Operation {
    Write {
        path: Template,
        content: Template,
    },
    WriteJson {
        path: Template,
        document: ValueTemplate,
    },
    Append {
        path: Template,
        line: ValueTemplate,
    },
    AppendToJsonArray {
        path: Template,
        array: String,
        item: ValueTemplate,
    },
    Backup {
        path: Template,
        backup: Template,
    },
    Restore {
        path: Template,
        backup: Template,
    },
}

impl File {
    /// Its shared options: id, timeout, retries.
    pub fn policy(&self) -> &EffectPolicy {
        &self.policy
    }

    /// The action's key and id (`write report`), for diagrams.
    pub fn kind_and_id(&self) -> (&'static str, &str) {
        let kind = match self.operation {
            Operation::Backup { .. } => "backup",
            Operation::Restore { .. } => "restore",
            _ => "write",
        };
        (kind, &self.policy.id)
    }

    pub fn write(
        action: &WriteAction,
        compiler: &mut dyn ActionCompiler,
        pointer: &str,
    ) -> Option<File> {
        let policy = EffectPolicy::compile(&action.options, compiler, pointer);
        let path = compiler.template(&action.write, &format!("{pointer}/write"));
        let given = [
            action.content.is_some(),
            action.json.is_some(),
            action.append.is_some(),
            action.json_append.is_some(),
        ];
        if given.iter().filter(|given| **given).count() != 1 {
            compiler.key_error(
                &format!("{pointer}/write"),
                "a `write` needs exactly one of `content`, `json`, `append` and `json_append`".into(),
                Some("`content` replaces the file with text, `json` with a JSON document, `append` adds a line, `json_append` adds to a JSON array".into()),
            );
            return None;
        }
        let operation = if let Some(content) = &action.content {
            Operation::Write {
                path: path?,
                content: compiler.template(content, &format!("{pointer}/content"))?,
            }
        } else if let Some(document) = &action.json {
            Operation::WriteJson {
                path: path?,
                document: compiler.value_template(document, &format!("{pointer}/json"))?,
            }
        } else if let Some(line) = &action.append {
            Operation::Append {
                path: path?,
                line: compiler.value_template(line, &format!("{pointer}/append"))?,
            }
        } else {
            let json_append = action.json_append.as_ref()?;
            if !(json_append.array.is_empty() || json_append.array.starts_with('/')) {
                compiler.value_error(
                    &format!("{pointer}/json_append/array"),
                    format!("`{}` is not a JSON pointer", json_append.array),
                    Some("write it like `/failure_escalations`".into()),
                );
                return None;
            }
            Operation::AppendToJsonArray {
                path: path?,
                array: json_append.array.clone(),
                item: compiler
                    .value_template(&json_append.item, &format!("{pointer}/json_append/item"))?,
            }
        };
        Some(File {
            policy: policy?,
            operation,
        })
    }

    pub fn backup(
        action: &BackupAction,
        compiler: &mut dyn ActionCompiler,
        pointer: &str,
    ) -> Option<File> {
        let policy = EffectPolicy::compile(&action.options, compiler, pointer);
        let path = compiler.template(&action.backup, &format!("{pointer}/backup"));
        let backup = compiler.template(&action.to, &format!("{pointer}/to"));
        Some(File {
            policy: policy?,
            operation: Operation::Backup {
                path: path?,
                backup: backup?,
            },
        })
    }

    pub fn restore(
        action: &RestoreAction,
        compiler: &mut dyn ActionCompiler,
        pointer: &str,
    ) -> Option<File> {
        let policy = EffectPolicy::compile(&action.options, compiler, pointer);
        let path = compiler.template(&action.restore, &format!("{pointer}/restore"));
        let backup = compiler.template(&action.from, &format!("{pointer}/from"));
        Some(File {
            policy: policy?,
            operation: Operation::Restore {
                path: path?,
                backup: backup?,
            },
        })
    }

    /// Pure: the file operation with every template rendered.
    pub fn resolve(&self, execution: &Execution) -> Result<EffectRequest, EvaluationError> {
        execution.with_scope(|scope| {
            // Relative paths are relative to the working directory, as for a shell command.
            let path = |template: &Template| -> Result<PathBuf, EvaluationError> {
                Ok(PathBuf::from(template.render(scope)?))
            };
            let request = match &self.operation {
                Operation::Write {
                    path: file,
                    content,
                } => FileRequest::Write {
                    path: path(file)?,
                    content: content.render(scope)?,
                },
                Operation::WriteJson {
                    path: file,
                    document,
                } => FileRequest::Write {
                    path: path(file)?,
                    content: pretty_json(&document.render(scope)?.to_json()),
                },
                Operation::Append { path: file, line } => FileRequest::Append {
                    path: path(file)?,
                    line: match line.render(scope)? {
                        crate::base::value::Value::String(text) => text.to_string(),
                        other => other.to_json().to_string(),
                    },
                },
                Operation::AppendToJsonArray {
                    path: file,
                    array,
                    item,
                } => FileRequest::AppendToJsonArray {
                    path: path(file)?,
                    array: array.clone(),
                    item: item.render(scope)?.to_json(),
                },
                Operation::Backup { path: file, backup } => FileRequest::Backup {
                    path: path(file)?,
                    backup: path(backup)?,
                },
                Operation::Restore { path: file, backup } => FileRequest::Restore {
                    path: path(file)?,
                    backup: path(backup)?,
                },
            };
            self.policy
                .request(EffectKind::File(request), scope, Vec::new())
        })
    }

    pub fn execute(&self, execution: &mut Execution) -> Result<(), EvaluationError> {
        let request = self.resolve(execution)?;
        super::effect::start(execution, request);
        Ok(())
    }
}

/// Two-space indented JSON ending in a newline, as people write it by hand.
fn pretty_json(document: &serde_json::Value) -> String {
    let mut text = serde_json::to_string_pretty(document).unwrap_or_else(|_| document.to_string());
    text.push('\n');
    text
}
