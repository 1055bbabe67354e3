//! The functions expressions can call, with the signature and one line that completion and
//! hover show (the engine's own, documented in docs/protocol-format.md, and CEL's common ones).

/// A function: its name, its signature, and what it gives.
pub struct Function {
    pub name: &'static str,
    pub signature: &'static str,
    pub documentation: &'static str,
}

const fn function(
    name: &'static str,
    signature: &'static str,
    documentation: &'static str,
) -> Function {
    Function {
        name,
        signature,
        documentation,
    }
}

/// Every function offered, engine functions first.
pub const FUNCTIONS: &[Function] = &[
    function(
        "In",
        "In(state: string) -> bool",
        "Whether the state with this id is active.",
    ),
    function(
        "now",
        "now() -> timestamp",
        "The run's clock (virtual under `--virtual-time`).",
    ),
    function(
        "now_ms",
        "now_ms() -> int",
        "The run's clock in Unix milliseconds.",
    ),
    function(
        "exists",
        "exists(path: string) -> bool",
        "Whether the path exists (within `read`).",
    ),
    function(
        "is_dir",
        "is_dir(path: string) -> bool",
        "Whether the path is a directory.",
    ),
    function(
        "json_valid",
        "json_valid(path: string) -> bool",
        "Whether the file parses as JSON.",
    ),
    function(
        "file_size",
        "file_size(path: string) -> int",
        "The file's size in bytes; `error.execution` when it is missing.",
    ),
    function(
        "command_exists",
        "command_exists(name: string) -> bool",
        "Whether `name` is an executable on `PATH` (or a path to one, within `read`).",
    ),
    function(
        "env",
        "env(name: string) -> string | null",
        "The environment variable's value, or `null`.",
    ),
    function(
        "merge",
        "merge(a: map | null, b: map | null) -> map",
        "`a` with `b`'s keys set over it (one level deep): `merge(verdicts, {r.path: r.verdict})`.",
    ),
    function(
        "size",
        "size(value: string | list | map) -> int",
        "The length of a string, list or map.",
    ),
    function(
        "has",
        "has(value.field) -> bool",
        "Whether a map has the field (a macro).",
    ),
    function("int", "int(value) -> int", "The value as an integer."),
    function(
        "double",
        "double(value) -> double",
        "The value as a floating-point number.",
    ),
    function("string", "string(value) -> string", "The value as text."),
    function("bool", "bool(value) -> bool", "The value as a boolean."),
    function("type", "type(value) -> type", "The value's type."),
    function(
        "matches",
        "matches(text: string, regex: string) -> bool",
        "Whether the text matches the regular expression.",
    ),
    function(
        "timestamp",
        "timestamp(text: string) -> timestamp",
        "An RFC 3339 time.",
    ),
    function(
        "duration",
        "duration(text: string) -> duration",
        "A duration such as `\"90s\"`.",
    ),
];

/// The function named `name`, if offered.
pub fn find(name: &str) -> Option<&'static Function> {
    FUNCTIONS.iter().find(|function| function.name == name)
}
