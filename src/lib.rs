//! protocol-run: YAML statecharts, validated against a schema generated from the model, compiled
//! to index tables, and run with W3C SCXML semantics.
//!
//! The pipeline, end to end:
//!
//! ```
//! use std::sync::Arc;
//! use protocol_run::base::event::{Event, Origin};
//! use protocol_run::pipeline::{compile, load};
//! use protocol_run::runtime::run;
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
//! let hello = Event::named(&machine, "hello", Default::default(), Origin::External);
//! interpreter.handle(&hello, &mut host).unwrap();
//! assert_eq!(interpreter.outcome().unwrap().output.to_json(), serde_json::json!({"count": 1}));
//! ```

pub mod base;
pub mod effects;
pub mod frontends;
pub mod pipeline;
pub mod runtime;
pub mod store;
pub mod tooling;
