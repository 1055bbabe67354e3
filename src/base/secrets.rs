//! Secrets masked by value: secret inputs and `env()` reads become `***NAME***` in all the engine writes or stores.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{OnceLock, PoisonError, RwLock};

use regex::Regex;

/// Values shorter than this are not masked: a one-letter secret would blank every such letter
/// of every line, and values this short (`1`, `yes`) are flags, not secrets. A secret input
/// shorter than this is refused (see `compile::inputs`).
pub const MIN_SECRET_CHARACTERS: usize = 4;

/// The label a secret input's placeholder carries: its name.
pub fn input_label(name: &str) -> String {
    name.to_string()
}

/// The label of a value read with `env(NAME)`: `env.NAME`, so it never collides with an input.
pub fn environment_label(name: &str) -> String {
    format!("env.{name}")
}

/// What stands in for a secret's value: `***LABEL***`.
pub fn placeholder(label: &str) -> String {
    format!("***{label}***")
}

struct Secret {
    label: String,
    value: String,
}

/// One spelling of a secret's value the engine may write: the value itself, or the value as an
/// escaping the engine applies turned it (`ENCODINGS`, up to two in a row).
struct Variant {
    text: String,
    label: String,
    /// The escapings applied, in order, joined by `-`; empty for the value itself.
    encoding: String,
}

/// The escapings the engine applies to text it writes: JSON string escaping (a list rendered
/// in a template, every JSON line and stored value), Rust `Debug` escaping (expression error
/// messages, the human log's string fields) and the human log's control-character escaping.
/// A secret's value changes under them when it holds `"`, `\`, a newline, a tab or another
/// control character, and the exact value no longer matches.
const ENCODINGS: [&str; 3] = ["json", "debug", "controls"];

/// `text` under one escaping of `ENCODINGS`, without the quotes JSON and `Debug` put around it.
fn escape(encoding: &str, text: &str) -> Option<String> {
    let quoted = match encoding {
        "json" => serde_json::to_string(text).ok()?,
        "debug" => format!("{text:?}"),
        "controls" => return Some(crate::base::text::escape_controls(text).into_owned()),
        _ => return None,
    };
    Some(quoted[1..quoted.len() - 1].to_string())
}

/// `value` under the escapings named in `encoding` (`json-debug`: JSON, then `Debug`).
fn encode(value: &str, encoding: &str) -> Option<String> {
    let mut text = value.to_string();
    for step in encoding.split('-').filter(|step| !step.is_empty()) {
        text = escape(step, &text)?;
    }
    Some(text)
}

/// Every distinct spelling of `value` under no, one or two escapings, as `(encoding, text)`:
/// an escaped secret escaped once more (a JSON line holding an error message) is still found.
fn spellings(value: &str) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = vec![(String::new(), value.to_string())];
    for first in ENCODINGS {
        for second in std::iter::once("").chain(ENCODINGS) {
            let encoding = if second.is_empty() {
                first.to_string()
            } else {
                format!("{first}-{second}")
            };
            if let Some(text) = encode(value, &encoding)
                && !found.iter().any(|(_, known)| *known == text)
            {
                found.push((encoding, text));
            }
        }
    }
    found
}

/// A placeholder's label split into the secret's label and the escapings its value went
/// through (`token~json`), as a stored value records them (`mask_for_store`).
fn split_label(label: &str) -> (&str, &str) {
    label.split_once('~').unwrap_or((label, ""))
}

/// Every secret this process has seen. Process-wide on purpose: a `serve` host's instances
/// share stdout and the store, and masking one instance's secret in another's output is safe.
#[derive(Default)]
struct Registry {
    /// The values, as registered.
    secrets: Vec<Secret>,
    /// Every spelling of every value, longest first, so a secret containing another is
    /// replaced whole.
    variants: Vec<Variant>,
    /// Labels that are placeholders of this process's secrets even before their value is known
    /// (a declared secret input not supplied): a text spelling one cannot be stored unambiguously.
    reserved: HashSet<String>,
    /// The values as one alternation, rebuilt when a secret is added.
    matcher: Option<Regex>,
}

/// Set once the first secret is registered: until then every mask is a no-op costing one load.
static ACTIVE: AtomicBool = AtomicBool::new(false);

fn registry() -> &'static RwLock<Registry> {
    static REGISTRY: OnceLock<RwLock<Registry>> = OnceLock::new();
    REGISTRY.get_or_init(RwLock::default)
}

/// Whether any secret is known; callers skip masking work when not.
pub fn active() -> bool {
    ACTIVE.load(Ordering::Acquire)
}

/// Records a secret input's value (and its label, even when `value` is `None`: not supplied).
pub fn register_input(name: &str, value: Option<&str>) {
    register(input_label(name), value);
}

/// Records a value read with `env(NAME)`.
pub fn register_environment(name: &str, value: &str) {
    register(environment_label(name), Some(value));
}

fn register(label: String, value: Option<&str>) {
    let value = value.filter(|value| value.chars().count() >= MIN_SECRET_CHARACTERS);
    {
        let known = registry().read().unwrap_or_else(PoisonError::into_inner);
        let seen = known.reserved.contains(&label)
            && value.is_none_or(|value| {
                known
                    .secrets
                    .iter()
                    .any(|secret| secret.label == label && secret.value == value)
            });
        if seen {
            return;
        }
    }
    let mut registry = registry().write().unwrap_or_else(PoisonError::into_inner);
    registry.reserved.insert(label.clone());
    if let Some(value) = value
        && !registry.secrets.iter().any(|secret| secret.value == value)
    {
        for (encoding, text) in spellings(value) {
            if !registry.variants.iter().any(|variant| variant.text == text) {
                registry.variants.push(Variant {
                    text,
                    label: label.clone(),
                    encoding,
                });
            }
        }
        registry.secrets.push(Secret {
            label,
            value: value.to_string(),
        });
        registry
            .variants
            .sort_by_key(|variant| std::cmp::Reverse(variant.text.len()));
        let alternation: Vec<String> = registry
            .variants
            .iter()
            .map(|variant| regex::escape(&variant.text))
            .collect();
        // Literal alternatives only, so the one failure is size: a limit far above any set of
        // real secrets. Without a matcher nothing could be masked, so that is loud.
        registry.matcher = Some(
            regex::RegexBuilder::new(&alternation.join("|"))
                .size_limit(1 << 30)
                .build()
                .expect("an alternation of escaped literals compiles"),
        );
        ACTIVE.store(true, Ordering::Release);
    }
}

/// `text` with every known secret value replaced by its placeholder.
pub fn mask(text: &str) -> Cow<'_, str> {
    if !active() {
        return Cow::Borrowed(text);
    }
    let registry = registry().read().unwrap_or_else(PoisonError::into_inner);
    mask_with(&registry, text, false)
}

/// How many bytes at the end of `kept`, a window of output cut there, begin a spelling of a
/// known secret, at least `MIN_SECRET_CHARACTERS` bytes of it: the caller cuts them too, so no
/// part of a secret long enough to tell leaves with the window (masking only knows whole
/// spellings). 0 when none does.
pub fn secret_begun_at_end(kept: &[u8]) -> usize {
    if !active() {
        return 0;
    }
    let registry = registry().read().unwrap_or_else(PoisonError::into_inner);
    registry
        .variants
        .iter()
        .filter_map(|variant| {
            let spelling = variant.text.as_bytes();
            // A whole spelling at the end is masked as usual; a longer part is no prefix.
            let longest = spelling.len().saturating_sub(1).min(kept.len());
            (MIN_SECRET_CHARACTERS..=longest)
                .rev()
                .find(|&length| kept.ends_with(&spelling[..length]))
        })
        .max()
        .unwrap_or(0)
}

/// `text` masked; `for_store` names in each placeholder the escapings its value went through
/// (`***token~json***`), so that a resume puts back exactly the text that was there.
fn mask_with<'t>(registry: &Registry, text: &'t str, for_store: bool) -> Cow<'t, str> {
    let Some(matcher) = &registry.matcher else {
        return Cow::Borrowed(text);
    };
    match matcher.replace_all(text, |found: &regex::Captures| {
        let value = &found[0];
        registry
            .variants
            .iter()
            .find(|variant| variant.text == value)
            .map_or_else(String::new, |variant| {
                if for_store && !variant.encoding.is_empty() {
                    placeholder(&format!("{}~{}", variant.label, variant.encoding))
                } else {
                    placeholder(&variant.label)
                }
            })
    }) {
        Cow::Borrowed(_) => Cow::Borrowed(text),
        Cow::Owned(masked) => Cow::Owned(masked),
    }
}

/// `value` with every string (and object key) masked; numbers, booleans and structure are kept,
/// so the result is still the same JSON shape.
pub fn mask_json(value: &serde_json::Value) -> Cow<'_, serde_json::Value> {
    if !active() {
        return Cow::Borrowed(value);
    }
    let mut masked = value.clone();
    mask_json_in_place(&mut masked);
    Cow::Owned(masked)
}

/// `mask_json` on a value the caller owns.
pub fn mask_json_in_place(value: &mut serde_json::Value) {
    if !active() {
        return;
    }
    let registry = registry().read().unwrap_or_else(PoisonError::into_inner);
    let masked: Result<(), std::convert::Infallible> = map_strings(value, &mut |text| {
        Ok(match mask_with(&registry, text, false) {
            Cow::Borrowed(_) => None,
            Cow::Owned(masked) => Some(masked),
        })
    });
    let Ok(()) = masked;
}

/// A text in a value to be stored that reads as a placeholder where the original did not hold
/// that secret: restoring it on resume would put a secret where there was none.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "a text holds `{text}`, which reads as the placeholder of a secret; it cannot be stored \
     without being taken for the secret on resume"
)]
pub struct AmbiguousPlaceholder {
    pub text: String,
}

/// `value` masked as the store keeps it; returns the labels of the placeholders put in, which
/// the store keeps beside it so that a resume restores those and nothing else. Every masked
/// text must come back whole when those placeholders are replaced by their values
/// (`restore_json`); one that would not (a text spelling a placeholder) is refused.
pub fn mask_for_store(value: &mut serde_json::Value) -> Result<Vec<String>, AmbiguousPlaceholder> {
    let mut labels: Vec<String> = Vec::new();
    if !active() {
        return Ok(labels);
    }
    let registry = registry().read().unwrap_or_else(PoisonError::into_inner);
    map_strings(value, &mut |text| {
        let masked = mask_with(&registry, text, true);
        if masked.contains("***") {
            let restored = restore_text(&masked, &mut |spelled| {
                let (label, encoding) = split_label(spelled);
                if !registry.reserved.contains(label) && !label.starts_with("env.") {
                    return Ok(None);
                }
                let known = registry.secrets.iter().find(|secret| secret.label == label);
                if known.is_some() && !labels.iter().any(|used| used == label) {
                    labels.push(label.to_string());
                }
                // A reserved label without a known value never gives back the original text.
                Ok(Some(
                    known
                        .and_then(|secret| encode(&secret.value, encoding))
                        .unwrap_or_else(|| format!("\u{0}{spelled}")),
                ))
            })?;
            if restored != text {
                return Err(AmbiguousPlaceholder {
                    text: text.chars().take(80).collect(),
                });
            }
        }
        Ok(match masked {
            Cow::Borrowed(_) => None,
            Cow::Owned(masked) => Some(masked),
        })
    })?;
    Ok(labels)
}

fn placeholder_pattern() -> &'static Regex {
    static PATTERN: OnceLock<Regex> = OnceLock::new();
    PATTERN.get_or_init(|| Regex::new(r"\*\*\*([^*\s]+)\*\*\*").expect("a valid pattern"))
}

/// `text` with each placeholder whose label `resolve` knows replaced by its value.
fn restore_text<E>(
    text: &str,
    resolve: &mut impl FnMut(&str) -> Result<Option<String>, E>,
) -> Result<String, E> {
    let mut restored = String::with_capacity(text.len());
    let mut last = 0;
    for found in placeholder_pattern().captures_iter(text) {
        let whole = found.get(0).expect("a match has group 0");
        if let Some(value) = resolve(&found[1])? {
            restored.push_str(&text[last..whole.start()]);
            restored.push_str(&value);
            last = whole.end();
        }
    }
    restored.push_str(&text[last..]);
    Ok(restored)
}

/// Puts secrets back into a stored value on resume, for the `labels` the store recorded with
/// it (`mask_for_store`): `***NAME***` of a secret input becomes its value in `inputs`,
/// `***env.NAME***` the variable's value now (registered, as `env()` would). A secret input not
/// supplied, or a variable no longer set, is an error naming it.
pub fn restore_json(
    value: &mut serde_json::Value,
    labels: &[String],
    inputs: &[(String, String)],
) -> Result<(), String> {
    if labels.is_empty() {
        return Ok(());
    }
    map_strings(value, &mut |text| {
        if !text.contains("***") {
            return Ok(None);
        }
        let restored = restore_text(text, &mut |spelled| {
            let (label, encoding) = split_label(spelled);
            if !labels.iter().any(|recorded| recorded == label) {
                return Ok(None);
            }
            let unknown_encoding = || format!("its state holds `{spelled}`, an unknown escaping");
            if let Some((_, value)) = inputs.iter().find(|(name, _)| name == label) {
                return encode(value, encoding)
                    .map(Some)
                    .ok_or_else(unknown_encoding);
            }
            let Some(variable) = label.strip_prefix("env.") else {
                return Err(format!(
                    "its state holds the secret input `{label}`, which is not stored: supply it \
                     again with --input {label}=VALUE"
                ));
            };
            match std::env::var(variable) {
                Ok(value) => {
                    register_environment(variable, &value);
                    encode(&value, encoding)
                        .map(Some)
                        .ok_or_else(unknown_encoding)
                }
                Err(_) => Err(format!(
                    "its state holds the value of the environment variable {variable}, read \
                     with env() and stored as `{}`; it is not set now: set it and resume again",
                    placeholder(label)
                )),
            }
        })?;
        Ok((restored != text).then_some(restored))
    })
}

/// Calls `change` on every string and object key of `value`, replacing those it returns.
fn map_strings<E>(
    value: &mut serde_json::Value,
    change: &mut impl FnMut(&str) -> Result<Option<String>, E>,
) -> Result<(), E> {
    match value {
        serde_json::Value::String(text) => {
            if let Some(changed) = change(text)? {
                *text = changed;
            }
        }
        serde_json::Value::Array(items) => {
            for item in items {
                map_strings(item, change)?;
            }
        }
        serde_json::Value::Object(map) => {
            let mut renamed = false;
            for (key, item) in map.iter_mut() {
                map_strings(item, change)?;
                renamed |= change(key)?.is_some();
            }
            if renamed {
                let entries = std::mem::take(map);
                for (key, item) in entries {
                    let key = change(&key)?.unwrap_or(key);
                    map.insert(key, item);
                }
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    // The registry is process-wide: each test uses values no other test registers.

    #[test]
    fn a_window_cut_inside_a_secret_gives_back_its_first_characters() {
        register_input("unit_cut_token", Some("Zq7-cut-S3cr3t!"));
        assert_eq!(secret_begun_at_end(b"padding Zq7-cut-S3cr3t"), 14);
        assert_eq!(secret_begun_at_end(b"padding Zq7-"), 4);
        // Fewer than `MIN_SECRET_CHARACTERS` tell nothing, and the whole value is masked as usual.
        assert_eq!(secret_begun_at_end(b"padding Zq7"), 0);
        assert_eq!(secret_begun_at_end(b"padding Zq7-cut-S3cr3t!"), 0);
        assert_eq!(secret_begun_at_end(b"Zq7-cut"), 7);
        assert_eq!(secret_begun_at_end(b""), 0);
        // Its JSON spelling too (`!` needs no escape; a quote would): a cut inside `\"` counts.
        register_input("unit_cut_quoted", Some("Qv\"cut-quoted"));
        assert_eq!(secret_begun_at_end(b"x Qv\\\"cut"), 7);
    }

    #[test]
    fn masks_every_occurrence_longest_value_first() {
        register_input("unit_short_token", Some("k3y-unit-1"));
        register_input("unit_long_token", Some("k3y-unit-1-extended"));
        assert_eq!(
            mask("a k3y-unit-1-extended and k3y-unit-1."),
            "a ***unit_long_token*** and ***unit_short_token***."
        );
    }

    #[test]
    fn short_values_are_not_masked_and_json_keeps_its_shape() {
        register_environment("UNIT_FLAG", "1");
        register_environment("UNIT_SECRET", "s3cr3t-unit-json");
        let value = serde_json::json!({"n": 1, "s3cr3t-unit-json": ["x s3cr3t-unit-json", 1]});
        assert_eq!(
            *mask_json(&value),
            serde_json::json!({"n": 1, "***env.UNIT_SECRET***": ["x ***env.UNIT_SECRET***", 1]})
        );
    }

    #[test]
    fn a_stored_value_comes_back_whole_on_restore() {
        register_input("unit_store", Some("st0re-unit-value"));
        let original = serde_json::json!({"line": "Bearer st0re-unit-value; ***other***"});
        let mut stored = original.clone();
        let labels = mask_for_store(&mut stored).expect("unambiguous");
        assert_eq!(labels, ["unit_store"]);
        assert_eq!(
            stored,
            serde_json::json!({"line": "Bearer ***unit_store***; ***other***"})
        );
        restore_json(
            &mut stored,
            &labels,
            &[("unit_store".into(), "st0re-unit-value".into())],
        )
        .expect("restored");
        assert_eq!(stored, original);
    }

    #[test]
    fn every_escaped_spelling_is_masked_and_stored_as_it_was() {
        let value = "pa\"ss\\wo\nrd\tx\u{1}-unit-escaped";
        register_input("unit_escaped", Some(value));
        let json = serde_json::to_string(&[value]).unwrap();
        let debug = format!("{:?}", format!("Bearer {value}"));
        let twice = serde_json::to_string(&debug).unwrap();
        let controls = crate::base::text::escape_controls(value).into_owned();
        for text in [&json, &debug, &twice, &controls] {
            let masked = mask(text);
            assert!(
                masked.contains("***unit_escaped***"),
                "{text} gave {masked}"
            );
            assert!(!masked.contains("unit-escaped"), "{text} gave {masked}");
        }
        let original = serde_json::json!([json, debug, twice, controls, value]);
        let mut stored = original.clone();
        let labels = mask_for_store(&mut stored).expect("unambiguous");
        assert!(!stored.to_string().contains("unit-escaped"), "{stored}");
        restore_json(
            &mut stored,
            &labels,
            &[("unit_escaped".into(), value.into())],
        )
        .expect("restored");
        assert_eq!(stored, original);
    }

    #[test]
    fn a_text_spelling_a_placeholder_is_refused_for_the_store() {
        register_input("unit_spelled", Some("sp3lled-unit-value"));
        let mut stored = serde_json::json!(["from a client: ***unit_spelled***"]);
        assert!(mask_for_store(&mut stored).is_err());
        let mut environment = serde_json::json!("***env.UNIT_NEVER_READ***");
        assert!(mask_for_store(&mut environment).is_err());
    }

    #[test]
    fn only_the_placeholders_the_store_recorded_are_restored() {
        let mut stored = serde_json::json!("***env.HOME*** ***unit_other***");
        restore_json(&mut stored, &["unit_listed".into()], &[]).expect("nothing to restore");
        assert_eq!(stored, "***env.HOME*** ***unit_other***");
    }

    #[test]
    fn restoring_an_unset_variable_names_it() {
        let mut stored = serde_json::json!("***env.PROTOCOL_RUN_UNIT_UNSET_VARIABLE***");
        let labels = ["env.PROTOCOL_RUN_UNIT_UNSET_VARIABLE".to_string()];
        let error = restore_json(&mut stored, &labels, &[]).expect_err("unset");
        assert!(
            error.contains("PROTOCOL_RUN_UNIT_UNSET_VARIABLE"),
            "{error}"
        );
    }
}
