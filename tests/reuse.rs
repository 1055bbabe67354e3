//! Reuse: a block's actions run in its place and order, parameters bind to arguments, policies resolve, and every misuse is a located error.

use crate::support::{Run, errors, run_binary, temporary_directory};

#[test]
fn a_block_runs_in_place_of_its_use_in_order_with_nested_blocks() {
    let mut run = Run::start(
        r#"
id: order
blocks:
  outer:
    parameters:
      label: {}
    do:
      - log: "outer ${label}"
      - use: inner
        with: { depth: "label + '/inner'" }
      - log: "outer done"
  inner:
    parameters:
      depth: {}
    do: [{ log: "inner ${depth}" }]
states:
  a:
    entry:
      - log: before
      - use: outer
        with: { label: "'first'" }
      - log: between
      - use: outer
        with: { label: "'second'" }
      - log: after
"#,
    );
    assert_eq!(
        run.take_steps(),
        [
            "enter:a",
            "log:before",
            "log:outer first",
            "log:inner first/inner",
            "log:outer done",
            "log:between",
            "log:outer second",
            "log:inner second/inner",
            "log:outer done",
            "log:after",
        ]
    );
}

/// A parameter stands for its argument's expression, read where the block reads it: after an
/// `assign` in the block, it sees the new value. Literals and defaults bind too.
#[test]
fn parameters_are_read_where_the_block_reads_them() {
    let mut run = Run::start(
        r#"
id: parameters
context: { count: 1, seen: [] }
blocks:
  bump:
    parameters:
      current: {}
      step: { default: 10 }
      names: { default: [a, b] }
    do:
      - log: "before ${current}"
      - assign: { count: "count + step" }
      - log: "after ${current} ${names}"
      # The parameter is an operand whatever its argument: `current * 2` is `(count + 0) * 2`.
      - assign: { seen: "seen + [current * 2]" }
states:
  a:
    entry:
      - use: bump
        with: { current: "count + 0" }
      - use: bump
        with: { current: count, step: 1, names: [z] }
"#,
    );
    assert_eq!(
        run.take_logs(),
        [
            "before 1",
            r#"after 11 ["a","b"]"#,
            "before 11",
            r#"after 12 ["z"]"#
        ]
    );
    assert_eq!(run.context("seen"), serde_json::json!([22, 24]));
}

#[test]
fn named_retry_policies_stand_for_their_retriers_in_order() {
    let run = Run::start(
        r#"
id: policies
retry_policies:
  standard:
    - { error_equals: [error.exec.timeout], max_attempts: 4, interval: 2s }
    - { error_equals: [error.exec], max_attempts: 2 }
states:
  a:
    entry:
      - exec: ["true"]
        id: alone
        retry: standard
      - exec: ["true"]
        id: listed
        retry:
          - { error_equals: [error.incomplete], max_attempts: 9 }
          - standard
"#,
    );
    let attempts: Vec<Vec<u32>> = run
        .host
        .effects
        .iter()
        .map(|request| {
            request
                .plan
                .retriers
                .iter()
                .map(|retrier| retrier.max_attempts)
                .collect()
        })
        .collect();
    assert_eq!(attempts, [vec![4, 2], vec![9, 4, 2]]);
}

#[test]
fn an_unknown_block_or_policy_is_located_with_a_suggestion() {
    let rendered = errors(
        r#"
id: unknown
blocks:
  call_tool: { do: [{ log: x }] }
retry_policies:
  standard: [{ max_attempts: 2 }]
states:
  a:
    entry:
      - use: call_tol
      - exec: ["true"]
        id: run
        retry: [standrd]
"#,
    );
    assert!(
        rendered.contains("error: no block is named `call_tol`")
            && rendered.contains("test.yaml:10:14")
            && rendered.contains("did you mean `call_tool`?"),
        "{rendered}"
    );
    assert!(
        rendered.contains("error: no retry policy is named `standrd`")
            && rendered.contains("test.yaml:13:17")
            && rendered.contains("did you mean `standard`?"),
        "{rendered}"
    );
}

#[test]
fn unknown_missing_and_bad_arguments_are_located_at_the_use() {
    let rendered = errors(
        r#"
id: arguments
blocks:
  greet:
    parameters:
      who: {}
      loud: { default: false }
    do: [{ log: "hi ${who} ${loud}" }]
states:
  a:
    entry:
      - use: greet
        with: { woh: "'x'" }
      - use: greet
        with: { who: "nobody + 1" }
"#,
    );
    assert!(
        rendered.contains("error: the block `greet` has no parameter `woh`")
            && rendered.contains("test.yaml:13:17")
            && rendered.contains("did you mean `who`?"),
        "{rendered}"
    );
    assert!(
        rendered.contains("error: the block `greet` needs the parameter `who`")
            && rendered.contains("test.yaml:12:9")
            && rendered.contains("add `who: ...` under `with:`"),
        "{rendered}"
    );
    assert!(
        rendered.contains("unknown name `nobody`") && rendered.contains("test.yaml:15:23"),
        "{rendered}"
    );
}

/// A problem inside a block is shown once, at the line in the block, with a note for each use;
/// a problem next to a parameter is located in the block's text, not in the argument.
#[test]
fn a_problem_inside_a_block_is_located_there_and_names_each_use() {
    let rendered = errors(
        r#"
id: inside
context: { total: 0 }
blocks:
  add:
    parameters:
      amount: {}
    do:
      - assign: { total: "amount + missing" }
states:
  a:
    entry:
      - use: add
        with: { amount: "total * 100 + 1" }
    on:
      go:
        actions:
          - use: add
            with: { amount: 1 }
"#,
    );
    assert_eq!(
        rendered.matches("unknown name `missing`").count(),
        1,
        "{rendered}"
    );
    assert!(rendered.contains("test.yaml:9:36"), "{rendered}");
    assert!(
        rendered.contains("= note: in the block `add` used at test.yaml:13:14")
            && rendered.contains("= note: in the block `add` used at test.yaml:18:18"),
        "{rendered}"
    );
}

#[test]
fn a_block_that_uses_itself_is_refused_with_the_chain() {
    let rendered = errors(
        r#"
id: cycle
blocks:
  first: { do: [{ log: one }, { use: second }] }
  second: { do: [{ use: third }] }
  third: { do: [{ use: first }] }
states:
  a:
    entry: [{ use: first }]
"#,
    );
    assert!(
        rendered.contains("error: the block `first` uses itself: first → second → third → first")
            && rendered.contains("test.yaml:6:24"),
        "{rendered}"
    );
}

/// Each level uses the next twice: 2^14 copies of the last block's action would be compiled.
#[test]
fn blocks_that_expand_past_the_limit_are_refused_naming_it() {
    let mut yaml = String::from("id: explosion\nblocks:\n");
    for level in 0..14 {
        yaml.push_str(&format!(
            "  level{level}: {{ do: [{{ use: level{} }}, {{ use: level{} }}] }}\n",
            level + 1,
            level + 1
        ));
    }
    yaml.push_str(
        "  level14: { do: [{ log: leaf }] }\nstates:\n  a:\n    entry: [{ use: level0 }]\n",
    );
    let started = std::time::Instant::now();
    let rendered = errors(&yaml);
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert_eq!(
        rendered
            .matches("expand to more than the limit of 10000 actions")
            .count(),
        1,
        "{rendered}"
    );
}

#[test]
fn check_warns_of_a_block_or_policy_never_used() {
    let directory = temporary_directory("reuse", "unused");
    std::fs::write(
        directory.join("main.yaml"),
        "id: unused
permissions: { exec: [], write: [], read: [], env: [] }
blocks:
  spare: { do: [{ log: spare }] }
retry_policies:
  spare_policy: [{ max_attempts: 2 }]
states:
  a: { type: final }
",
    )
    .unwrap();
    let (_, stdout, stderr) = run_binary(&directory, &["check", "main.yaml"]);
    let output = format!("{stdout}{stderr}");
    assert!(
        output.contains("warning: the block `spare` is never used")
            && output.contains("main.yaml:4:3"),
        "{output}"
    );
    assert!(
        output.contains("warning: the retry policy `spare_policy` is never used")
            && output.contains("main.yaml:6:3"),
        "{output}"
    );
}

/// An effect id in a block may be a parameter given a quoted name: each use starts its own
/// effect, with its own outcome events.
#[test]
fn an_effect_id_may_be_a_parameter_given_a_literal_name() {
    let run = Run::start(
        r#"
id: ids
blocks:
  probe:
    parameters:
      name: {}
    do:
      - exec: [echo, "${name}"]
        id: "${name}"
states:
  a:
    entry:
      - use: probe
        with: { name: "'first'" }
      - use: probe
        with: { name: "'second'" }
    on:
      done.exec.second: b
  b: { type: final }
"#,
    );
    let ids: Vec<&str> = run
        .host
        .effects
        .iter()
        .map(|request| &*request.id)
        .collect();
    assert_eq!(ids, ["first", "second"]);
    let rendered = errors(
        r#"
id: computed
context: { suffix: x }
blocks:
  probe:
    parameters:
      name: {}
    do: [{ exec: [echo], id: "${name}" }]
states:
  a:
    entry:
      - use: probe
        with: { name: "'probe_' + suffix" }
"#,
    );
    assert!(
        rendered.contains("error: an id is fixed when the protocol loads: the parameter `name` is `'probe_' + suffix`, not a string literal")
            && rendered.contains("test.yaml:8:30")
            && rendered.contains("= note: in the block `probe` used at test.yaml:12:14"),
        "{rendered}"
    );
}

/// Arguments nest: each level's parameter read twice doubles the text, and the expression
/// limit names the parameters as the cause.
#[test]
fn an_expression_grown_past_the_limit_by_its_arguments_says_so() {
    let mut yaml = String::from("id: growth\ncontext: { seed: 1 }\nblocks:\n");
    for level in 0..10 {
        yaml.push_str(&format!(
            "  level{level}: {{ parameters: {{ x: {{}} }}, do: [{{ use: level{}, with: {{ x: \"x + x\" }} }}] }}\n",
            level + 1
        ));
    }
    yaml.push_str("  level10: { parameters: { x: {} }, do: [{ log: \"${x + x}\" }] }\n");
    yaml.push_str("states:\n  a:\n    entry: [{ use: level0, with: { x: seed } }]\n");
    let rendered = errors(&yaml);
    assert!(
        rendered.contains(
            "with the block's parameters replaced by their arguments, this expression is"
        ) && rendered.contains("longer than the limit of 4096"),
        "{rendered}"
    );
}

#[test]
fn a_parameter_name_expressions_cannot_read_is_refused_where_declared() {
    let rendered = errors(
        r#"
id: names
blocks:
  b:
    parameters:
      my-name: { default: 1 }
      event: { default: 2 }
    do: [{ log: x }]
states:
  a:
    entry: [{ use: b }]
"#,
    );
    assert!(
        rendered.contains("error: `my-name` is not a valid parameter name")
            && rendered.contains("test.yaml:6:7")
            && rendered.contains("error: `event` is reserved and cannot name a parameter")
            && rendered.contains("test.yaml:7:7"),
        "{rendered}"
    );
}
