//! Expressions and templates: CEL parsed and name-checked at load time, evaluated against a scope.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use cel::common::ast::{EntryExpr, Expr, IdedExpr};
use cel::extractors::Arguments;
use cel::{Context, ExecutionError, FunctionContext, Program};

use crate::pipeline::extensions::FunctionHandler;

use crate::base::diagnostic::did_you_mean;
use crate::base::event::Event;
use crate::base::value::Value;

/// The longest expression accepted, in bytes: longer ones are refused at load time.
pub const MAX_EXPRESSION_BYTES: usize = 4096;

/// What a bare name in an expression refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameBinding {
    Context(usize),
    Input(usize),
    /// The event being processed: `event.name`, `event.data`, ...
    Event,
}

/// Every name an expression may read, resolved once at compile time.
#[derive(Debug, Clone, Default)]
pub struct Names {
    bindings: HashMap<String, NameBinding>,
    /// State ids, for `In('id')` checks.
    states: HashMap<String, usize>,
    /// Functions the embedding program registered.
    host_functions: HostFunctions,
    /// When the environment is restricted (`permissions.env`, `--allow-env`): the variables
    /// `env()` may read.
    environment: Option<Vec<String>>,
    /// When reads are restricted: the capabilities the file functions (`exists`, `is_dir`,
    /// `file_size`, `json_valid`) check each path against.
    reads: Option<Arc<crate::effects::capabilities::Capabilities>>,
    /// While a block's actions compile for one `use`: its parameters, each standing for the
    /// argument the `use` gave (empty outside blocks, and at run time).
    parameters: Vec<super::parameters::Binding>,
    /// While a block is checked on its own: its parameters, names whose value only a `use`
    /// gives, accepted as names of unknown value.
    unbound_parameters: Vec<String>,
    /// While a library's block is checked on its own: any bare name and state is accepted,
    /// since the protocol that imports the library gives them.
    open: bool,
    /// The declared type of each input, by slot (empty when unknown): what the time check
    /// reads a bare input name as.
    input_types: Vec<crate::base::model::InputType>,
}

/// The embedding program's functions, by name.
#[derive(Clone, Default)]
struct HostFunctions(indexmap::IndexMap<String, Arc<FunctionHandler>>);

impl std::fmt::Debug for HostFunctions {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_list().entries(self.0.keys()).finish()
    }
}

impl Names {
    pub fn new(
        context: impl IntoIterator<Item = String>,
        inputs: impl IntoIterator<Item = String>,
        states: HashMap<String, usize>,
    ) -> Names {
        let mut bindings = HashMap::new();
        for (index, name) in inputs.into_iter().enumerate() {
            bindings.insert(name, NameBinding::Input(index));
        }
        for (index, name) in context.into_iter().enumerate() {
            bindings.insert(name, NameBinding::Context(index));
        }
        bindings.insert("event".into(), NameBinding::Event);
        Names {
            bindings,
            states,
            host_functions: HostFunctions::default(),
            environment: None,
            reads: None,
            parameters: Vec::new(),
            unbound_parameters: Vec::new(),
            open: false,
            input_types: Vec::new(),
        }
    }

    /// The names a library's block is checked against on its own: every name and state, none
    /// of them known, and the host's functions.
    pub fn open(extensions: &crate::pipeline::extensions::Extensions) -> Names {
        let mut names = Names::new([], [], HashMap::new()).with_host_functions(extensions);
        names.open = true;
        names
    }

    /// Whether any bare name is accepted (a library's block checked on its own).
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// Accepts `parameters` as names of unknown value for the expressions compiled next,
    /// returning those accepted before.
    pub fn leave_unbound(&mut self, parameters: Vec<String>) -> Vec<String> {
        std::mem::replace(&mut self.unbound_parameters, parameters)
    }

    /// Whether `name` is a parameter of the block being checked on its own.
    pub fn is_unbound_parameter(&self, name: &str) -> bool {
        self.unbound_parameters.iter().any(|known| known == name)
    }

    /// Binds a block's parameters for the expressions compiled next, returning those bound
    /// before (a block's actions see only its own parameters).
    pub fn bind_parameters(
        &mut self,
        parameters: Vec<super::parameters::Binding>,
    ) -> Vec<super::parameters::Binding> {
        std::mem::replace(&mut self.parameters, parameters)
    }

    /// The parameters bound now.
    pub fn parameters(&self) -> &[super::parameters::Binding] {
        &self.parameters
    }

    /// The same names, with the file functions limited to what `capabilities` may read.
    pub fn with_read_grant(
        mut self,
        capabilities: &crate::effects::capabilities::Capabilities,
    ) -> Names {
        self.reads = capabilities
            .restricts_reads()
            .then(|| Arc::new(capabilities.clone()));
        self
    }

    /// The same names, with `env()` limited to the variables `granted` lists (when `Some`).
    pub fn with_environment_grant(mut self, granted: Option<Vec<String>>) -> Names {
        self.environment = granted;
        self
    }

    /// The same names, plus the functions the host registered.
    pub fn with_host_functions(
        mut self,
        extensions: &crate::pipeline::extensions::Extensions,
    ) -> Names {
        self.host_functions = HostFunctions(extensions.functions.clone());
        self
    }

    /// The same names, with the declared type of each input (by slot).
    pub fn with_input_types(mut self, types: Vec<crate::base::model::InputType>) -> Names {
        self.input_types = types;
        self
    }

    /// The declared type of the input a bare name reads, if it reads one.
    pub fn input_type(&self, name: &str) -> Option<crate::base::model::InputType> {
        self.bound_input_type(self.binding(name)?)
    }

    /// The declared type of the input `binding` reads, if it reads one.
    pub fn bound_input_type(&self, binding: NameBinding) -> Option<crate::base::model::InputType> {
        match binding {
            NameBinding::Input(slot) => self.input_types.get(slot).copied(),
            _ => None,
        }
    }

    /// Whether `env(…)` passes the load-time check with this argument (`Some` for a literal
    /// name): always where reading the environment is not restricted, otherwise only a name
    /// the grant lists (as `NameChecker::check_environment_read` decides).
    pub(super) fn may_read_environment(&self, literal: Option<&str>) -> bool {
        match &self.environment {
            None => true,
            Some(granted) => {
                literal.is_some_and(|variable| granted.iter().any(|name| name == variable))
            }
        }
    }

    pub fn binding(&self, name: &str) -> Option<NameBinding> {
        self.bindings.get(name).copied()
    }

    pub fn state(&self, id: &str) -> Option<usize> {
        self.states.get(id).copied()
    }
}

/// What an expression can read while it is evaluated.
pub struct Scope<'a> {
    pub names: &'a Names,
    pub context: &'a [Value],
    pub inputs: &'a [Value],
    /// The current event (`event.name`, `event.type`: SCXML's, `event.origin`: who made it,
    /// `event.sendid`, `event.data`).
    pub event: Option<&'a Event>,
    /// Whether a state (by index) is active, for `In('id')`.
    pub is_active: &'a (dyn Fn(usize) -> bool + Sync),
    /// The host's clock in Unix milliseconds (virtual under virtual time), for `now()`.
    pub clock: u64,
}

impl Scope<'_> {
    fn event_value(&self) -> Value {
        let Some(event) = self.event else {
            return Value::Null;
        };
        let mut map = indexmap::IndexMap::new();
        map.insert(Arc::from("name"), Value::String(event.name.clone()));
        map.insert(Arc::from("type"), Value::string(event.origin.name()));
        map.insert(Arc::from("origin"), event.origin_value());
        map.insert(
            Arc::from("invokeid"),
            event.invoke_id.clone().map_or(Value::Null, Value::String),
        );
        map.insert(
            Arc::from("sendid"),
            event.send_id.clone().map_or(Value::Null, Value::String),
        );
        map.insert(Arc::from("data"), event.data.clone());
        Value::Map(Arc::new(map))
    }

    /// The value a bare name refers to.
    pub fn read(&self, binding: NameBinding) -> Value {
        match binding {
            NameBinding::Context(slot) => self.context.get(slot).cloned().unwrap_or_default(),
            NameBinding::Input(slot) => self.inputs.get(slot).cloned().unwrap_or_default(),
            NameBinding::Event => self.event_value(),
        }
    }
}

/// Prefix of the hidden variable that `In('id')` reads through the resolver.
const IN_STATE_PREFIX: &str = "@in:";

impl cel::context::VariableResolver for Scope<'_> {
    fn resolve<'b>(&'b self, variable: &str) -> Option<cel::common::value::CowVal<'b, 'b>> {
        let value = if variable == super::functions::CLOCK_VARIABLE {
            cel::Value::Int(i64::try_from(self.clock).unwrap_or(i64::MAX))
        } else if let Some(state) = variable.strip_prefix(IN_STATE_PREFIX) {
            let index = self.names.state(state)?;
            cel::Value::Bool((self.is_active)(index))
        } else {
            let binding = self.names.binding(variable)?;
            // A string is lent to CEL, not copied: a guard reading a large value every
            // microstep would otherwise copy it each time.
            let slot = match binding {
                NameBinding::Context(slot) => self.context.get(slot),
                NameBinding::Input(slot) => self.inputs.get(slot),
                NameBinding::Event => None,
            };
            if let Some(Value::String(text)) = slot {
                let borrowed = cel::common::types::CelString::from(&**text);
                return Some(cel::common::value::CowVal::Owned(Box::new(borrowed)));
            }
            self.read(binding).to_cel()
        };
        let boxed: Box<dyn cel::common::value::Val> = value.try_into().ok()?;
        Some(cel::common::value::CowVal::Owned(boxed))
    }
}

/// A failure while evaluating; the interpreter turns it into `error.execution`.
#[derive(Debug, Clone, PartialEq)]
pub struct EvaluationError {
    pub expression: Arc<str>,
    pub message: String,
}

impl std::fmt::Display for EvaluationError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "`{}`: {}", self.expression, self.message)
    }
}

/// A problem found while compiling an expression, at a character offset inside its text.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpressionProblem {
    pub offset: usize,
    pub message: String,
    pub help: Option<String>,
}

/// A compiled CEL expression.
#[derive(Debug)]
pub struct Expression {
    pub text: Arc<str>,
    /// CEL's program: parsed at compile time, or on first use for an expression read
    /// directly by `fast_syntax` (most of them never need it).
    program: OnceLock<Program>,
    /// The program's expression rewritten to run under budgets, made on first full evaluation.
    bounded: OnceLock<Box<IdedExpr>>,
    uses_engine_functions: bool,
    /// The host functions it calls, registered on each full evaluation (boxed: most
    /// expressions call none).
    host_functions: Option<Box<HostFunctions>>,
    /// The allocation-free form, when the expression has one.
    fast: Option<super::fast::Fast>,
}

/// Whether expressions already have a global function of this name (CEL's, an extension's or
/// the engine's), which a host function may not shadow.
pub(crate) fn is_builtin_function(name: &str) -> bool {
    name == "In"
        || KNOWN_FUNCTIONS.contains(&name)
        || super::functions::ENGINE_FUNCTIONS.contains(&name)
        || NAMESPACES.iter().any(|(namespace, _)| *namespace == name)
}

/// Global functions that need no declaration: CEL's standard ones and the engine's own.
const KNOWN_FUNCTIONS: &[&str] = &[
    "size",
    "int",
    "uint",
    "double",
    "string",
    "bytes",
    "bool",
    "type",
    "dyn",
    "has",
    "matches",
    "In",
    "timestamp",
    "duration",
    "merge",
];

/// What to write instead of a function CEL defines elsewhere but this engine does not have.
fn missing_function_help(name: &str) -> Option<String> {
    Some(match name {
        "max" => "write `math.greatest(a, b)`".into(),
        "min" => "write `math.least(a, b)`".into(),
        "contains" | "startsWith" | "endsWith" => format!("call it on the text: `text.{name}(x)`"),
        _ => return None,
    })
}

/// Methods a protocol may call on a value (`text.startsWith('x')`, `names.join(', ')`): the
/// standard library's and those of the strings and lists extensions.
pub(super) const KNOWN_METHODS: &[&str] = &[
    "size",
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "charAt",
    "indexOf",
    "lastIndexOf",
    "join",
    "lowerAscii",
    "upperAscii",
    "trim",
    "replace",
    "split",
    "substring",
    "format",
    "reverse",
    "distinct",
    "flatten",
    "sort",
    "slice",
    // Timestamps' and durations' parts (`t.getHours()`, `d.getSeconds()`); a timestamp's take
    // an optional time zone, `t.getHours('Europe/Paris')`.
    "getFullYear",
    "getMonth",
    "getDayOfYear",
    "getDayOfMonth",
    "getDate",
    "getDayOfWeek",
    "getHours",
    "getMinutes",
    "getSeconds",
    "getMilliseconds",
];

/// Namespaced functions of the extensions, called like methods on their namespace. `lists.range`
/// is left out: it builds a list as long as its argument, an unbounded cost.
const NAMESPACES: &[(&str, &[&str])] = &[
    ("strings", &["quote"]),
    (
        "math",
        &[
            "abs",
            "ceil",
            "floor",
            "round",
            "trunc",
            "sign",
            "sqrt",
            "isFinite",
            "isInf",
            "isNaN",
            "bitAnd",
            "bitOr",
            "bitXor",
            "bitNot",
            "bitShiftLeft",
            "bitShiftRight",
            "greatest",
            "least",
        ],
    ),
];

/// CEL's environment, built on first use (`environment`): `validate` of a file whose every
/// expression the fast reader reads never builds it.
static ENVIRONMENT: OnceLock<Arc<cel::Env>> = OnceLock::new();

/// How many texts this process has parsed with CEL's parser (compiling, or a directly read
/// expression's first full evaluation): the costly path the fast reader exists to avoid.
static CEL_PARSES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The variable that makes the binary report, on exit, which expressions went through CEL's
/// parser (`report_cel_use`): how tests and profiles see that the fast reader covered a file.
pub const CEL_USE_VARIABLE: &str = "PROTOCOL_RUN_REPORT_CEL";

/// The texts parsed with CEL's parser, kept only when `CEL_USE_VARIABLE` is set.
static CEL_PARSED_TEXTS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Whether `CEL_USE_VARIABLE` is set (read once).
fn reports_cel_use() -> bool {
    static REPORTS: OnceLock<bool> = OnceLock::new();
    *REPORTS.get_or_init(|| std::env::var_os(CEL_USE_VARIABLE).is_some())
}

/// Parses `text` with CEL's parser, counted.
fn parse_with_cel(text: &str) -> Result<Program, cel::ParseErrors> {
    CEL_PARSES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    if reports_cel_use()
        && let Ok(mut texts) = CEL_PARSED_TEXTS.lock()
    {
        texts.push(text.to_string());
    }
    environment().compile(text)
}

/// How many texts this process has parsed with CEL's parser so far.
pub fn cel_parses() -> usize {
    CEL_PARSES.load(std::sync::atomic::Ordering::Relaxed)
}

/// Whether this process has built CEL's environment.
pub fn cel_environment_built() -> bool {
    ENVIRONMENT.get().is_some()
}

/// When `CEL_USE_VARIABLE` is set, what this process asked of CEL, on stderr: the number of
/// texts parsed with CEL's parser, each of them, and whether the environment was built.
pub fn report_cel_use() {
    if !reports_cel_use() {
        return;
    }
    let texts = CEL_PARSED_TEXTS
        .lock()
        .map(|texts| texts.clone())
        .unwrap_or_default();
    eprintln!(
        "cel: {} parsed with CEL's parser, environment {}",
        cel_parses(),
        if cel_environment_built() {
            "built"
        } else {
            "not built"
        }
    );
    for text in texts {
        eprintln!("cel parsed: {text}");
    }
}

/// CEL's standard library with the strings, lists and math extensions (`join`, `split`,
/// `sort`, `math.abs`, ...), built once per process.
fn environment() -> &'static Arc<cel::Env> {
    ENVIRONMENT.get_or_init(|| {
        let mut environment = cel::Env::stdlib();
        // Registration fails only on a duplicate name, which these extensions do not have;
        // an extension that did not register leaves its functions reported as undefined.
        let _ = cel::extensions::strings(&mut environment);
        let _ = cel::extensions::lists(&mut environment);
        let _ = cel::extensions::math(&mut environment);
        // Likewise: the bounded functions' names start with `@`, which nothing else uses.
        let _ = super::bounded::register(&mut environment);
        let _ = super::time_functions::register(&mut environment);
        let _ = super::duration_inputs::register(&mut environment);
        let _ = super::map_functions::register(&mut environment);
        Arc::new(environment)
    })
}

impl Expression {
    /// Parses `text` and checks that every name and function it uses exists. Inside a block,
    /// its parameters are replaced by their arguments first, and problems are reported where
    /// the original text has them.
    pub fn compile(text: &str, names: &Names) -> Result<Expression, Vec<ExpressionProblem>> {
        if names.parameters.is_empty() {
            return Self::compile_substituted(text, names);
        }
        let substituted = super::parameters::substitute(text, &names.parameters);
        if substituted.text.len() > MAX_EXPRESSION_BYTES && text.len() <= MAX_EXPRESSION_BYTES {
            return Err(vec![ExpressionProblem {
                offset: 0,
                message: format!(
                    "with the block's parameters replaced by their arguments, this expression is \
                     {} bytes, longer than the limit of {MAX_EXPRESSION_BYTES}",
                    substituted.text.len()
                ),
                help: Some(
                    "give the parameter a shorter argument: assign the long expression to a \
                     context variable first and pass its name"
                        .into(),
                ),
            }]);
        }
        Self::compile_substituted(&substituted.text, names).map_err(|problems| {
            problems
                .into_iter()
                .map(|problem| ExpressionProblem {
                    offset: substituted.original_offset(problem.offset),
                    ..problem
                })
                .collect()
        })
    }

    /// Parses `text`, in which no parameter is left, and checks every name and function.
    fn compile_substituted(
        text: &str,
        names: &Names,
    ) -> Result<Expression, Vec<ExpressionProblem>> {
        if text.len() > MAX_EXPRESSION_BYTES {
            return Err(vec![ExpressionProblem {
                offset: 0,
                message: format!(
                    "expression is {} bytes, longer than the limit of {MAX_EXPRESSION_BYTES}",
                    text.len()
                ),
                help: Some("move the logic into several assignments or guards".into()),
            }]);
        }
        if text.trim().is_empty() {
            return Err(vec![ExpressionProblem {
                offset: 0,
                message: "empty expression".into(),
                help: Some("write a CEL expression, e.g. `attempts < 3`".into()),
            }]);
        }
        // A form the time check would refuse or convert (a `duration` input beside a time
        // value) is left to CEL's parse, which the check reads.
        if let Some(fast) = super::fast_syntax::parse(text, names)
            && super::fast_time_check::leaves_unchanged(&fast, names)
        {
            return Ok(Expression {
                text: Arc::from(text),
                program: OnceLock::new(),
                bounded: OnceLock::new(),
                uses_engine_functions: fast.uses_engine_functions(),
                host_functions: None,
                fast: Some(fast),
            });
        }
        Self::compile_with_cel(text, names)
    }

    /// Compiles through CEL's parser only, even when the fast reader could read the text: what
    /// `compile` falls back to, and what tests compare the fast reader with.
    pub fn compile_with_cel(
        text: &str,
        names: &Names,
    ) -> Result<Expression, Vec<ExpressionProblem>> {
        let program = parse_with_cel(text).map_err(|errors| {
            errors
                .errors
                .iter()
                .map(|error| ExpressionProblem {
                    offset: line_column_to_offset(text, error.pos),
                    message: format!("invalid expression: {}", shorten_parse_message(&error.msg)),
                    help: None,
                })
                .collect::<Vec<_>>()
        })?;
        let mut checker = NameChecker {
            names,
            program: &program,
            text,
            bound: Vec::new(),
            problems: Vec::new(),
            uses_engine_functions: false,
            host_functions: HostFunctions::default(),
        };
        checker.visit(program.expression());
        let offset = |node: &IdedExpr| checker.offset(node);
        let time = super::time_check::check(program.expression(), &offset, names);
        checker.problems.extend(time.problems);
        let uses_engine_functions = checker.uses_engine_functions;
        let host_functions = std::mem::take(&mut checker.host_functions);
        let host_functions = (!host_functions.0.is_empty()).then(|| Box::new(host_functions));
        if !checker.problems.is_empty() {
            return Err(checker.problems);
        }
        // A `duration` input beside a time value is read as a duration: the expression
        // evaluated is then not the text's own, so it is made now and has no fast form.
        let (fast, bounded) = if time.read_as_durations.is_empty() {
            (
                super::fast::Fast::compile(program.expression(), names),
                OnceLock::new(),
            )
        } else {
            let converted = super::duration_inputs::read_as_durations(
                program.expression(),
                &time.read_as_durations,
            );
            (
                None,
                OnceLock::from(Box::new(super::bounded::rewrite(&converted))),
            )
        };
        Ok(Expression {
            text: Arc::from(text),
            program: OnceLock::from(program),
            bounded,
            uses_engine_functions,
            host_functions,
            fast,
        })
    }

    /// Evaluates against `scope`.
    #[inline]
    pub fn evaluate(&self, scope: &Scope) -> Result<Value, EvaluationError> {
        if let Some(value) = self.fast.as_ref().and_then(|fast| fast.evaluate(scope)) {
            return Ok(value);
        }
        self.evaluate_with_cel(scope)
    }

    /// The int this gives over the context alone, when the fast path computes it as a raw
    /// `i64` (`attempts + 1`); None means: call `evaluate`.
    #[inline(always)]
    pub fn integer_over(&self, context: &[Value]) -> Option<i64> {
        self.fast.as_ref()?.integer(context)
    }

    /// The raw int form `integer_over` computes, if the expression has one.
    pub fn integer_form(&self) -> Option<super::fast::IntegerForm> {
        self.fast.as_ref()?.integer_form()
    }

    /// This guard's outcome over the context alone, when the fast path computes it as a raw
    /// `bool` (`attempts < 3`); None means: call `evaluate_condition`.
    #[inline(always)]
    pub fn condition_over(&self, context: &[Value]) -> Option<bool> {
        self.fast.as_ref()?.condition(context)
    }

    /// Whether CEL's parser has not been needed (yet): the text was read by the fast reader
    /// and nothing has evaluated it with CEL.
    pub fn is_read_directly(&self) -> bool {
        self.program.get().is_none()
    }

    /// Whether the expression has a fast form.
    pub fn has_fast_path(&self) -> bool {
        self.fast.is_some()
    }

    /// Evaluates with the full CEL interpreter, ignoring the fast path.
    pub fn evaluate_with_cel(&self, scope: &Scope) -> Result<Value, EvaluationError> {
        let mut context = Context::with_env(environment().clone());
        if self.uses_engine_functions {
            context
                .add_function("In", in_state)
                .and_then(|()| super::functions::register(&mut context, scope.names.reads.clone()))
                .map_err(|error| self.error(error.to_string()))?;
        }
        for (name, handler) in self
            .host_functions
            .iter()
            .flat_map(|functions| &functions.0)
        {
            let handler = handler.clone();
            let function_name = name.clone();
            context
                .add_function(name, move |Arguments(arguments): Arguments| {
                    call_host_function(&function_name, &*handler, &arguments)
                })
                .map_err(|error| self.error(error.to_string()))?;
        }
        context.set_variable_resolver(scope);
        let bounded = self.bounded()?;
        let limit = super::budget::begin_evaluation().max_value_bytes;
        let result = cel::Value::resolve_val(bounded, &context).and_then(|value| {
            let bytes = super::bounded::measure(value.as_ref(), limit.saturating_add(1));
            super::budget::check_value(bytes)
                .map_err(|why| ExecutionError::function_error("budget", why))?;
            cel::Value::try_from(value.as_ref())
        });
        // A budget that ran out decides the outcome: what the cut-short evaluation computed
        // (or the error it met on the way out) is not the answer.
        if let Some(why) = super::budget::end_evaluation() {
            return Err(self.error(why.to_string()));
        }
        let result = result.map_err(|error| self.error(describe_execution_error(&error)))?;
        Value::from_cel(&result)
            .ok_or_else(|| self.error(format!("the result {result:?} has no JSON form")))
    }

    /// The expression as evaluated under budgets (see `bounded::rewrite`), made on first use.
    fn bounded(&self) -> Result<&IdedExpr, EvaluationError> {
        if let Some(bounded) = self.bounded.get() {
            return Ok(bounded);
        }
        let rewritten = Box::new(super::bounded::rewrite(self.program()?.expression()));
        Ok(self.bounded.get_or_init(|| rewritten))
    }

    /// Evaluates a guard: the result must be a boolean.
    #[inline]
    pub fn evaluate_condition(&self, scope: &Scope) -> Result<bool, EvaluationError> {
        match self.evaluate(scope)? {
            Value::Bool(flag) => Ok(flag),
            other => Err(self.error(format!(
                "a condition must be a bool, but this gave {} `{other}`",
                other.type_name()
            ))),
        }
    }

    /// CEL's program, parsed now if the expression was read directly.
    fn program(&self) -> Result<&Program, EvaluationError> {
        if let Some(program) = self.program.get() {
            return Ok(program);
        }
        // The fast reader only accepts what CEL reads the same way, so this does not fail;
        // if it did, the evaluation fails with CEL's words instead of the process.
        let program = parse_with_cel(&self.text)
            .map_err(|errors| self.error(format!("CEL cannot parse this expression: {errors}")))?;
        Ok(self.program.get_or_init(|| program))
    }

    fn error(&self, message: String) -> EvaluationError {
        EvaluationError {
            expression: self.text.clone(),
            message,
        }
    }
}

/// Calls a host function with CEL's evaluated arguments, converting both ways.
fn call_host_function(
    name: &str,
    handler: &FunctionHandler,
    arguments: &[cel::Value],
) -> Result<cel::Value, ExecutionError> {
    let values = arguments
        .iter()
        .map(|argument| {
            Value::from_cel(argument).ok_or_else(|| {
                ExecutionError::function_error(
                    name,
                    format!("an argument {argument:?} has no JSON form"),
                )
            })
        })
        .collect::<Result<Vec<Value>, _>>()?;
    handler(&values)
        .map(|value| value.to_cel())
        .map_err(|message| ExecutionError::function_error(name, message))
}

/// `In('id')`: reads the hidden `@in:id` variable, which the scope's resolver answers.
fn in_state(function: &FunctionContext, state: Arc<String>) -> cel::ResolveResult {
    let variable = format!("{IN_STATE_PREFIX}{state}");
    match function.ptx.get_variable(&variable) {
        Some(value) => cel::Value::try_from(value.as_ref()),
        None => Err(ExecutionError::function_error(
            "In",
            format!("no state `{state}`"),
        )),
    }
}

fn describe_execution_error(error: &ExecutionError) -> String {
    match error {
        ExecutionError::UndeclaredReference(name) => format!("`{name}` is not defined"),
        ExecutionError::NoSuchKey(key) => format!("no key `{key}`"),
        ExecutionError::UnsupportedBinaryOperator(operator, left, right) => {
            super::time_functions::number_subtracted(operator, left, right)
                .unwrap_or_else(|| error.to_string())
        }
        ExecutionError::Overflow(operation, left, right) => {
            let shown = |value: &cel::Value| {
                Value::from_cel(value)
                    .map_or_else(|| format!("{value:?}"), |value| value.to_string())
            };
            let symbol = match *operation {
                "add" => "+",
                "sub" => "-",
                "mul" => "*",
                other => other,
            };
            let is_time = |value: &cel::Value| {
                matches!(value, cel::Value::Timestamp(_) | cel::Value::Duration(_))
            };
            let range = if is_time(left) || is_time(right) {
                format!(
                    "timestamps run from {} to {}, durations about 292 years either way",
                    crate::base::time::MIN_TIMESTAMP_TEXT,
                    crate::base::time::MAX_TIMESTAMP_TEXT
                )
            } else {
                "an int is 64 bits".to_string()
            };
            format!(
                "`{} {symbol} {}` overflows: {range}",
                shown(left),
                shown(right)
            )
        }
        other => other.to_string(),
    }
}

/// The CEL parser lists every token it expected; a person needs the gist.
fn shorten_parse_message(message: &str) -> String {
    let message = message.trim_start_matches("Syntax error: ");
    if message.contains("'<EOF>'") {
        return "the expression ends too early".into();
    }
    match message.split_once(" expecting ") {
        Some((head, _)) => head.to_string(),
        None => message.to_string(),
    }
}

/// Converts the parser's (1-based line, 1-based column) into a character offset, at most the
/// end of the text (where "ends too early" points).
fn line_column_to_offset(text: &str, (line, column): (isize, isize)) -> usize {
    let line = usize::try_from(line).unwrap_or(1).max(1);
    let column = usize::try_from(column).unwrap_or(0).saturating_sub(1);
    let before: usize = text
        .split('\n')
        .take(line - 1)
        .map(|l| l.chars().count() + 1)
        .sum();
    (before + column).min(text.chars().count())
}

/// Walks the AST and reports every name that is neither bound by a macro nor known.
struct NameChecker<'a> {
    names: &'a Names,
    program: &'a Program,
    /// The expression's text, for the places of names CEL does not record.
    text: &'a str,
    bound: Vec<&'a str>,
    problems: Vec<ExpressionProblem>,
    uses_engine_functions: bool,
    host_functions: HostFunctions,
}

impl<'a> NameChecker<'a> {
    fn offset(&self, expression: &IdedExpr) -> usize {
        self.program
            .source_info()
            .offset_for(expression.id)
            .map_or(0, |(start, _)| start as usize)
    }

    /// Where the function or method name of the call `expression` starts: CEL places a call
    /// at its `(`, and the name is what an author misspelled and an editor should underline.
    fn name_offset(&self, expression: &IdedExpr, name: &str) -> usize {
        let parenthesis = self.offset(expression);
        let before = self.text.get(..parenthesis).unwrap_or_default().trim_end();
        before.strip_suffix(name).map_or(parenthesis, str::len)
    }

    fn visit(&mut self, expression: &'a IdedExpr) {
        match &expression.expr {
            Expr::Ident(name) => self.check_name(name, expression),
            Expr::Call(call) => {
                if call.target.is_none() && !is_operator(&call.func_name) {
                    self.check_function(&call.func_name, &call.args, expression);
                }
                if let Some(target) = &call.target {
                    if let Expr::Ident(namespace) = &target.expr
                        && let Some((_, functions)) =
                            NAMESPACES.iter().find(|(name, _)| name == namespace)
                        && self.names.binding(namespace).is_none()
                    {
                        self.check_namespaced(namespace, functions, &call.func_name, target);
                    } else {
                        self.check_method(&call.func_name, expression);
                        self.visit(target);
                    }
                }
                call.args.iter().for_each(|argument| self.visit(argument));
            }
            Expr::Comprehension(comprehension) => {
                self.visit(&comprehension.iter_range);
                self.visit(&comprehension.accu_init);
                let depth = self.bound.len();
                self.bound.push(&comprehension.iter_var);
                if let Some(second) = &comprehension.iter_var2 {
                    self.bound.push(second);
                }
                self.bound.push(&comprehension.accu_var);
                self.visit(&comprehension.loop_cond);
                self.visit(&comprehension.loop_step);
                self.visit(&comprehension.result);
                self.bound.truncate(depth);
            }
            Expr::List(list) => list.elements.iter().for_each(|element| self.visit(element)),
            Expr::Map(map) => {
                for entry in &map.entries {
                    match &entry.expr {
                        EntryExpr::StructField(field) => self.visit(&field.value),
                        EntryExpr::MapEntry(entry) => {
                            self.visit(&entry.key);
                            self.visit(&entry.value);
                        }
                    }
                }
            }
            Expr::Select(select) => self.visit(&select.operand),
            Expr::Struct(structure) => {
                for entry in &structure.entries {
                    if let EntryExpr::StructField(field) = &entry.expr {
                        self.visit(&field.value);
                    }
                }
            }
            Expr::Literal(_) | Expr::Unspecified => {}
        }
    }

    fn check_name(&mut self, name: &str, expression: &IdedExpr) {
        if name.starts_with('@')
            || self.bound.contains(&name)
            || self.names.binding(name).is_some()
            || self.names.open
            || self.names.is_unbound_parameter(name)
        {
            return;
        }
        let candidates: Vec<&str> = self
            .names
            .bindings
            .keys()
            .map(String::as_str)
            .chain(self.bound.iter().copied())
            .collect();
        self.problems.push(ExpressionProblem {
            offset: self.offset(expression),
            message: format!("unknown name `{name}`"),
            help: did_you_mean(name, candidates).or_else(|| {
                Some("expressions can read inputs, context variables and `event`".into())
            }),
        });
    }

    fn check_method(&mut self, name: &str, expression: &IdedExpr) {
        if is_operator(name) || KNOWN_METHODS.contains(&name) {
            return;
        }
        self.problems.push(ExpressionProblem {
            offset: self.name_offset(expression, name),
            message: format!("unknown method `{name}`"),
            help: did_you_mean(name, KNOWN_METHODS.iter().copied())
                .or_else(|| Some(format!("the methods are {}", KNOWN_METHODS.join(", ")))),
        });
    }

    fn check_namespaced(
        &mut self,
        namespace: &str,
        functions: &[&str],
        name: &str,
        namespace_expression: &IdedExpr,
    ) {
        // Macros such as `math.greatest` expand to internal `@` functions.
        if functions.contains(&name) || is_operator(name) {
            return;
        }
        self.problems.push(ExpressionProblem {
            offset: self.offset(namespace_expression),
            message: format!("unknown function `{namespace}.{name}`"),
            help: did_you_mean(name, functions.iter().copied()),
        });
    }

    /// `env()` reads only what the environment grant lists, when there is one; the name must
    /// then be a literal, so the grant is checked here, before anything runs.
    fn check_environment_read(&mut self, arguments: &[IdedExpr], expression: &IdedExpr) {
        let Some(granted) = &self.names.environment else {
            return;
        };
        let problem = match arguments {
            [
                IdedExpr {
                    expr: Expr::Literal(cel::common::ast::LiteralValue::String(variable)),
                    ..
                },
            ] => {
                let variable: &str = variable.as_ref();
                if granted.iter().any(|name| name == variable) {
                    return;
                }
                ExpressionProblem {
                    offset: self.offset(expression),
                    message: format!(
                        "`env('{variable}')` reads a variable `permissions.env` does not grant"
                    ),
                    help: Some(format!(
                        "add `{variable}` to `permissions.env` if the protocol needs it"
                    )),
                }
            }
            _ => ExpressionProblem {
                offset: self.offset(expression),
                message: "with `permissions.env` declared, `env()` takes a literal name".into(),
                help: Some(
                    "write the variable's name, e.g. `env('HOME')`, so the grant can be checked"
                        .into(),
                ),
            },
        };
        self.problems.push(problem);
    }

    fn check_function(&mut self, name: &str, arguments: &[IdedExpr], expression: &IdedExpr) {
        if name == "In" {
            self.uses_engine_functions = true;
            if let [
                argument @ IdedExpr {
                    expr: Expr::Literal(cel::common::ast::LiteralValue::String(state)),
                    ..
                },
            ] = arguments
            {
                let state: &str = state.as_ref();
                if self.names.state(state).is_none() && !self.names.open {
                    self.problems.push(ExpressionProblem {
                        // At the misspelled id, inside its quotes, not at the call's `(`.
                        offset: self.offset(argument) + 1,
                        message: format!("unknown state `{state}` in `In`"),
                        help: did_you_mean(state, self.names.states.keys().map(String::as_str)),
                    });
                }
            }
            return;
        }
        if super::functions::ENGINE_FUNCTIONS.contains(&name) {
            self.uses_engine_functions = true;
            if name == "env" {
                self.check_environment_read(arguments, expression);
            }
            return;
        }
        if name == "merge" && arguments.len() != 2 {
            self.problems.push(ExpressionProblem {
                offset: self.name_offset(expression, name),
                message: format!(
                    "`merge` takes two maps; this call gives it {} argument(s)",
                    arguments.len()
                ),
                help: Some(
                    "write `merge(verdicts, {r.path: r.verdict})`: the keys of the second set \
                     over the first's"
                        .into(),
                ),
            });
            return;
        }
        if let Some(handler) = self.names.host_functions.0.get(name) {
            self.host_functions
                .0
                .insert(name.to_string(), handler.clone());
            return;
        }
        // A namespaced macro's expansion, e.g. `math.greatest(...)` → `math.@max(...)`.
        if let Some((namespace, function)) = name.split_once('.')
            && is_operator(function)
            && NAMESPACES.iter().any(|(known, _)| *known == namespace)
        {
            return;
        }
        if !KNOWN_FUNCTIONS.contains(&name) {
            self.problems.push(ExpressionProblem {
                offset: self.name_offset(expression, name),
                message: format!("unknown function `{name}`"),
                help: missing_function_help(name).or_else(|| {
                    did_you_mean(
                        name,
                        KNOWN_FUNCTIONS
                            .iter()
                            .chain(super::functions::ENGINE_FUNCTIONS.iter())
                            .copied()
                            .chain(self.names.host_functions.0.keys().map(String::as_str)),
                    )
                }),
            });
        }
    }
}

/// CEL operators are calls named like `_+_`, `!_`, `-_` or `@in`.
fn is_operator(name: &str) -> bool {
    name.starts_with('_') || name.starts_with('!') || name.starts_with('-') || name.starts_with('@')
}

/// A string with `${expression}` parts; `$${` writes a literal `${`.
#[derive(Debug)]
pub struct Template {
    parts: Vec<TemplatePart>,
}

#[derive(Debug)]
enum TemplatePart {
    Text(String),
    Expression(Expression),
}

impl Template {
    /// Compiles a template; problems carry offsets into `text`.
    pub fn compile(text: &str, names: &Names) -> Result<Template, Vec<ExpressionProblem>> {
        let mut parts = Vec::new();
        let mut problems = Vec::new();
        let mut literal = String::new();
        let characters: Vec<char> = text.chars().collect();
        let mut index = 0;
        while index < characters.len() {
            let starts_escape = characters[index] == '$'
                && characters.get(index + 1) == Some(&'$')
                && characters.get(index + 2) == Some(&'{');
            let starts_expression =
                characters[index] == '$' && characters.get(index + 1) == Some(&'{');
            if starts_escape {
                literal.push_str("${");
                index += 3;
            } else if starts_expression {
                let start = index + 2;
                let Some(end) = closing_brace(&characters, start) else {
                    problems.push(ExpressionProblem {
                        offset: byte_offset(&characters, index),
                        message: "`${` is not closed by `}`".into(),
                        help: Some(
                            "close the expression with `}`, or write `$${` for a literal `${`"
                                .into(),
                        ),
                    });
                    break;
                };
                if !literal.is_empty() {
                    parts.push(TemplatePart::Text(std::mem::take(&mut literal)));
                }
                let source: String = characters[start..end].iter().collect();
                match Expression::compile(source.trim(), names) {
                    Ok(expression) => parts.push(TemplatePart::Expression(expression)),
                    Err(inner) => {
                        problems.extend(inner.into_iter().map(|problem| ExpressionProblem {
                            offset: byte_offset(&characters, start)
                                + leading_spaces(&source)
                                + problem.offset,
                            help: Some(with_literal_hint(problem.help)),
                            message: problem.message,
                        }))
                    }
                }
                index = end + 1;
            } else {
                literal.push(characters[index]);
                index += 1;
            }
        }
        if !literal.is_empty() {
            parts.push(TemplatePart::Text(literal));
        }
        if problems.is_empty() {
            Ok(Template { parts })
        } else {
            Err(problems)
        }
    }

    /// Whether the template is exactly one `${expression}` and nothing else.
    pub(crate) fn single_expression(self) -> Result<Expression, Template> {
        match <[TemplatePart; 1]>::try_from(self.parts) {
            Ok([TemplatePart::Expression(expression)]) => Ok(expression),
            Ok([text]) => Err(Template { parts: vec![text] }),
            Err(parts) => Err(Template { parts }),
        }
    }

    /// The template as written (`${...}` around each expression), for diagrams.
    pub fn source_text(&self) -> String {
        self.parts
            .iter()
            .map(|part| match part {
                TemplatePart::Text(text) => text.replace("${", "$${"),
                TemplatePart::Expression(expression) => format!("${{{}}}", expression.text),
            })
            .collect()
    }

    pub fn is_literal(&self) -> bool {
        self.parts
            .iter()
            .all(|part| matches!(part, TemplatePart::Text(_)))
    }

    /// Renders the template to a string.
    pub fn render(&self, scope: &Scope) -> Result<String, EvaluationError> {
        let mut output = String::new();
        for part in &self.parts {
            match part {
                TemplatePart::Text(text) => output.push_str(text),
                TemplatePart::Expression(expression) => {
                    use std::fmt::Write;
                    let value = expression.evaluate(scope)?;
                    // Each part is bounded, but a template can repeat one many times: the
                    // text is checked before each part is added to it.
                    let bytes = output.len().saturating_add(value.size_in_bytes());
                    super::budget::check_value(bytes)
                        .map_err(|why| expression.error(why.to_string()))?;
                    let _ = write!(output, "{value}");
                }
            }
        }
        Ok(output)
    }
}

/// What an expression problem inside `${...}` says last: the text may have been meant
/// literally (a shell's `${#VAR}` or `${HOME}` in an `exec` argument), and `$${` writes it so.
const LITERAL_HINT: &str =
    "`${` is meant literally (as in the shell's `${#VAR}`), write `$${`: `$${#VAR}`";

fn with_literal_hint(help: Option<String>) -> String {
    match help {
        // After a question (`did you mean ...?`), a sentence of its own.
        Some(help) if help.ends_with(['?', '.']) => format!("{help} If {LITERAL_HINT}"),
        Some(help) => format!("{help}; if {LITERAL_HINT}"),
        None => format!("if {LITERAL_HINT}"),
    }
}

/// The bytes of whitespace `text` starts with (problem offsets count bytes).
fn leading_spaces(text: &str) -> usize {
    text.len() - text.trim_start().len()
}

/// The byte offset of the character at `index`: a template is walked by characters, and a
/// problem's offset counts bytes, as an expression's do.
fn byte_offset(characters: &[char], index: usize) -> usize {
    characters[..index]
        .iter()
        .map(|character| character.len_utf8())
        .sum()
}

/// The index of the `}` closing an expression that starts at `start`, skipping braces inside
/// nested maps and string literals.
pub(crate) fn closing_brace(characters: &[char], start: usize) -> Option<usize> {
    closing(characters, start, '{', '}')
}

/// The index of the `close` ending an expression that starts at `start`, skipping the pairs
/// of `open` and `close` nested in it and what string literals hold.
pub(crate) fn closing(characters: &[char], start: usize, open: char, close: char) -> Option<usize> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut index = start;
    while index < characters.len() {
        let character = characters[index];
        match quote {
            Some(_) if character == '\\' => index += 1,
            Some(open) if character == open => quote = None,
            Some(_) => {}
            None => match character {
                '\'' | '"' => quote = Some(character),
                _ if character == open => depth += 1,
                _ if character == close && depth == 0 => return Some(index),
                _ if character == close => depth -= 1,
                _ => {}
            },
        }
        index += 1;
    }
    None
}

/// A JSON-shaped value whose strings are templates: `"${x}"` alone keeps `x`'s type.
#[derive(Debug)]
pub enum ValueTemplate {
    Literal(Value),
    Expression(Expression),
    Text(Template),
    List(Vec<ValueTemplate>),
    Map(Vec<(Arc<str>, ValueTemplate)>),
}

impl ValueTemplate {
    /// Compiles every string inside `json` as a template. Problems carry the JSON pointer
    /// (relative to `json`) of the string they are in.
    pub fn compile(
        json: &serde_json::Value,
        names: &Names,
    ) -> Result<ValueTemplate, Vec<(String, ExpressionProblem)>> {
        let mut problems = Vec::new();
        let template = Self::compile_at(json, names, String::new(), &mut problems);
        if problems.is_empty() {
            Ok(template)
        } else {
            Err(problems)
        }
    }

    fn compile_at(
        json: &serde_json::Value,
        names: &Names,
        pointer: String,
        problems: &mut Vec<(String, ExpressionProblem)>,
    ) -> ValueTemplate {
        match json {
            serde_json::Value::String(text) => match Template::compile(text, names) {
                Ok(template) if template.is_literal() => {
                    ValueTemplate::Literal(Value::string(text.replace("$${", "${")))
                }
                Ok(template) => match template.single_expression() {
                    Ok(expression) => ValueTemplate::Expression(expression),
                    Err(template) => ValueTemplate::Text(template),
                },
                Err(inner) => {
                    problems.extend(inner.into_iter().map(|problem| (pointer.clone(), problem)));
                    ValueTemplate::Literal(Value::Null)
                }
            },
            serde_json::Value::Array(items) => ValueTemplate::List(
                items
                    .iter()
                    .enumerate()
                    .map(|(index, item)| {
                        Self::compile_at(item, names, format!("{pointer}/{index}"), problems)
                    })
                    .collect(),
            ),
            serde_json::Value::Object(object) => ValueTemplate::Map(
                object
                    .iter()
                    .map(|(key, value)| {
                        let child = format!(
                            "{pointer}/{}",
                            crate::pipeline::load::yaml::escape_pointer_token(key)
                        );
                        (
                            Arc::from(key.as_str()),
                            Self::compile_at(value, names, child, problems),
                        )
                    })
                    .collect(),
            ),
            other => ValueTemplate::Literal(Value::from_json(other)),
        }
    }

    pub fn render(&self, scope: &Scope) -> Result<Value, EvaluationError> {
        Ok(match self {
            ValueTemplate::Literal(value) => value.clone(),
            ValueTemplate::Expression(expression) => expression.evaluate(scope)?,
            ValueTemplate::Text(template) => Value::string(template.render(scope)?),
            ValueTemplate::List(items) => bounded_value(Value::List(Arc::new(
                items
                    .iter()
                    .map(|item| item.render(scope))
                    .collect::<Result<_, _>>()?,
            )))?,
            ValueTemplate::Map(entries) => bounded_value(Value::Map(Arc::new(
                entries
                    .iter()
                    .map(|(key, value)| Ok((key.clone(), value.render(scope)?)))
                    .collect::<Result<_, EvaluationError>>()?,
            )))?,
        })
    }
}

/// A list or map a value template built from bounded parts, checked as a whole: the parts
/// may be many.
fn bounded_value(value: Value) -> Result<Value, EvaluationError> {
    match super::budget::check_value(value.size_in_bytes()) {
        Ok(()) => Ok(value),
        Err(why) => Err(EvaluationError {
            expression: Arc::from(value.type_name()),
            message: why.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Names {
        let states = HashMap::from([("idle".to_string(), 1usize), ("busy".to_string(), 2)]);
        Names::new(["attempts".to_string()], ["tool".to_string()], states)
    }

    fn scope_with<'a>(names: &'a Names, context: &'a [Value], inputs: &'a [Value]) -> Scope<'a> {
        Scope {
            names,
            context,
            inputs,
            event: None,
            is_active: &|index| index == 1,
            clock: 0,
        }
    }

    /// What the checker accepts is defined when it runs: every known function, method and
    /// namespaced function, called with some argument, fails (if it does) for its arguments,
    /// never as "not defined" (`timestamp` and `duration` once passed the check and failed so).
    #[test]
    fn every_function_the_checker_accepts_is_defined_at_run_time() {
        let names = names();
        let context = [Value::Int(2)];
        let inputs = [Value::string("read_file")];
        let scope = scope_with(&names, &context, &inputs);
        let mut calls: Vec<String> = KNOWN_FUNCTIONS
            .iter()
            .filter(|name| !matches!(**name, "In" | "has"))
            .map(|name| match *name {
                "merge" => "merge({}, {'a': 1})".to_string(),
                _ => format!("{name}('1')"),
            })
            .collect();
        calls.extend(KNOWN_METHODS.iter().map(|name| format!("'ab'.{name}('a')")));
        // The time getters on the values that have them, with and without a time zone.
        for getter in KNOWN_METHODS.iter().filter(|name| name.starts_with("get")) {
            calls.push(format!("now().{getter}()"));
            calls.push(format!("now().{getter}('UTC')"));
            calls.push(format!("duration('1h').{getter}()"));
        }
        calls.extend(NAMESPACES.iter().flat_map(|(namespace, functions)| {
            functions
                .iter()
                .map(move |function| format!("{namespace}.{function}(1)"))
        }));
        calls.extend(
            super::super::functions::ENGINE_FUNCTIONS
                .iter()
                .map(|name| format!("{name}('x')")),
        );
        let undefined: Vec<String> = calls
            .iter()
            .filter_map(|call| {
                let expression = Expression::compile(call, &names)
                    .unwrap_or_else(|problems| panic!("{call} does not compile: {problems:?}"));
                let message = expression.evaluate(&scope).err()?.to_string();
                message
                    .contains("is not defined")
                    .then(|| format!("{call}: {message}"))
            })
            .collect();
        assert!(undefined.is_empty(), "{undefined:#?}");
    }

    #[test]
    fn evaluates_against_context_and_inputs() {
        let names = names();
        let context = [Value::Int(2)];
        let inputs = [Value::string("read_file")];
        let scope = scope_with(&names, &context, &inputs);
        let guard = Expression::compile("attempts < 3 && tool == 'read_file'", &names).unwrap();
        assert!(guard.evaluate_condition(&scope).unwrap());
        let membership = Expression::compile("In('idle') && !In('busy')", &names).unwrap();
        assert!(membership.evaluate_condition(&scope).unwrap());
    }

    #[test]
    fn unknown_names_and_states_are_located() {
        let problems = Expression::compile("attempt < 3", &names()).unwrap_err();
        assert_eq!(problems[0].message, "unknown name `attempt`");
        assert_eq!(problems[0].offset, 0);
        assert_eq!(
            problems[0].help.as_deref(),
            Some("did you mean `attempts`?")
        );
        let problems = Expression::compile("x == 1 || In('idel')", &names()).unwrap_err();
        assert_eq!(problems.len(), 2);
        assert!(problems[1].message.contains("unknown state `idel`"));
        let problems = Expression::compile("attempts <", &names()).unwrap_err();
        assert!(problems[0].message.starts_with("invalid expression"));
        // At the end, not one past it (found by fuzzing: CEL's columns are 1-based).
        assert_eq!(problems[0].offset, 10);
        let problems = Expression::compile("attempts < < 3", &names()).unwrap_err();
        assert_eq!(problems[0].offset, 11, "{problems:?}");
    }

    #[test]
    fn environment_checks_work_in_guards() {
        let names = names();
        let scope = scope_with(&names, &[], &[]);
        let check = Expression::compile(
            "exists('/') && is_dir('/') && !exists('/nonexistent-xyz') && command_exists('sh') && env('PATH') != null && env('NO_SUCH_VARIABLE_XYZ') == null",
            &names,
        )
        .unwrap();
        assert!(check.evaluate_condition(&scope).unwrap());
        let size = Expression::compile("file_size('/nonexistent-xyz')", &names).unwrap();
        assert!(size.evaluate(&scope).is_err());
        let typo = Expression::compile("exist('/')", &names).unwrap_err();
        assert_eq!(typo[0].help.as_deref(), Some("did you mean `exists`?"));
    }

    #[test]
    fn macro_variables_are_bound() {
        assert!(
            Expression::compile(
                "[1, 2].all(n, n > 0) && [3].exists(m, m == attempts)",
                &names()
            )
            .is_ok()
        );
        assert!(Expression::compile("[1].all(n, q > 0)", &names()).is_err());
    }

    #[test]
    fn overflow_is_an_evaluation_error() {
        let names = names();
        let context = [Value::Int(i64::MAX)];
        let scope = scope_with(&names, &context, &[]);
        let expression = Expression::compile("attempts + 1", &names).unwrap();
        assert!(expression.evaluate(&scope).is_err());
    }

    #[test]
    fn templates_interpolate_and_keep_types() {
        let names = names();
        let context = [Value::Int(2)];
        let inputs = [Value::string("ls")];
        let scope = scope_with(&names, &context, &inputs);
        let template = Template::compile(
            "tool ${tool} tried ${attempts + 1} times, $${literal}",
            &names,
        )
        .unwrap();
        assert_eq!(
            template.render(&scope).unwrap(),
            "tool ls tried 3 times, ${literal}"
        );
        let typed = ValueTemplate::compile(
            &serde_json::json!({"n": "${attempts}", "s": "x${attempts}", "k": [true]}),
            &names,
        )
        .unwrap();
        assert_eq!(
            typed.render(&scope).unwrap().to_json(),
            serde_json::json!({"n": 2, "s": "x2", "k": [true]})
        );
        let problems = Template::compile("a ${ nope } b ${", &names).unwrap_err();
        assert_eq!(problems.len(), 2);
        assert_eq!(problems[0].offset, 5);
    }
}

#[cfg(test)]
mod budget_tests {
    use super::*;

    #[test]
    fn nested_comprehensions_stop_at_the_step_budget() {
        let names = Names::new([], [], HashMap::new());
        let scope = Scope {
            names: &names,
            context: &[],
            inputs: &[],
            event: None,
            is_active: &|_| false,
            clock: 0,
        };
        let list = format!(
            "[{}]",
            (0..100)
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(",")
        );
        let text = format!("{list}.all(a, {list}.all(b, {list}.all(c, a + b + c >= 0)))");
        let expression = Expression::compile(&text, &names).unwrap();
        let _budgets =
            super::super::budget::StepBudgets::enter(Some(&super::super::budget::Budgets {
                max_evaluation_steps: 10_000,
                ..Default::default()
            }));
        let error = expression.evaluate(&scope).unwrap_err();
        assert!(
            error.message.contains("more than 10000 steps")
                && error.message.contains("--max-evaluation-steps"),
            "{error}"
        );
    }
}
