//! The examples run as a user runs them: `examples/embed.rs` through its public API, and
//! `examples/agent_driver.py` against the real binary.

#[allow(dead_code)]
#[path = "../examples/embed.rs"]
mod embed;

#[test]
fn the_embedding_example_pages_through_its_rust_function_and_action() {
    let failed = |reason: &str| ("deploy.failed", serde_json::json!({ "reason": reason }));
    let happened = embed::run(
        "payments",
        &[
            failed("health check"),
            failed("timeout"),
            ("acknowledged", serde_json::Value::Null),
        ],
    )
    .unwrap();
    assert_eq!(
        happened,
        [
            "enter watching",
            "take /states/watching/on/deploy.failed/0",
            "enter watching",
            "take /states/watching/on/deploy.failed/1",
            "enter paging",
            "take /states/paging/on/page.sent",
            "enter paged",
            "take /states/paged/on/acknowledged",
            "enter healthy",
            r#"paged {"service":"payments","failures":2,"reason":"timeout"}"#,
            r#"finished {"failures":2,"page_id":"page-1"}"#,
        ]
    );
    // Another service tolerates more: the guard function decides, not the protocol.
    let happened = embed::run(
        "api",
        &[
            failed("x"),
            failed("y"),
            ("deploy.succeeded", serde_json::Value::Null),
        ],
    )
    .unwrap();
    assert_eq!(
        happened.last().unwrap(),
        r#"finished {"failures":2,"page_id":""}"#
    );
}

#[test]
fn an_unregistered_call_or_function_is_a_located_error() {
    let rendered = crate::support::errors(
        r#"
id: needs-host
states:
  a:
    entry:
      - call: page_oncall
      - log: "${should_page(1)}"
"#,
    );
    assert!(
        rendered.contains("no action `page_oncall` is registered"),
        "{rendered}"
    );
    assert!(
        rendered.contains("the command line registers none"),
        "{rendered}"
    );
    assert!(
        rendered.contains("unknown function `should_page`"),
        "{rendered}"
    );
}

#[test]
fn host_functions_cannot_shadow_builtins() {
    let error = protocol_run::pipeline::extensions::Extensions::new()
        .function("size", |_| Ok(protocol_run::base::value::Value::Null))
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "cannot register `size`: expressions already have a function of that name"
    );
}

#[test]
fn the_python_agent_drives_ittw_over_stdio() {
    let output = std::process::Command::new("python3")
        .arg("examples/agent_driver.py")
        .args(["--binary", env!("CARGO_BIN_EXE_protocol-run")])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.trim_end().ends_with("all conversations passed"),
        "{stdout}"
    );
}
