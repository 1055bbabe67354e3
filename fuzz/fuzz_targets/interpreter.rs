//! A random small statechart and a random event sequence: it must compile, and every
//! macrostep must leave a legal configuration (`protocol_run_fuzz::check_configuration`).
//!
//! The bytes drive `arbitrary::Unstructured` through a generator that only builds protocols the
//! format allows (ids unique, history only inside compound or parallel states, targets that
//! exist), so nearly every input reaches the interpreter. `cargo fuzz fmt interpreter INPUT`
//! prints the protocol and the events, the form kept under `tests/fixtures/fuzz/interpreter/`.

#![no_main]

use arbitrary::{Arbitrary, Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value, json};

use protocol_run_fuzz::TIMER_EVENT;

/// External events the machines react to; `*` and `done.state.*` descriptors are added.
const ALPHABET: [&str; 4] = ["a", "b", "c", "d"];
const MAX_DEPTH: u32 = 4;
const MAX_STATES: usize = 16;
const MAX_EVENTS: usize = 24;

/// One generated case, shown as the YAML file and the event list it runs.
struct Case {
    yaml: String,
    events: Vec<String>,
}

impl std::fmt::Debug for Case {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(formatter, "# events: {}", self.events.join(" "))?;
        write!(formatter, "{}", self.yaml)
    }
}

impl<'a> Arbitrary<'a> for Case {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Case> {
        // Events first, so short inputs already send some (an exhausted `Unstructured` gives
        // the smallest choices, which makes a small but complete protocol).
        let mut events = Vec::new();
        let count = u.int_in_range(0..=MAX_EVENTS)?;
        for _ in 0..count {
            let event = if u.ratio(1, 6)? {
                TIMER_EVENT
            } else {
                *u.choose(&ALPHABET)?
            };
            events.push(event.to_string());
        }
        let mut generator = Generator {
            u,
            tree: Vec::new(),
            maps: 0,
        };
        let protocol = generator.protocol()?;
        Ok(Case {
            yaml: protocol_run::tooling::import::to_yaml(&protocol),
            events,
        })
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Atomic,
    Compound,
    Parallel,
    Final,
    History { deep: bool },
}

/// A state of the tree: its kind and its parent (by index into `Generator::tree`).
struct Node {
    kind: Kind,
    parent: Option<usize>,
    children: Vec<usize>,
}

struct Generator<'u, 'a> {
    u: &'u mut Unstructured<'a>,
    tree: Vec<Node>,
    /// Maps generated so far: each gets an id no other action has.
    maps: usize,
}

fn id(index: usize) -> String {
    format!("s{index}")
}

impl Generator<'_, '_> {
    fn protocol(&mut self) -> Result<Value> {
        let top = self.u.int_in_range(1..=4)?;
        let mut roots = Vec::new();
        for _ in 0..top {
            if let Some(state) = self.state(None, 1)? {
                roots.push(state);
            }
        }
        if roots.is_empty() {
            roots.push(self.add(Kind::Atomic, None));
        }
        let mut states = Map::new();
        for root in roots {
            states.insert(id(root), self.state_value(root)?);
        }
        let start = self.u.int_in_range(-2..=3)?;
        // `item` and `position` are the variables of generated `foreach` and `map` actions.
        let context = json!({ "x": start, "item": 0, "position": 0 });
        Ok(json!({ "id": "fuzz", "context": context, "states": states }))
    }

    fn add(&mut self, kind: Kind, parent: Option<usize>) -> usize {
        let index = self.tree.len();
        self.tree.push(Node {
            kind,
            parent,
            children: Vec::new(),
        });
        if let Some(parent) = parent {
            self.tree[parent].children.push(index);
        }
        index
    }

    /// Builds the shape of a state and its descendants; `None` once the state budget is spent.
    fn state(&mut self, parent: Option<usize>, depth: u32) -> Result<Option<usize>> {
        if self.tree.len() >= MAX_STATES {
            return Ok(None);
        }
        let in_container = parent.is_some();
        let kind = match self.u.int_in_range(0..=9)? {
            0..=3 => Kind::Atomic,
            4 | 5 if depth < MAX_DEPTH => Kind::Compound,
            6 if depth < MAX_DEPTH => Kind::Parallel,
            7 => Kind::Final,
            8 if in_container => Kind::History {
                deep: self.u.arbitrary()?,
            },
            _ => Kind::Atomic,
        };
        let index = self.add(kind, parent);
        if matches!(kind, Kind::Compound | Kind::Parallel) {
            let count = self.u.int_in_range(1..=3)?;
            for _ in 0..count {
                self.state(Some(index), depth + 1)?;
            }
            // A container needs a real state to enter.
            let has_real = self.tree[index]
                .children
                .iter()
                .any(|child| !matches!(self.tree[*child].kind, Kind::History { .. }));
            if !has_real {
                self.add(Kind::Atomic, Some(index));
            }
        }
        Ok(Some(index))
    }

    fn real_children(&self, index: usize) -> Vec<usize> {
        self.tree[index]
            .children
            .iter()
            .copied()
            .filter(|child| !matches!(self.tree[*child].kind, Kind::History { .. }))
            .collect()
    }

    fn descendants(&self, index: usize) -> Vec<usize> {
        let mut found = Vec::new();
        for &child in &self.tree[index].children {
            found.push(child);
            found.extend(self.descendants(child));
        }
        found
    }

    fn state_value(&mut self, index: usize) -> Result<Value> {
        let kind = self.tree[index].kind;
        let mut state = Map::new();
        match kind {
            Kind::Atomic => {}
            Kind::Compound => {
                if self.u.ratio(1, 3)? {
                    let children = self.real_children(index);
                    let initial = *self.u.choose(&children)?;
                    state.insert("initial".into(), json!(id(initial)));
                }
            }
            Kind::Parallel => {
                state.insert("type".into(), json!("parallel"));
            }
            Kind::Final => {
                state.insert("type".into(), json!("final"));
                if self.u.arbitrary()? {
                    state.insert("exit_code".into(), json!(self.u.int_in_range(0..=3)?));
                }
                if self.u.ratio(1, 4)? {
                    state.insert("output".into(), json!({ "x": "${x}" }));
                }
            }
            Kind::History { deep } => {
                state.insert("type".into(), json!("history"));
                state.insert(
                    "history".into(),
                    json!(if deep { "deep" } else { "shallow" }),
                );
                if self.u.arbitrary()? {
                    let parent = self.tree[index].parent.expect("history has a parent");
                    let candidates: Vec<usize> = self
                        .descendants(parent)
                        .into_iter()
                        .filter(|state| !matches!(self.tree[*state].kind, Kind::History { .. }))
                        .collect();
                    let target = *self.u.choose(&candidates)?;
                    state.insert("target".into(), json!(id(target)));
                }
                return Ok(Value::Object(state));
            }
        }
        if self.u.ratio(1, 3)? {
            state.insert("entry".into(), self.actions()?);
        }
        if self.u.ratio(1, 4)? {
            state.insert("exit".into(), self.actions()?);
        }
        if kind != Kind::Final {
            self.transitions(index, &mut state)?;
        }
        let children = self.tree[index].children.clone();
        if !children.is_empty() {
            let mut states = Map::new();
            for child in children {
                states.insert(id(child), self.state_value(child)?);
            }
            state.insert("states".into(), Value::Object(states));
        }
        Ok(Value::Object(state))
    }

    fn transitions(&mut self, index: usize, state: &mut Map<String, Value>) -> Result<()> {
        let mut on = Map::new();
        for _ in 0..self.u.int_in_range(0..=3)? {
            let key = match self.u.int_in_range(0..=7)? {
                0 => "*".to_string(),
                1 => format!(
                    "done.state.{}",
                    id(self.u.int_in_range(0..=self.tree.len() - 1)?)
                ),
                2 => "a b".to_string(),
                _ => self.u.choose(&ALPHABET)?.to_string(),
            };
            let transition = self.transition(index)?;
            match on.get_mut(&key) {
                Some(Value::Array(list)) => list.push(transition),
                _ => {
                    on.insert(key, Value::Array(vec![transition]));
                }
            }
        }
        if !on.is_empty() {
            state.insert("on".into(), Value::Object(on));
        }
        if self.u.ratio(1, 5)? {
            let mut transition = self.transition(index)?;
            // Eventless transitions are guarded, or they would loop at once.
            if transition.get("guard").is_none() {
                transition["guard"] = json!("x < 5");
                transition["actions"] = json!([{ "assign": { "x": "x + 1" } }]);
            }
            state.insert("always".into(), json!([transition]));
        }
        if self.u.ratio(1, 6)? {
            let mut transition = self.transition(index)?;
            transition["delay"] = json!(format!("{}s", self.u.int_in_range(1..=9)?));
            state.insert("after".into(), json!([transition]));
        }
        Ok(())
    }

    fn transition(&mut self, source: usize) -> Result<Value> {
        let mut transition = Map::new();
        if !self.u.ratio(1, 6)? {
            let targets: Vec<usize> = (0..self.tree.len()).collect();
            let target = *self.u.choose(&targets)?;
            if self.u.ratio(1, 8)? {
                // Two targets: legal when they sit in different regions of a parallel state.
                let other = *self.u.choose(&targets)?;
                transition.insert("target".into(), json!([id(target), id(other)]));
            } else {
                transition.insert("target".into(), json!(id(target)));
            }
            if self.u.ratio(1, 4)?
                && matches!(self.tree[source].kind, Kind::Compound | Kind::Parallel)
            {
                transition.insert("type".into(), json!("internal"));
            }
        }
        if self.u.arbitrary()? {
            transition.insert("guard".into(), json!(self.guard()?));
        }
        if self.u.ratio(1, 3)? {
            transition.insert("actions".into(), self.actions()?);
        }
        Ok(Value::Object(transition))
    }

    fn guard(&mut self) -> Result<String> {
        Ok(match self.u.int_in_range(0..=3)? {
            0 => format!("x < {}", self.u.int_in_range(-1..=6)?),
            1 => "x % 2 == 0".to_string(),
            2 => format!(
                "In('{}')",
                id(self.u.int_in_range(0..=self.tree.len() - 1)?)
            ),
            _ => "x >= 1 && x != 3".to_string(),
        })
    }

    fn actions(&mut self) -> Result<Value> {
        let mut actions = Vec::new();
        for _ in 0..self.u.int_in_range(1..=3)? {
            actions.push(self.action(true)?);
        }
        Ok(Value::Array(actions))
    }

    fn action(&mut self, nest: bool) -> Result<Value> {
        let event = *self.u.choose(&ALPHABET)?;
        Ok(match self.u.int_in_range(0..=8)? {
            0 => json!({ "assign": { "x": "x + 1" } }),
            1 => json!({ "assign": { "x": "0" } }),
            2 => json!({ "raise": event }),
            3 => json!({ "send": event }),
            4 if nest => {
                let guard = self.guard()?;
                let then = self.action(false)?;
                let otherwise = self.action(false)?;
                json!({ "if": guard, "then": [then], "else": [otherwise] })
            }
            // Division by zero when x is 0: `error.execution` in the middle of a block.
            5 => json!({ "assign": { "x": "10 / x" } }),
            // A loop over a list, an empty one, or an int (`error.execution` before the body);
            // its body may raise, send or fail, which stops the loop and the block.
            6 if nest => {
                let array = *self.u.choose(&["[1, 2, 3]", "[]", "[x, x + 1]", "x"])?;
                let body = self.action(false)?;
                let mut foreach = json!({
                    "foreach": array,
                    "item": "item",
                    "do": [body, { "assign": { "x": "x + item" } }],
                });
                if self.u.ratio(1, 2)? {
                    foreach["index"] = json!("position");
                }
                foreach
            }
            // A map over the same lists: one effect per element (never run: the host records
            // them), its arguments evaluated with the element bound, or `error.execution`.
            7 => {
                let array = *self.u.choose(&["[1, 2, 3]", "[]", "[x, x + 1]", "x"])?;
                let mut map = json!({
                    "map": array,
                    "id": format!("m{}", self.maps),
                    "item": "item",
                    "max_concurrency": self.u.int_in_range(1..=3)?,
                    "tolerated_failures": *self.u.choose(&[json!(0), json!(1), json!("50%")])?,
                    "exec": ["true", "${item + x}"],
                });
                self.maps += 1;
                if self.u.ratio(1, 2)? {
                    map["index"] = json!("position");
                }
                map
            }
            _ => json!({ "log": "x is ${x}" }),
        })
    }
}

fuzz_target!(|case: Case| {
    let events: Vec<&str> = case.events.iter().map(String::as_str).collect();
    protocol_run_fuzz::interpreter(&case.yaml, &events);
});
