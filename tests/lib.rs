//! The one integration-test binary: every test module is compiled together.

mod support;

mod bisect;
mod budgets;
mod capabilities;
mod children;
mod cli;
mod defaults;
mod diagnostics;
mod durability;
mod effects;
mod examples;
mod fast_path;
mod file_functions;
mod fleet;
mod foreach;
mod fuzz_regressions;
mod inputs;
mod limits;
mod loading_limits;
mod map;
mod map_durability;
mod ownership;
mod ownership_properties;
mod pending_sends;
mod properties;
mod protocols;
mod sandbox;
mod scenarios;
mod schema;
mod scxml_import;
mod secret_spellings;
mod secrets;
mod semantics;
mod socket;
mod store;
