//! `protocol-run ui`: a web inspector over the store, served by the binary itself: the runs, a run's statechart, steps, state at any step, inbox and logs, updated live, and events sent to a waiting run through its inbox.

mod act;
mod assets;
mod drive;
mod guard;
mod live;
mod read;
mod timeline;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};

pub use drive::DriverPlace;
pub use guard::{Guard, random_token};

use crate::store::{RunChanges, SharedStore};

/// What every request is served from: the store (read and queued into, never driven: the
/// runs' holders drive them, and the drivers it starts for a redrive or a fork), who may ask,
/// how often live pages look for new steps, and the word of committed steps that wakes them
/// where the store gives it (PostgreSQL).
#[derive(Clone)]
pub struct Inspector {
    store: SharedStore,
    guard: Arc<Guard>,
    poll: Duration,
    place: Arc<DriverPlace>,
    drivers: drive::Drivers,
    changes: Option<RunChanges>,
}

impl Inspector {
    /// The inspector over `store`, following its committed steps where it can tell of them
    /// (a store that fails to is said on stderr, and its live pages look every `poll`).
    pub fn new(store: SharedStore, guard: Guard, poll: Duration, place: DriverPlace) -> Inspector {
        let changes = store
            .lock()
            .watch_runs()
            .map_err(|error| {
                eprintln!("warning: {error}; live pages look at the store every {poll:?}")
            })
            .ok()
            .flatten();
        Inspector {
            store,
            guard: Arc::new(guard),
            poll,
            place: Arc::new(place),
            drivers: drive::Drivers::default(),
            changes,
        }
    }
}

/// The pages, their assets and the API, every route behind the guard.
pub fn router(inspector: Inspector) -> Router {
    Router::new()
        .route("/", get(assets::page))
        .route("/runs/{*run}", get(assets::page))
        .route("/stats/{*protocol}", get(assets::page))
        .route("/assets/{name}", get(assets::asset))
        .route("/api/runs", get(read::runs))
        .route("/api/run", get(read::run))
        .route("/api/steps", get(read::steps))
        .route("/api/state", get(read::state))
        .route("/api/diagram", get(read::diagram))
        .route("/api/logs", get(read::logs))
        .route("/api/timeline", get(timeline::timeline))
        .route("/api/stats", get(read::stats))
        .route("/api/live", get(live::live))
        .route("/api/event", post(act::event))
        .route("/api/cancel", post(act::cancel))
        .route("/api/redrive", post(drive::redrive))
        .route("/api/fork", post(drive::fork))
        .route("/api/drivers", get(drive::drivers))
        .layer(axum::middleware::from_fn_with_state(
            inspector.clone(),
            guard::check,
        ))
        .with_state(inspector)
}

/// Serves `inspector` on `listener` until `stop` resolves (live pages are cut then: they
/// would keep a graceful shutdown waiting for good).
pub async fn serve(
    listener: tokio::net::TcpListener,
    inspector: Inspector,
    stop: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    tokio::select! {
        served = axum::serve(listener, router(inspector)) => served,
        () = stop => Ok(()),
    }
}
