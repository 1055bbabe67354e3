//! `graph --format svg` on generated tangles: nested and parallel states, histories, loops,
//! guarded transitions between any two states, checked as geometry like the shipped ones.

use crate::graph_geometry::{drawn, faults};
use crate::support::{Random, compiled_file, temporary_directory};

/// Dice thrown for the generator: a failure names a seed, so a protocol one can redraw.
struct Dice(Random);

impl Dice {
    fn below(&mut self, bound: usize) -> usize {
        self.0.below(bound as u64) as usize
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.0.chance(percent)
    }
}

/// A state to write: its id, kind and children.
struct Drafted {
    id: String,
    kind: &'static str,
    children: Vec<Drafted>,
}

/// Between one and four states per level, some compound, some parallel (two or three regions),
/// some final, down to a few levels.
fn draft(dice: &mut Dice, depth: usize, ids: &mut Vec<String>) -> Vec<Drafted> {
    let count = 1 + dice.below(if depth < 3 { 4 } else { 3 });
    let mut states = Vec::new();
    for _ in 0..count {
        let id = format!("s{}", ids.len() + 1);
        ids.push(id.clone());
        let roll = dice.below(100);
        let (kind, children) = if depth < 3 && roll < 25 {
            ("compound", draft(dice, depth + 1, ids))
        } else if depth < 3 && roll < 35 {
            let regions = (0..2 + dice.below(2))
                .map(|_| {
                    let id = format!("s{}", ids.len() + 1);
                    ids.push(id.clone());
                    if dice.chance(70) {
                        let children = draft(dice, depth + 2, ids);
                        Drafted {
                            id,
                            kind: "compound",
                            children,
                        }
                    } else {
                        let children = Vec::new();
                        Drafted {
                            id,
                            kind: "atomic",
                            children,
                        }
                    }
                })
                .collect();
            ("parallel", regions)
        } else if roll < 42 {
            ("final", Vec::new())
        } else {
            ("atomic", Vec::new())
        };
        states.push(Drafted { id, kind, children });
    }
    states
}

fn write(dice: &mut Dice, states: &[Drafted], ids: &[String], depth: usize, yaml: &mut String) {
    let pad = "  ".repeat(depth);
    for state in states {
        if state.kind == "final" {
            yaml.push_str(&format!("{pad}{}: {{ type: final }}\n", state.id));
            continue;
        }
        yaml.push_str(&format!("{pad}{}:\n", state.id));
        if state.kind == "parallel" {
            yaml.push_str(&format!("{pad}  type: parallel\n"));
        }
        let events = dice.below(4);
        if events == 0 {
            yaml.push_str(&format!("{pad}  description: quiet\n"));
        } else {
            yaml.push_str(&format!("{pad}  on:\n"));
        }
        for event in 0..events {
            let target = &ids[dice.below(ids.len())];
            if dice.chance(30) {
                let guard = dice.below(10);
                yaml.push_str(&format!(
                    "{pad}    e{event}: {{ target: {target}, guard: \"n > {guard}\" }}\n"
                ));
            } else {
                yaml.push_str(&format!("{pad}    e{event}: {target}\n"));
            }
        }
        if !state.children.is_empty() {
            yaml.push_str(&format!("{pad}  states:\n"));
            write(dice, &state.children, ids, depth + 2, yaml);
            if state.kind == "compound" && dice.chance(30) {
                let first = &state.children[0].id;
                yaml.push_str(&format!(
                    "{pad}    {}_back: {{ type: history, target: {first} }}\n",
                    state.id
                ));
            }
        }
    }
}

fn generated(seed: u64) -> String {
    let mut dice = Dice(Random(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1));
    let mut ids = Vec::new();
    let states = draft(&mut dice, 0, &mut ids);
    let mut yaml = format!("id: tangle{seed}\ncontext: {{ n: 0 }}\nstates:\n");
    write(&mut dice, &states, &ids, 1, &mut yaml);
    yaml
}

#[test]
fn generated_tangles_keep_lines_off_boxes_and_labels_beside_their_lines() {
    let directory = temporary_directory("graph-generated", "tangles");
    let mut all = Vec::new();
    for seed in 0..60 {
        let path = directory.join(format!("tangle{seed}.yaml"));
        std::fs::write(&path, generated(seed)).expect("written");
        let machine = compiled_file(&path);
        let detail = seed % 2 == 1;
        let text = drawn(&directory, &path, detail);
        all.extend(
            faults(&machine, &text)
                .into_iter()
                .map(|fault| format!("{}: {fault}", path.display())),
        );
    }
    assert!(all.is_empty(), "{} faults:\n{}", all.len(), all.join("\n"));
}
