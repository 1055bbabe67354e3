//! The fast reader: what it reads and what it leaves to CEL, and that what it reads evaluates as CEL evaluates it.

use std::collections::HashMap;

use super::*;
use crate::pipeline::compile::expression::{Expression, Scope};

fn names() -> Names {
    Names::new(
        [
            "attempts".to_string(),
            "done".to_string(),
            "tool".to_string(),
        ],
        ["limit".to_string()],
        HashMap::from([("idle".to_string(), 1)]),
    )
}

#[test]
fn reads_the_subset_and_defers_the_rest() {
    let names = names();
    for text in [
        "attempts < 3",
        "attempts + 1",
        "-1",
        "- 9223372036854775807",
        "-9223372036854775807 - 1",
        "!done && attempts * 2 <= limit",
        "tool == 'read_file' || tool == \"grep\"",
        "(attempts)",
        "done ? attempts : -attempts",
        "done ? 1 : done ? 2 : 3",
        "!!done",
        "--attempts",
        "attempts < 2 < 3",
        "'é' < 'z'",
        "''",
        "event.name",
        "event.data.stdout",
        "!event.data.truncated",
        "event.data.result.code == 0 && event.type == 'external'",
        "size(tool)",
        "tool[0]",
        "event.data[0]",
        "event.data.items[attempts].name",
        "attempts.x",
        "attempts.x[0][limit].y",
        "(attempts).x",
        "now()",
        "now_ms()",
        "json_valid(tool) && exists(tool)",
        "In('idle') && !In(\"idle\")",
        "env('HOME')",
        "{'a': 'A'}[tool]",
        "[1, 2][0]",
        "(attempts + 1).size()",
        "(tool + tool)[0].x",
        "'a\\'b'",
        "'a\\nb' + \"\\t\\\"\"",
        "{'a': 1}",
        "attempts in [1]",
        "tool.map(t, t)",
        "tool.exists(t, t)",
        "tool.map(t, t.size() + attempts)",
        "{}",
        "{'a': attempts, 'b': [tool]}",
        "tool.size()",
        "event.data.size()",
        "tool.endsWith('/') ? tool.substring(0, size(tool) - 1) : tool",
        "tool.lastIndexOf('/') < 0",
        "tool.split('/').join(', ')",
        "attempts.x.join()",
        "tool.matches('(?i)a|b')",
        "[1]",
        "[]",
        "[attempts, 'a', [done]]",
        "null",
        "attempts != null ? string(attempts) : 'none'",
        "has(attempts.x)",
        "has(event.data.x) && has((attempts.y.z))",
    ] {
        assert!(parse(text, &names).is_some(), "`{text}` should be read");
    }
    for text in [
        "-9223372036854775808",
        "--1",
        "0x10",
        "1.5",
        "1u",
        "1e3",
        "1abc",
        "'''a'''",
        "r'a'",
        "b'a'",
        "in",
        "nosuch < 1",
        "event",
        "event.nosuch",
        "event.data.in",
        "event.data.true",
        "event.data.?x",
        "event..data",
        "(event).data",
        "'abc'[0]",
        "In('nosuch')",
        "In(tool)",
        "In('idle', 1)",
        "'\\x41'",
        "'\\u00e9'",
        "'\\101'",
        "'\\a'",
        "'\\q'",
        "'a\\",
        "'a\nb'",
        "attempts.x()",
        "tool.map(t, nosuch)",
        "tool.map(1, t)",
        "tool.map(t, t, t)",
        "tool.map(null, 1)",
        "{'a': 1,}",
        "{attempts: 1}",
        "tool.size(",
        "tool.size(1,)",
        "'abc'.size()",
        "now().getHours()",
        "[1,]",
        "[?1]",
        "[1 2]",
        "[1",
        "has(attempts)",
        "has(attempts[0])",
        "has(event.nosuch)",
        "has(attempts.x, 1)",
        "has()",
        "string(1, 2)",
        "now()[0]",
        "size(tool).x",
        "size(tool, 1)",
        "size()",
        "now_ms(1)",
        "attempts[0",
        "attempts[]",
        "attempts.?x",
        "attempts[?0]",
        "attempts.null",
        "-1[0]",
        "attempts // comment",
        "done ? done ? 1 : 2 : 3",
        "!-attempts",
        "attempts = 1",
        "attempts & 1",
        "é",
        "(attempts",
        "attempts)",
        "attempts 1",
        "`attempts`",
    ] {
        assert!(parse(text, &names).is_none(), "`{text}` should go to CEL");
    }
    let deep = format!("{}1{}", "(".repeat(40), ")".repeat(40));
    assert!(
        parse(&deep, &names).is_none(),
        "nesting past the limit goes to CEL"
    );
}

#[test]
fn event_paths_evaluate_as_cel_reads_them() {
    let names = names();
    let mut result = indexmap::IndexMap::new();
    result.insert(std::sync::Arc::from("code"), Value::Int(0));
    let mut data = indexmap::IndexMap::new();
    data.insert(std::sync::Arc::from("stdout"), Value::string("ok\n"));
    data.insert(std::sync::Arc::from("truncated"), Value::Bool(false));
    data.insert(
        std::sync::Arc::from("result"),
        Value::Map(std::sync::Arc::new(result)),
    );
    let data = Value::Map(std::sync::Arc::new(data));
    let null = Value::Null;
    for (event_data, send_id) in [(&data, Some("s1")), (&null, None)] {
        let event = crate::base::event::Event {
            name: std::sync::Arc::from("done.invoke.x"),
            event_type: None,
            data: event_data.clone(),
            origin: crate::base::event::Origin::External,
            send_id: send_id.map(std::sync::Arc::from),
            invoke_id: None,
        };
        let scope = Scope {
            names: &names,
            context: &[],
            inputs: &[],
            event: Some(&event),
            is_active: &|_| false,
            clock: 0,
        };
        for text in [
            "event.data.stdout",
            "!event.data.truncated",
            "event.data.result.code == 0",
            "event.data.result",
            "event.data.nosuch",
            "event.data.stdout.deeper",
            "event.name",
            "event.type",
            "event.sendid",
            "event.name.x",
            "event.data",
        ] {
            assert_read_as_cel_reads(text, &scope);
        }
    }
}

#[test]
fn what_is_read_evaluates_as_cel_reads_it() {
    let names = names();
    let context = [Value::Int(2), Value::Bool(false), Value::string("grep")];
    let inputs = [Value::Int(3)];
    let scope = Scope {
        names: &names,
        context: &context,
        inputs: &inputs,
        event: None,
        is_active: &|_| false,
        clock: 0,
    };
    for text in [
        "-9223372036854775807 - 1",
        "-9223372036854775807 - 2",
        "attempts - -1 * 3",
        "attempts - 1 - 1",
        "10 / attempts % 3",
        "!done == true",
        "--tool",
        "!!attempts",
        "done ? 1 : attempts > 1 ? 2 : 3",
        "attempts < 2 < 3",
        "tool < 'h' && attempts >= limit - 1",
    ] {
        assert_read_as_cel_reads(text, &scope);
    }
}

/// `text` is read directly, and evaluates in `scope` as CEL's parser and interpreter do.
fn assert_read_as_cel_reads(text: &str, scope: &Scope) {
    let read = Expression::compile(text, scope.names).unwrap();
    assert!(read.is_read_directly(), "`{text}`");
    let through_cel = Expression::compile_with_cel(text, scope.names).unwrap();
    assert_eq!(
        read.evaluate(scope),
        through_cel.evaluate_with_cel(scope),
        "`{text}` with event {:?}",
        scope.event.map(|event| &event.data)
    );
}
