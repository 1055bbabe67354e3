//! `test --generate`: breadth-first search over what the real engine reaches, on virtual time
//! and mocks, kept as scenarios that together take every transition they can.

use std::collections::{BTreeSet, HashSet, VecDeque};
use std::time::{Duration, Instant};

use super::candidates::{Alphabet, combine};
use super::coverage::{coverable, label, label_of};
use super::outcomes::recoveries;
use super::probe::{Probe, Setup, Target, probe};
use crate::base::model::scenario::{AfterStep, ExpectStep, Expectation, Finished, Scenario, Step};
use crate::pipeline::compile::machine::{EventDescriptor, Machine, StateId};
use crate::runtime::run::algorithm::Limits;

/// Where the search stops.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// Distinct configurations (with context) explored, over all setups.
    pub max_configurations: usize,
    /// Distinct configurations explored under the first setup (one set of inputs and mocks);
    /// a quarter of it under each other one, which mostly matters where its change bites.
    pub max_per_setup: usize,
    /// Steps in one scenario.
    pub max_steps: usize,
    pub max_time: Duration,
}

impl Default for Bounds {
    fn default() -> Bounds {
        Bounds {
            max_configurations: 5000,
            max_per_setup: 200,
            max_steps: 12,
            max_time: Duration::from_secs(60),
        }
    }
}

/// A transition no scenario takes, and why.
#[derive(Debug, Clone)]
pub struct Unreached {
    pub transition: String,
    pub reason: String,
}

/// What the search found.
#[derive(Debug, Clone)]
pub struct Generated {
    pub scenarios: Vec<Scenario>,
    pub covered: usize,
    pub total: usize,
    pub unreached: Vec<Unreached>,
    pub configurations: usize,
    pub elapsed: Duration,
    /// The bound that stopped the search early, named as the author would set it.
    pub stopped_by: Option<String>,
}

/// A path that took a transition first.
struct Found {
    /// The transitions this path took first.
    new: Vec<String>,
    setup: Setup,
    steps: Vec<Step>,
    probe: Probe,
}

/// Searches `machine` for scenarios that take each transition.
pub fn generate(target: &Target, bounds: Bounds, limits: Limits) -> Generated {
    let machine = &target.machine;
    let started = Instant::now();
    let alphabet = Alphabet::of(machine);
    let wanted: Vec<String> = coverable(machine)
        .map(|transition| transition.pointer.clone())
        .collect();
    let mut covered: BTreeSet<String> = BTreeSet::new();
    let mut reached: HashSet<String> = HashSet::new();
    // States a run failed in (an unhandled `error.execution`): their transitions never ran.
    let mut failed_in: HashSet<String> = HashSet::new();
    let mut found: Vec<Found> = Vec::new();
    let mut configurations = 0usize;
    let mut stopped_by = None;
    let mut start_failure: Option<String> = None;
    // Setups breadth-first too: one that reached something new is tried again with each
    // single change added (a timeout here, then an error there).
    let mut setups: VecDeque<Setup> = VecDeque::from([alphabet.base.clone()]);
    let mut tried: HashSet<Setup> = HashSet::new();
    'setups: while let Some(setup) = setups.pop_front() {
        if covered.len() == wanted.len() {
            break;
        }
        if !tried.insert(setup.clone()) {
            continue;
        }
        let before = (covered.len(), reached.len());
        let setup_limit = if setup == alphabet.base {
            bounds.max_per_setup
        } else {
            bounds.max_per_setup / 4
        };
        let mut seen: HashSet<String> = HashSet::new();
        let mut queue: VecDeque<(Vec<Step>, Probe)> = VecDeque::new();
        let first = probe(target, &setup, &[], limits);
        if let Some(failure) = &first.failure {
            start_failure.get_or_insert_with(|| failure.clone());
            continue;
        }
        note(
            &first,
            &setup,
            &[],
            &mut covered,
            (&mut reached, &mut failed_in),
            &mut found,
        );
        seen.insert(key(&first));
        configurations += 1;
        queue.push_back((Vec::new(), first));
        while let Some((steps, at)) = queue.pop_front() {
            if at.finished.is_some() || steps.len() >= bounds.max_steps {
                continue;
            }
            let mut moves: Vec<Step> = alphabet.sends.iter().cloned().map(Step::Send).collect();
            if let Some(milliseconds) = at.next_timer {
                moves.push(Step::After(AfterStep {
                    after: duration_text(milliseconds.max(1)),
                }));
            }
            for next in moves {
                if configurations >= bounds.max_configurations {
                    stopped_by = Some(format!(
                        "--max-configurations {}",
                        bounds.max_configurations
                    ));
                    break 'setups;
                }
                if started.elapsed() >= bounds.max_time {
                    stopped_by = Some(format!("--max-seconds {}", bounds.max_time.as_secs()));
                    break 'setups;
                }
                let mut path = steps.clone();
                path.push(next);
                let result = probe(target, &setup, &path, limits);
                if result.failure.is_some() {
                    continue;
                }
                note(
                    &result,
                    &setup,
                    &path,
                    &mut covered,
                    (&mut reached, &mut failed_in),
                    &mut found,
                );
                if seen.len() < setup_limit && seen.insert(key(&result)) {
                    configurations += 1;
                    queue.push_back((path, result));
                }
            }
        }
        if (covered.len(), reached.len()) != before {
            for variant in &alphabet.variants {
                if let Some(child) = combine(&alphabet.base, &setup, variant) {
                    setups.push_back(child);
                }
            }
            setups.extend(recoveries(&setup));
        }
    }
    let scenarios = keep(machine, found);
    let unreached = wanted
        .iter()
        .filter(|pointer| !covered.contains(*pointer))
        .filter_map(|pointer| {
            let transition = machine.transitions.iter().find(|t| &t.pointer == pointer)?;
            let reason = match (&start_failure, reached.is_empty()) {
                (Some(failure), true) => format!("no run could start: {failure}"),
                _ => reason(machine, transition, &reached, &failed_in),
            };
            Some(Unreached {
                transition: label(machine, transition),
                reason,
            })
        })
        .collect();
    Generated {
        scenarios,
        covered: covered.len(),
        total: wanted.len(),
        unreached,
        configurations,
        elapsed: started.elapsed(),
        stopped_by,
    }
}

/// A reached configuration with its context and pending timers: two paths reaching the same
/// one go on alike.
fn key(probe: &Probe) -> String {
    format!(
        "{:?} {:?} {} {:?}",
        probe.configuration, probe.finished, probe.context, probe.timers
    )
}

/// Records what a run covered first.
fn note(
    result: &Probe,
    setup: &Setup,
    steps: &[Step],
    covered: &mut BTreeSet<String>,
    (reached, failed_in): (&mut HashSet<String>, &mut HashSet<String>),
    found: &mut Vec<Found>,
) {
    reached.extend(result.entered.iter().cloned());
    failed_in.extend(result.failed_in.iter().cloned());
    let new: Vec<String> = result
        .taken
        .iter()
        .filter(|pointer| covered.insert((*pointer).clone()))
        .cloned()
        .collect();
    if !new.is_empty() {
        found.push(Found {
            new,
            setup: setup.clone(),
            steps: steps.to_vec(),
            probe: result.clone(),
        });
    }
}

/// The paths worth keeping: one whose steps begin another path under the same setup adds
/// nothing (the longer one takes the same transitions first), so it is dropped.
fn keep(machine: &Machine, found: Vec<Found>) -> Vec<Scenario> {
    let mut scenarios = Vec::new();
    for (index, candidate) in found.iter().enumerate() {
        let extended = found.iter().enumerate().any(|(other, longer)| {
            other != index
                && longer.setup == candidate.setup
                && longer.steps.len() > candidate.steps.len()
                && longer.steps.starts_with(&candidate.steps)
        });
        if !extended {
            scenarios.push(scenario(machine, candidate));
        }
    }
    scenarios
}

fn scenario(machine: &Machine, found: &Found) -> Scenario {
    let first = found
        .new
        .first()
        .map(|pointer| label_of(machine, pointer))
        .unwrap_or_default();
    let last = match found.new.len() {
        0 | 1 => first,
        more => format!("{first} and {} more", more - 1),
    };
    let name = match found.steps.len() {
        0 => format!("takes {last} on its own"),
        1 => format!("takes {last} in 1 step"),
        count => format!("takes {last} in {count} steps"),
    };
    let variations: Vec<String> = found
        .setup
        .mocks
        .iter()
        .filter(|(_, outcome)| outcome != "ok:")
        .map(|(id, outcome)| format!("{id}={outcome}"))
        .collect();
    let name = if variations.is_empty() {
        name
    } else {
        format!("{name} (mock {})", variations.join(", "))
    };
    let context = found.probe.context.as_object().map(|variables| {
        variables
            .iter()
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect()
    });
    let expectation = match &found.probe.finished {
        Some((state, exit_code)) => Expectation {
            context,
            finished: Some(Finished {
                exit_code: Some(*exit_code),
                state: state.clone(),
                ..Finished::default()
            }),
            ..Expectation::default()
        },
        None => Expectation {
            configuration: Some(found.probe.configuration.clone()),
            context,
            ..Expectation::default()
        },
    };
    let mut steps = found.steps.clone();
    steps.push(Step::Expect(ExpectStep {
        expect: Box::new(expectation),
    }));
    Scenario {
        name,
        inputs: found.setup.inputs_json(),
        mocks: found.setup.mocks_map(),
        clock: None,
        steps,
        ..Default::default()
    }
}

/// Why no path took `transition`.
fn reason(
    machine: &Machine,
    transition: &crate::pipeline::compile::machine::TransitionNode,
    reached: &HashSet<String>,
    failed_in: &HashSet<String>,
) -> String {
    let source = transition.source;
    let source_id = &machine.state(source).id;
    // A run that failed in the state (or one inside it) tried none of its transitions there.
    let failed_there = failed_in.iter().any(|state| {
        machine
            .state_id(state)
            .is_some_and(|id| id == source || machine.is_descendant(id, source))
    });
    let or_failed = if failed_there {
        format!(", or the run failed in `{source_id}` (an `error.execution` nothing handled)")
    } else {
        String::new()
    };
    let source_reached = reached.iter().any(|state| {
        machine
            .states
            .iter()
            .position(|node| &*node.id == state)
            .is_some_and(|index| {
                let id = StateId(index as u32);
                id == source || machine.is_descendant(id, source)
            })
    });
    if !source_reached {
        return format!("state `{source_id}` was never reached");
    }
    if let Some(guard) = &transition.guard {
        let inputs: Vec<&str> = machine
            .inputs
            .iter()
            .map(|input| input.name.as_str())
            .filter(|name| guard.text.contains(name))
            .collect();
        let needs = if inputs.is_empty() {
            String::new()
        } else {
            format!(
                "; it reads input {}: a value beyond those tried may satisfy it",
                inputs
                    .iter()
                    .map(|name| format!("`{name}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        return format!(
            "guard `{}` was never true in `{source_id}` with the event data, inputs and mocks \
             tried{needs}{or_failed}",
            guard.text
        );
    }
    let events: Vec<&str> = transition
        .events
        .iter()
        .filter_map(|event| match event {
            EventDescriptor::Prefix(prefix) => Some(&**prefix),
            EventDescriptor::Any => None,
        })
        .collect();
    if events.is_empty() {
        return format!(
            "an earlier transition of `{source_id}` was taken{or_failed}, each time \
             `{source_id}` was active"
        );
    }
    format!(
        "`{}` never occurred while `{source_id}` was active, or an earlier transition of \
         `{source_id}` took it{or_failed}",
        events.join(" ")
    )
}

/// `600000` → `10m`: the largest unit that writes the span exactly.
pub(super) fn duration_text(milliseconds: u64) -> String {
    match milliseconds {
        value if value % 3_600_000 == 0 => format!("{}h", value / 3_600_000),
        value if value % 60_000 == 0 => format!("{}m", value / 60_000),
        value if value % 1000 == 0 => format!("{}s", value / 1000),
        value => format!("{value}ms"),
    }
}
