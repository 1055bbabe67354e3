//! `protocol-run stats` as a table a person reads: rates, retries, actions, states, tags.

use serde_json::Value;

/// Prints the statistics (`Statistics::to_json`) under `heading`.
pub fn print(heading: &str, statistics: &Value) {
    println!("{heading}");
    // A retried call made a second attempt; a first attempt that succeeded, or a failure
    // its policy does not retry, is no retry.
    let retried = statistics["retry_sequences"].as_u64().unwrap_or(0);
    match statistics["retry_success_rate"].as_f64() {
        Some(rate) => println!(
            "retry success     {:.0}% of {retried} retried calls",
            rate * 100.0
        ),
        None => println!("retry success     - (no call was retried)"),
    }
    if let Some(attempts) = statistics["average_attempts_to_success"].as_f64() {
        println!("attempts          {attempts:.1} on average for a retried call to succeed");
    }
    let count = |value: &Value| value.as_u64().unwrap_or(0).to_string();
    table(
        &["retried", "succeeded", "exhausted", "cancelled", "attempts"],
        rows(&statistics["retries_per_action"], |row| {
            vec![
                count(&row["succeeded"]),
                count(&row["exhausted"]),
                count(&row["cancelled"]),
                count(&row["attempts"]),
            ]
        }),
    );
    // Calls that succeeded or failed (a cancelled one did neither), and every attempt that
    // timed out, a retried one's included.
    let timeouts = &statistics["timeouts_per_action"];
    let mut actions = rows(&statistics["outcomes_per_action"], |row| {
        vec![count(&row["succeeded"]), count(&row["failed"])]
    });
    // An action whose every call was cancelled may still have timed out.
    for id in object_keys(timeouts) {
        if !actions.iter().any(|(name, _)| name == id) {
            actions.push((id.clone(), vec!["0".into(), "0".into()]));
        }
    }
    actions.sort();
    table(
        &["action", "succeeded", "failed", "timeouts"],
        actions
            .into_iter()
            .map(|(id, mut cells)| {
                cells.push(count(&timeouts[&id]));
                (id, cells)
            })
            .collect(),
    );
    // Every state entered or with time spent, in name order.
    let mut states = object_keys(&statistics["entries_per_state"]);
    states.extend(object_keys(&statistics["time_in_state_ms"]));
    states.sort();
    states.dedup();
    table(
        &["state", "entered", "time", "per run"],
        states
            .into_iter()
            .map(|state| {
                let cells = vec![
                    count(&statistics["entries_per_state"][state]),
                    seconds(&statistics["time_in_state_ms"][state]),
                    seconds(&statistics["average_time_in_state_ms"][state]),
                ];
                (state.clone(), cells)
            })
            .collect(),
    );
    table(
        &["tag", "lines"],
        rows(&statistics["tags"], |lines| vec![count(lines)]),
    );
}

fn object_keys(object: &Value) -> Vec<&String> {
    object
        .as_object()
        .into_iter()
        .flatten()
        .map(|(key, _)| key)
        .collect()
}

/// An object's entries as named rows of cells.
fn rows(object: &Value, cells: impl Fn(&Value) -> Vec<String>) -> Vec<(String, Vec<String>)> {
    object
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, value)| (name.clone(), cells(value)))
        .collect()
}

/// One section after a blank line: the headings, then the rows, the first column as wide as its
/// longest name and the others right-aligned; nothing at all when there are no rows.
fn table(headings: &[&str], rows: Vec<(String, Vec<String>)>) {
    if rows.is_empty() {
        return;
    }
    let width = rows
        .iter()
        .map(|(name, _)| name.chars().count())
        .chain([16])
        .max()
        .unwrap_or(16);
    let line = |first: &str, cells: &[String]| {
        let mut text = format!("{first:<width$}");
        for cell in cells {
            text.push_str(&format!(" {cell:>10}"));
        }
        println!("{text}");
    };
    println!();
    let rest: Vec<String> = headings[1..]
        .iter()
        .map(|heading| heading.to_string())
        .collect();
    line(headings[0], &rest);
    for (name, cells) in &rows {
        line(name, cells);
    }
}

/// Milliseconds as seconds with three decimals: `12.000s`.
fn seconds(milliseconds: &Value) -> String {
    let milliseconds = milliseconds.as_u64().unwrap_or(0);
    format!("{}.{:03}s", milliseconds / 1000, milliseconds % 1000)
}
