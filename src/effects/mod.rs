//! Effects: the I/O behind effectful actions (processes, files), run by the driver on tokio.

pub mod process;
