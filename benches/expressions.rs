//! Expression evaluation: the compiled fast path against full CEL (the `cel` crate).
//!
//! `cargo bench --bench expressions`. Each expression is compiled once; `fast_path` times
//! `Expression::evaluate` (the fast form when there is one) and `full_cel` times
//! `Expression::evaluate_with_cel` on the same scope. The last four expressions have no fast
//! form, so both columns are CEL there.

use std::collections::HashMap;

use divan::Bencher;
use protocol_run::base::value::Value;
use protocol_run::pipeline::compile::expression::{Expression, Names, Scope};

fn main() {
    divan::main();
}

const EXPRESSIONS: [&str; 9] = [
    "attempts < 3",
    "attempts + 1",
    "!done && attempts * 2 <= limit",
    "status == 'timeout' || status == 'error'",
    "attempts >= 4 && attempts <= 6 && tool == 'read_file'",
    // Not a fast form: a method call.
    "tool.startsWith('read')",
    // Nor these: what the budgets check (string `+`, a comprehension, `map` built in place).
    "status + '/' + tool",
    "[1, 2, 3, 4, 5, 6, 7, 8].all(n, n < limit)",
    "[1, 2, 3, 4, 5, 6, 7, 8].map(n, n * attempts).size() == 8",
];

fn names() -> Names {
    Names::new(
        ["attempts", "done", "status"].map(String::from),
        ["limit", "tool"].map(String::from),
        HashMap::new(),
    )
}

fn compile(text: &str, names: &Names) -> Expression {
    Expression::compile(text, names).unwrap_or_else(|problems| panic!("{text}: {problems:?}"))
}

fn evaluate(bencher: Bencher, text: &str, full_cel: bool) {
    let names = names();
    let expression = compile(text, &names);
    let context = [Value::Int(5), Value::Bool(false), Value::string("error")];
    let inputs = [Value::Int(12), Value::string("read_file")];
    let scope = Scope {
        names: &names,
        context: &context,
        inputs: &inputs,
        event: None,
        is_active: &|_| false,
        clock: 0,
    };
    assert_eq!(
        expression.evaluate(&scope),
        expression.evaluate_with_cel(&scope),
        "{text}"
    );
    if full_cel {
        bencher.bench_local(|| divan::black_box(&expression).evaluate_with_cel(&scope));
    } else {
        bencher.bench_local(|| divan::black_box(&expression).evaluate(&scope));
    }
}

#[divan::bench(args = EXPRESSIONS)]
fn fast_path(bencher: Bencher, text: &str) {
    evaluate(bencher, text, false);
}

#[divan::bench(args = EXPRESSIONS)]
fn full_cel(bencher: Bencher, text: &str) {
    evaluate(bencher, text, true);
}

/// Parsing, name checking and building the fast form (load time, once per expression).
#[divan::bench(args = EXPRESSIONS)]
fn compile_expression(bencher: Bencher, text: &str) {
    let names = names();
    bencher.bench_local(|| compile(divan::black_box(text), &names));
}
