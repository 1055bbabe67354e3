//! Scenarios: a protocol driven step by step on virtual time, with mocks, and checked.

pub mod model;
pub mod runner;
