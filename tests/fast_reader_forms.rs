//! The fast reader's other forms (`null`, `has`, lists, maps, macros, `in`, escapes, `env`, `In`, names checked on their own) mean what CEL means: the harness of `fast_reader`.

use protocol_run::pipeline::compile::expression::Names;

use crate::fast_reader::{assert_same_as_cel, assert_same_as_cel_with, names};

#[test]
fn null_has_string_and_lists_are_read_directly_and_mean_what_cel_means() {
    for text in [
        "null",
        "diagnostics == null",
        "diagnostics != null && has(diagnostics.parent_exists)",
        "has(diagnostics.nested.k) ? diagnostics.nested.k : -1",
        "has(diagnostics.nosuch)",
        "has(errors.x)",
        "has(event.data.x)",
        "done ? null : 1",
        "string(attempts)",
        "string(timeout)",
        "'a file of ' + string(diagnostics.target_size) + ' bytes'",
        "string(failed_at)",
        "[]",
        "[1, attempts, 'a']",
        "errors + [tool]",
        "errors + [tool, [attempts]]",
        "size([1, 2]) == 2",
        "[attempts][0]",
        "[timeout, recheck_every]",
    ] {
        assert_same_as_cel(text, true);
    }
    for text in [
        // `has()` of anything but a selection: refused by CEL's macro, in its words.
        "has(errors)",
        "has(errors[0])",
        "[1,]",
        "string(now() - timeout)",
        "errors + [timeout + attempts]",
    ] {
        assert_same_as_cel(text, false);
    }
}

#[test]
fn macros_maps_and_in_are_read_directly_and_mean_what_cel_means() {
    for text in [
        "errors.map(e, e + '!')",
        "errors.filter(e, e == 'first')",
        "errors.exists(e, e == tool)",
        "errors.all(e, size(e) > 0)",
        "errors.exists_one(e, e == 'first')",
        "errors.existsOne(e, true)",
        "errors.map(attempts, attempts + 1)",
        "errors.map(timeout, timeout * 2)",
        "errors.map(e, e).size()",
        "errors.map(e, errors.map(f, e + f))",
        "errors.map(e, errors + errors)",
        "diagnostics.list.map(x, x)",
        "errors.filter(e, has(diagnostics.nested.k) && diagnostics.nested[e] == 1)",
        "{}",
        "{'a': 1, 'b': errors, 'c': {'d': tool}}",
        "errors.map(e, {'error': e, 'tool': tool})",
        "tool in ['grep', 'find']",
        "{'a': 1}['a']",
        "{'grep': 'GREP', 'find': 'FIND'}[tool]",
        "[1, 2][attempts]",
        "'parent_exists' in diagnostics",
        "attempts in errors",
        "tool in errors && done",
        "timeout in [timeout]",
    ] {
        assert_same_as_cel(text, true);
    }
    for text in [
        "errors.map(e, e, e)",
        "errors.map(1, e)",
        "errors.map(e.x, e)",
        "errors.map(e, nosuch)",
        "{'a': 1,}",
        "{1: 2}",
        "{?'a': 1}",
        "errors.sortBy(e, e)",
        "errors.map(e, e + timeout)",
    ] {
        assert_same_as_cel(text, false);
    }
}

#[test]
fn strings_with_simple_escapes_are_read_directly_and_mean_what_cel_means() {
    for text in [
        r"'a\nb'",
        r#""tab\there""#,
        r"'it\'s'",
        r#""q\"q""#,
        r"'back\\slash'",
        r"'\r\t' + tool",
        r"'   - Files modified:\n' + errors.map(f, '     - ' + f + '\n').join('')",
        "'é\\n'",
    ] {
        assert_same_as_cel(text, true);
    }
    for text in [
        r"'\x41'",
        r"'\u00e9'",
        r"'\101'",
        r"'\a'",
        r"'\q'",
        "'''a'''",
        r"r'\n'",
    ] {
        assert_same_as_cel(text, false);
    }
}

#[test]
fn env_is_read_directly_where_the_grant_lets_it_and_means_what_cel_means() {
    for text in [
        "env('HOME')",
        "env(tool)",
        "env('NO_SUCH_VARIABLE_HERE') == null",
    ] {
        assert_same_as_cel(text, true);
    }
    let granted = names().with_environment_grant(Some(vec!["HOME".to_string()]));
    assert_same_as_cel_with(&granted, "env('HOME')", true);
    // Refused by the load-time check, in its words: a variable the grant does not list, or
    // a name that is not a literal.
    for text in ["env('PATH')", "env(tool)", "env('HOME' + '')"] {
        assert_same_as_cel_with(&granted, text, false);
    }
}

#[test]
fn names_checked_on_their_own_are_read_directly_and_mean_what_cel_means() {
    // A block's parameter, checked before any `use` gives it a value.
    let mut with_parameter = names();
    with_parameter.leave_unbound(vec!["source".to_string()]);
    for text in [
        "source",
        "source + 'x'",
        "errors + [source + tool]",
        "source.field[0]",
    ] {
        assert_same_as_cel_with(&with_parameter, text, true);
    }
    assert_same_as_cel_with(&with_parameter, "nosuch + source", false);
    // A library's block: every name is the importing protocol's.
    let open = Names::open(&protocol_run::pipeline::extensions::Extensions::default());
    for text in ["anything + 1", "list.map(e, e.x)", "event.data.x == limit"] {
        assert_same_as_cel_with(&open, text, true);
    }
}

#[test]
fn in_state_is_read_directly_and_means_what_cel_means() {
    for text in [
        "In('idle')",
        "In(\"busy\") || attempts > 1",
        "!In('idle') && In('busy')",
        "In('idle') ? now() : failed_at",
    ] {
        assert_same_as_cel(text, true);
    }
    for text in ["In('nosuch')", "In(tool)", "In('idle', 'busy')"] {
        assert_same_as_cel(text, false);
    }
}
