//! protocol-run: YAML statecharts, validated against a schema generated from the model, compiled
//! to index tables, and run with W3C SCXML semantics.
//!
//! The pipeline, end to end:
//!
//! ```
//! use std::sync::Arc;
//! use protocol_run::{compile, load, run};
//!
//! let yaml = r#"
//! id: greeter
//! context: { greeted: 0 }
//! states:
//!   waiting:
//!     on:
//!       hello:
//!         target: done
//!         actions: [{ assign: { greeted: "greeted + 1" } }]
//!   done: { type: final, exit_code: 0, output: { count: "${greeted}" } }
//! "#;
//! let loaded = load::load_text("greeter.yaml", yaml.to_string()).unwrap();
//! let machine = Arc::new(compile::compile(&loaded).unwrap());
//! let mut interpreter = run::Interpreter::new(machine.clone(), machine.bind_inputs(&[]).unwrap());
//! let mut host = run::RecordingHost::default();
//! interpreter.start(&mut host).unwrap();
//! let hello = run::event::Event::named(&machine, "hello", Default::default(), run::event::Origin::External);
//! interpreter.handle(&hello, &mut host).unwrap();
//! assert_eq!(interpreter.outcome().unwrap().output.to_json(), serde_json::json!({"count": 1}));
//! ```

pub mod actions;
pub mod capabilities;
pub mod cli;
pub mod clock;
pub mod compile;
pub mod diagnostic;
pub mod effects;
pub mod extensions;
pub mod files;
pub mod grant_inputs;
pub mod graph;
pub mod import;
pub mod lifecycle;
pub mod lint;
pub mod load;
pub mod lsp;
pub mod mcp;
pub mod model;
pub mod output;
pub mod run;
pub mod runs;
pub mod sandbox;
pub mod scenario;
pub mod secrets;
pub mod statistics;
pub mod store;
pub mod stored_value;
pub mod telemetry;
pub mod time;
pub mod value;
