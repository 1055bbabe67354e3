//! The arguments an effect started with, as a scenario names them: `argv`, `path`, `content`.

use super::files::FileRequest;
use super::tools::ToolRequest;
use super::{EffectKind, EffectRequest};

/// What a scenario's `expect: effects:` and a mock's `when:` can match an effect on.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EffectArguments {
    /// The program and its arguments (`exec`).
    pub argv: Option<Vec<String>>,
    /// The file or directory acted on (file actions and tools), as the protocol resolved it.
    pub path: Option<String>,
    /// What a file action writes: the content, the line appended, or the JSON item appended.
    pub content: Option<String>,
}

impl EffectArguments {
    pub fn of(request: &EffectRequest) -> EffectArguments {
        let shown = |path: &std::path::Path| Some(path.display().to_string());
        match &request.kind {
            EffectKind::Process(process) => EffectArguments {
                argv: Some(process.argv.clone()),
                ..EffectArguments::default()
            },
            EffectKind::Tool(call) => match &call.tool {
                ToolRequest::ReadFile { path }
                | ToolRequest::ListDir { path }
                | ToolRequest::GrepSearch { path, .. } => EffectArguments {
                    path: shown(path),
                    ..EffectArguments::default()
                },
            },
            EffectKind::File(file) => EffectArguments {
                argv: None,
                path: shown(file.path()),
                content: match file {
                    FileRequest::Write { content, .. } => Some(content.clone()),
                    FileRequest::Append { line, .. } => Some(line.clone()),
                    FileRequest::AppendToJsonArray { item, .. } => Some(item.to_string()),
                    FileRequest::Backup { .. } | FileRequest::Restore { .. } => None,
                },
            },
        }
    }
}
