//! What the inspector does to runs, through the real binary: cancel a run a `run` process holds (through its inbox), redrive a stopped run and fork a finished one at a step (each by a driver process it starts, which takes the run's inbox), refusals said with their reason.

use std::process::Stdio;

use serde_json::Value;

use crate::support;
use crate::ui_inspector::{Process, api, csrf_token, inspector, request, wait_for_monitoring};

/// POSTs `body` to `path` with the page's CSRF token: the status and the JSON answer.
fn post(address: &str, path: &str, body: &str) -> (u16, Value) {
    let token = csrf_token(address);
    let headers = [
        ("X-CSRF-Token", token.as_str()),
        ("Content-Type", "application/json"),
    ];
    let (status, body) = request(address, "POST", path, &headers, body);
    let start = body.find('{').unwrap_or(0);
    let end = body.rfind('}').map_or(body.len(), |end| end + 1);
    let answer = serde_json::from_str(&body[start..end])
        .unwrap_or_else(|_| panic!("{path}: not JSON: {body}"));
    (status, answer)
}

/// Waits until the inspector reads run `run` ended (finished, failed or cancelled); the run.
fn wait_for_finish(address: &str, run: &str) -> Value {
    support::eventually("the run's end", || {
        let run = api(address, &format!("/api/run?id={run}"));
        (run["status"] != "running" && run["status"] != "stopped").then_some(run)
    })
}

/// Sends ITTW's `captain_guidance` to `run` from the inspector.
fn guide(address: &str, run: &str) {
    let (status, answer) = post(
        address,
        &format!("/api/event?id={run}"),
        "{\"event\": \"captain_guidance\", \"data\": {\"say\": \"stop\"}}",
    );
    assert_eq!(status, 200, "{answer}");
}

#[test]
fn sqlite_the_inspector_cancels_a_run_that_a_run_process_holds() {
    the_inspector_cancels_a_run_that_a_run_process_holds("cancel", &[]);
}

#[test]
fn postgres_the_inspector_cancels_a_run_that_a_run_process_holds() {
    let Some(database) = support::postgres::database(
        "ui_actions::postgres_the_inspector_cancels_a_run_that_a_run_process_holds",
    ) else {
        return;
    };
    let environment = [
        ("PROTOCOL_RUN_STORE", "postgres"),
        ("PROTOCOL_RUN_DATABASE_URL", database.url()),
    ];
    the_inspector_cancels_a_run_that_a_run_process_holds("cancel-postgres", &environment);
}

fn the_inspector_cancels_a_run_that_a_run_process_holds(name: &str, environment: &[(&str, &str)]) {
    let directory = support::temporary_directory("ui-actions", name);
    let mut child = crate::run_inbox::ittw_run_on(&directory, environment, "doomed", Stdio::null);
    let input = child.stdin.take();
    let _run = Process { child, input };
    let (_inspector, address) = inspector(&directory, &[], environment);
    wait_for_monitoring(&address, "doomed");
    let (status, answer) = post(&address, "/api/cancel?id=doomed", "{}");
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["outcome"], "queued", "{answer}");
    assert_eq!(answer["entry"], 1, "{answer}");
    let run = wait_for_finish(&address, "doomed");
    assert_eq!(run["status"], "cancelled", "{run}");
    assert_eq!(run["finish"]["exit_code"], 130, "{run}");
    assert_eq!(run["inbox"][0]["event"], "cancel", "{run}");
    assert_eq!(run["inbox"][0]["outcome"], "cancelled", "{run}");
    // Nothing is left to cancel, or to send to.
    let (status, answer) = post(&address, "/api/cancel?id=doomed", "{}");
    assert_eq!(status, 422, "{answer}");
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("has finished: there is nothing to cancel"),
        "{answer}"
    );
}

#[test]
fn sqlite_the_inspector_redrives_a_stopped_run_and_its_driver_takes_the_runs_events() {
    the_inspector_redrives_a_stopped_run_and_its_driver_takes_the_runs_events("redrive", &[]);
}

#[test]
fn postgres_the_inspector_redrives_a_stopped_run_and_its_driver_takes_the_runs_events() {
    let Some(database) = support::postgres::database(
        "ui_actions::postgres_the_inspector_redrives_a_stopped_run_and_its_driver_takes_the_runs_events",
    ) else {
        return;
    };
    let environment = [
        ("PROTOCOL_RUN_STORE", "postgres"),
        ("PROTOCOL_RUN_DATABASE_URL", database.url()),
    ];
    the_inspector_redrives_a_stopped_run_and_its_driver_takes_the_runs_events(
        "redrive-postgres",
        &environment,
    );
}

fn the_inspector_redrives_a_stopped_run_and_its_driver_takes_the_runs_events(
    name: &str,
    environment: &[(&str, &str)],
) {
    let directory = support::temporary_directory("ui-actions", name);
    let mut child = crate::run_inbox::ittw_run_on(&directory, environment, "halted", Stdio::null);
    let input = child.stdin.take();
    let (_inspector, address) = inspector(&directory, &[], environment);
    wait_for_monitoring(&address, "halted");
    // Stopped by a signal: unfinished, resumable, held by nobody.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    drop(input);
    assert_eq!(child.wait().unwrap().code(), Some(75));
    let run = api(&address, "/api/run?id=halted");
    assert_eq!(run["status"], "stopped", "{run}");
    let (status, answer) = post(&address, "/api/redrive?id=halted", "{}");
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["outcome"], "redriven", "{answer}");
    assert_eq!(answer["driver"]["running"], true, "{answer}");
    let pid = answer["driver"]["pid"].as_u64().unwrap();
    assert!(
        answer["driver"]["command"]
            .as_str()
            .unwrap()
            .starts_with("protocol-run redrive halted --events inbox"),
        "{answer}"
    );
    // The driver holds the run and waits for its inbox: guidance sent from the page ends it.
    wait_for_monitoring(&address, "halted");
    guide(&address, "halted");
    let run = wait_for_finish(&address, "halted");
    assert_eq!(run["finish"]["state"], "guided", "{run}");
    let drivers = support::eventually("the driver's end", || {
        let drivers = api(&address, "/api/drivers?id=halted");
        (drivers["drivers"][0]["running"] == false).then_some(drivers)
    });
    assert_eq!(drivers["drivers"][0]["pid"], pid, "{drivers}");
    assert_eq!(drivers["drivers"][0]["exit_code"], 0, "{drivers}");
    // A run that reached a final state is forked, not redriven.
    let (status, answer) = post(&address, "/api/redrive?id=halted", "{}");
    assert_eq!(status, 422, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("fork"),
        "{answer}"
    );
}

#[test]
fn sqlite_the_inspector_forks_a_finished_run_at_a_step_and_the_new_run_waits_for_its_events() {
    the_inspector_forks_a_finished_run_at_a_step_and_the_new_run_waits_for_its_events("fork", &[]);
}

#[test]
fn postgres_the_inspector_forks_a_finished_run_at_a_step_and_the_new_run_waits_for_its_events() {
    let Some(database) = support::postgres::database(
        "ui_actions::postgres_the_inspector_forks_a_finished_run_at_a_step_and_the_new_run_waits_for_its_events",
    ) else {
        return;
    };
    let environment = [
        ("PROTOCOL_RUN_STORE", "postgres"),
        ("PROTOCOL_RUN_DATABASE_URL", database.url()),
    ];
    the_inspector_forks_a_finished_run_at_a_step_and_the_new_run_waits_for_its_events(
        "fork-postgres",
        &environment,
    );
}

fn the_inspector_forks_a_finished_run_at_a_step_and_the_new_run_waits_for_its_events(
    name: &str,
    environment: &[(&str, &str)],
) {
    let directory = support::temporary_directory("ui-actions", name);
    let mut child = crate::run_inbox::ittw_run_on(&directory, environment, "original", Stdio::null);
    let input = child.stdin.take();
    let _run = Process { child, input };
    let (_inspector, address) = inspector(&directory, &[], environment);
    wait_for_monitoring(&address, "original");
    let waiting_at = api(&address, "/api/run?id=original")["state"]["step"]
        .as_u64()
        .unwrap();
    guide(&address, "original");
    let finished = wait_for_finish(&address, "original");
    let last = finished["steps"].as_u64().unwrap() - 1;
    // The step that ended the run is no place to fork from.
    let (status, answer) = post(
        &address,
        "/api/fork?id=original",
        &format!("{{\"step\": {last}}}"),
    );
    assert_eq!(status, 422, "{answer}");
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("that step ended the run"),
        "{answer}"
    );
    let (status, answer) = post(
        &address,
        "/api/fork?id=original",
        &format!("{{\"step\": {waiting_at}}}"),
    );
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["outcome"], "forked", "{answer}");
    let forked = answer["run"].as_str().unwrap().to_string();
    let run = api(&address, &format!("/api/run?id={forked}"));
    assert_eq!(run["forked_from"]["run"], "original", "{run}");
    wait_for_monitoring(&address, &forked);
    guide(&address, &forked);
    let run = wait_for_finish(&address, &forked);
    assert_eq!(run["finish"]["state"], "guided", "{run}");
}

#[test]
fn a_browser_cancels_a_run_and_forks_another_from_a_step() {
    let Some(chromium) = crate::ui_inspector::chromium("a_browser_cancels_a_run_and_forks") else {
        return;
    };
    let directory = support::temporary_directory("ui-actions", "browser");
    let mut waiting = crate::run_inbox::ittw_run(&directory, "waiting", Stdio::null);
    let waiting_input = waiting.stdin.take();
    let _waiting = Process {
        child: waiting,
        input: waiting_input,
    };
    let mut guided = crate::run_inbox::ittw_run(&directory, "guided", Stdio::null);
    let guided_input = guided.stdin.take();
    let _guided = Process {
        child: guided,
        input: guided_input,
    };
    let (_inspector, address) = inspector(&directory, &[], &[]);
    wait_for_monitoring(&address, "waiting");
    wait_for_monitoring(&address, "guided");
    guide(&address, "guided");
    wait_for_finish(&address, "guided");
    let url = format!("http://{address}/");
    let (seen, screenshots) =
        crate::ui_inspector::drive_page(&chromium, "actions.mjs", &[&url, "waiting", "guided"]);
    assert_eq!(seen["cancelled_inbox"], "cancelled", "{seen}");
    assert_eq!(seen["problems"], serde_json::json!([]), "{seen}");
    let forked = seen["forked"].as_str().unwrap();
    let run = api(&address, &format!("/api/run?id={forked}"));
    assert_eq!(run["forked_from"]["run"], "guided", "{run}");
    for shot in ["run-cancelled.png", "run-forked.png"] {
        assert!(screenshots.join(shot).exists(), "{shot}");
    }
    // The forked run's driver waits for its inbox: guidance ends it, and its driver.
    guide(&address, forked);
    let run = wait_for_finish(&address, forked);
    assert_eq!(run["finish"]["state"], "guided", "{run}");
}

#[test]
fn a_page_starts_no_more_drivers_than_the_limit_at_once() {
    let directory = support::temporary_directory("ui-actions", "drivers-limit");
    let mut child = crate::run_inbox::ittw_run(&directory, "source", Stdio::null);
    let input = child.stdin.take();
    let _run = Process { child, input };
    let (_inspector, address) = inspector(&directory, &[], &[]);
    wait_for_monitoring(&address, "source");
    let waiting_at = api(&address, "/api/run?id=source")["state"]["step"]
        .as_u64()
        .unwrap();
    guide(&address, "source");
    wait_for_finish(&address, "source");
    let body = format!("{{\"step\": {waiting_at}}}");
    let forks: Vec<String> = (0..16)
        .map(|_| {
            let (status, answer) = post(&address, "/api/fork?id=source", &body);
            assert_eq!(status, 200, "{answer}");
            answer["run"].as_str().unwrap().to_string()
        })
        .collect();
    // Each fork's driver waits for its run's inbox: sixteen run at once, the limit.
    let (status, answer) = post(&address, "/api/fork?id=source", &body);
    assert_eq!(status, 422, "{answer}");
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("16 drivers started here still run, the limit (MAX_RUNNING_DRIVERS)"),
        "{answer}"
    );
    // Cancelled through their inboxes, the drivers end, and a fork starts again.
    for fork in &forks {
        let (status, answer) = post(&address, &format!("/api/cancel?id={fork}"), "{}");
        assert_eq!(status, 200, "{answer}");
    }
    for fork in &forks {
        let run = wait_for_finish(&address, fork);
        assert_eq!(run["status"], "cancelled", "{run}");
    }
    support::eventually("the drivers' ends", || {
        forks
            .iter()
            .all(|fork| {
                api(&address, &format!("/api/drivers?id={fork}"))["drivers"][0]["running"] == false
            })
            .then_some(())
    });
    let (status, answer) = post(&address, "/api/fork?id=source", &body);
    assert_eq!(status, 200, "{answer}");
    let last = answer["run"].as_str().unwrap().to_string();
    let (status, answer) = post(&address, &format!("/api/cancel?id={last}"), "{}");
    assert_eq!(status, 200, "{answer}");
}
