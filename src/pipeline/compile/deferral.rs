//! `defer:`: the external events a state (or the whole protocol) lets wait in the run's inbox while no transition takes them.

use super::Compiler;
use crate::base::diagnostic::did_you_mean;
use crate::pipeline::compile::machine::EventDescriptor;

/// Compiles one `defer:` list at `pointer`, reporting each descriptor that names an engine
/// event, is not an event name, or (with `events:` declared) matches no declared event.
pub fn compile(compiler: &mut Compiler, texts: &[String], pointer: &str) -> Vec<EventDescriptor> {
    let mut descriptors = Vec::with_capacity(texts.len());
    for (position, text) in texts.iter().enumerate() {
        let item_pointer = format!("{pointer}/{position}");
        let descriptor = EventDescriptor::parse(text.trim());
        if let EventDescriptor::Prefix(prefix) = &descriptor {
            compiler.check_event_name(prefix, &item_pointer);
            if let Some(engine) = engine_family(prefix) {
                compiler.value_error(
                    &item_pointer,
                    format!(
                        "`{text}` names engine events (`{engine}.*`), which cannot be deferred: \
                         the engine reports them once, when they happen"
                    ),
                    Some(
                        "defer only external events; to handle an outcome later, record it with \
                         `assign` and act on it when the state that wants it is entered"
                            .into(),
                    ),
                );
                continue;
            }
            if let Some(declared) = compiler.declared_event_names()
                && !declared.iter().any(|name| descriptor.matches(name))
            {
                let help = did_you_mean(prefix, declared.iter().map(String::as_str))
                    .unwrap_or_else(|| format!("the declared events are: {}", declared.join(", ")));
                compiler.value_error(
                    &item_pointer,
                    format!("`{text}` matches no event declared under `events:`"),
                    Some(help),
                );
                continue;
            }
        }
        descriptors.push(descriptor);
    }
    descriptors
}

/// The engine's event family `prefix` falls in (`done`, `error`, `timeout`, `after`), if it
/// does: `done.exec` does, as does `done` itself.
fn engine_family(prefix: &str) -> Option<&'static str> {
    let first = prefix.split('.').next().unwrap_or(prefix);
    crate::base::event::PLATFORM_EVENT_PREFIXES
        .into_iter()
        .find(|family| *family == first)
}
