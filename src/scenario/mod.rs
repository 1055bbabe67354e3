//! Scenarios: a protocol driven step by step on virtual time, with mocks, and checked.

pub mod check;
pub mod expectation;
pub mod mocks;
pub mod model;
pub mod runner;
pub mod scratch;
pub mod start;
