//! `status`: what the store knows of one run: its protocol, configuration, context, timers, effects, children and last steps.

use clap::Args;

use super::run_selection::{Latest, RunSelection, StateDirectory, choose_run};
use super::runs::open;
use crate::runtime::runs::view::describe;

/// `protocol-run status [RUN_ID]`.
#[derive(Debug, Args)]
pub struct StatusArguments {
    #[command(flatten)]
    run: RunSelection,
    /// One JSON object.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    state: StateDirectory,
}

/// `protocol-run status [RUN_ID]`: the run's protocol, configuration, context, pending timers,
/// running effects and last events (the latest run when no id is given).
pub fn status(arguments: &StatusArguments) -> u8 {
    let run_id = match choose_run(
        &arguments.state,
        &arguments.run,
        Latest::Any,
        !arguments.json,
    ) {
        Ok(id) => id,
        Err(code) => return code,
    };
    let store = match open(&arguments.state) {
        Ok(store) => store,
        Err(code) => return code,
    };
    match describe(&*store, &run_id, 5) {
        Ok(description) => {
            if arguments.json {
                println!("{description}");
            } else {
                print_human(&description);
            }
            0
        }
        Err((message, code)) => {
            eprintln!("error: {message}");
            code
        }
    }
}

fn print_human(description: &serde_json::Value) {
    let text = |key: &str| description[key].as_str().unwrap_or_default().to_string();
    println!("run       {}", text("run"));
    println!("protocol  {}", text("protocol"));
    println!("status    {} (started {})", text("status"), text("started"));
    if let Some(origin) = description["forked_from"].as_object() {
        println!(
            "forked    from run {} at step {}",
            origin["run"].as_str().unwrap_or_default(),
            origin["step"]
        );
    }
    if let Some(redrives) = description["redrives"].as_u64().filter(|count| *count > 0) {
        let plural = if redrives == 1 { "" } else { "s" };
        println!("redriven  {redrives} time{plural}");
    }
    for entry in description["inbox"].as_array().into_iter().flatten() {
        let state = entry["state"].as_str().unwrap_or_default();
        let what = match state {
            "applied" => format!(
                "applied at step {}: {}",
                entry["step"],
                entry["outcome"].as_str().unwrap_or_default()
            ),
            "set_aside" => entry["reason"].as_str().unwrap_or_default().to_string(),
            _ => format!(
                "waiting for the run's holder (taken {} times)",
                entry["tries"]
            ),
        };
        println!(
            "inbox     {} `{}`: {what}",
            entry["entry"],
            entry["event"].as_str().unwrap_or_default()
        );
    }
    println!("inputs    {}", description["inputs"]);
    let mut narrowing = description["grants"].clone();
    if let Some(recorded) = narrowing.as_object_mut() {
        // The grants the run started with, resolved; the rest is the operator's narrowing.
        if let Some(resolved) = recorded.remove("resolved") {
            println!("grants    {}", resolved.as_str().unwrap_or_default());
        }
        if !recorded.is_empty() {
            println!("narrowing {narrowing} (the operator's, applied on resume)");
        }
    }
    let state = &description["state"];
    if !state.is_null() {
        println!(
            "step      {} (committed {})",
            state["step"],
            state["committed"].as_str().unwrap_or_default()
        );
        println!("states    {}", state["configuration"]);
        println!("context   {}", state["context"]);
        for timer in state["timers"].as_array().into_iter().flatten() {
            println!(
                "timer     {} due {}{}",
                timer["event"].as_str().unwrap_or_default(),
                timer["due"].as_str().unwrap_or_default(),
                if timer["deadline"] == true {
                    " (deadline)"
                } else {
                    ""
                }
            );
        }
        for effect in state["running_effects"].as_array().into_iter().flatten() {
            println!("running   {}", effect.as_str().unwrap_or_default());
        }
        print_children(&state["children"], "");
    }
    if !description["finish"].is_null() {
        println!("finished  {}", description["finish"]);
    }
    for entry in description["last_events"].as_array().into_iter().flatten() {
        let transitions: Vec<&str> = entry["transitions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(serde_json::Value::as_str)
            .collect();
        println!(
            "step {:<4} {} {}{}{}",
            entry["step"],
            entry["at"].as_str().unwrap_or_default(),
            entry["event"]
                .as_str()
                .or(entry["what"].as_str())
                .unwrap_or_default(),
            if transitions.is_empty() { "" } else { ": " },
            transitions.join("; ")
        );
        let failure = &entry["failure"];
        if !failure.is_null() {
            println!(
                "          {}",
                failure["message"].as_str().unwrap_or("failed")
            );
            super::logs::print_stderr_tail(
                failure["stderr"].as_str().unwrap_or_default(),
                "          ",
            );
        }
    }
}

/// One line per child protocol, its path (`kid/grandkid`) and its states.
fn print_children(children: &serde_json::Value, above: &str) {
    for child in children.as_array().into_iter().flatten() {
        let path = format!("{above}{}", child["id"].as_str().unwrap_or_default());
        println!(
            "child     {path}: {} (step {})",
            child["configuration"], child["step"]
        );
        print_children(&child["children"], &format!("{path}/"));
    }
}
