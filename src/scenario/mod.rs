//! Scenarios: a protocol driven step by step on virtual time, with mocks, and checked.

pub mod candidates;
pub mod coverage;
pub mod explore;
pub mod generate;
pub mod model;
pub mod probe;
pub mod runner;
