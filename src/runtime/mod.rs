//! Running a machine: the interpreter and its sessions (`run`), the runs service every front end goes through (`runs`), and what a run reports (log output, telemetry, statistics, lifecycle hooks).

pub mod lifecycle;
pub mod otlp;
pub mod output;
pub mod run;
pub mod runs;
pub mod statistics;
pub mod telemetry;
