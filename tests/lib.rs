//! The one integration-test binary: every test module is compiled together.

mod support;

mod capabilities;
mod children;
mod cli;
mod diagnostics;
mod durability;
mod effects;
mod examples;
mod fast_path;
mod fleet;
mod fuzz_regressions;
mod limits;
mod loading_limits;
mod ownership;
mod ownership_properties;
mod properties;
mod protocols;
mod scenarios;
mod schema;
mod scxml_import;
mod semantics;
mod socket;
mod store;
