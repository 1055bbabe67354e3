//! The one integration-test binary: every test module is compiled together.

mod support;

mod semantics;
