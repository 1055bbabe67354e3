//! Scenarios: a protocol driven step by step on virtual time, with mocks, and checked.

pub mod candidates;
pub mod check;
pub mod coverage;
pub mod expectation;
pub mod explore;
pub mod generate;
pub mod mocks;
pub mod outcomes;
pub mod probe;
pub mod runner;
pub mod sample;
pub mod scratch;
pub mod start;
