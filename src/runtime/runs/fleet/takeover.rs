//! The runs a host takes up besides those it starts: at its start, the unfinished instances an earlier host left; while it runs (a shared store), those of hosts that died, claimed as their holders' leases run out.

use std::collections::HashSet;
use std::time::Duration;

use tokio::time::Instant;

use super::Fleet;
use crate::base::durable::TimerPolicy;
use crate::store::RunOrigin;

/// How often, and how, a running host looks for runs to take over.
pub(super) struct Takeover {
    every: Duration,
    next: Instant,
    timers: TimerPolicy,
    force: bool,
    /// Runs already said to be left (changed protocol, not restorable), so that each is said
    /// once, not at every look.
    told: HashSet<String>,
}

impl Takeover {
    /// When the next look is due.
    pub(super) fn next(&self) -> Instant {
        self.next
    }
}

impl Fleet {
    /// Looks every `every` for unfinished runs of this protocol that no live holder has (their
    /// host died: its lease ran out, or on this machine its lock was freed) and resumes them,
    /// as at the host's start (`timers`, `force`). For a shared store, where other hosts drive
    /// runs of the same protocol.
    pub fn with_takeover(mut self, every: Duration, timers: TimerPolicy, force: bool) -> Fleet {
        self.takeover = Some(Takeover {
            every,
            next: Instant::now() + every,
            timers,
            force,
            told: HashSet::new(),
        });
        self
    }

    /// Resumes every unfinished instance of this protocol that an earlier host recorded. An
    /// instance whose files changed goes on with the texts it started with (refused when they
    /// are not all kept) unless `force` moves it to the files; an instance that cannot be
    /// restored is reported and left.
    pub fn resume_recorded(&mut self, timers: TimerPolicy, force: bool) -> Result<(), String> {
        let mut told = HashSet::new();
        self.take_over(timers, force, true, &mut told)
    }

    /// The look `with_takeover` makes, due now; a failure is said on stderr and the next look
    /// tries again.
    pub(super) fn take_over_now(&mut self) {
        let Some(mut takeover) = self.takeover.take() else {
            return;
        };
        if let Err(message) =
            self.take_over(takeover.timers, takeover.force, false, &mut takeover.told)
        {
            eprintln!("warning: looking for runs to take over: {message}");
        }
        takeover.next = Instant::now() + takeover.every;
        self.takeover = Some(takeover);
        self.commit();
    }

    /// Claims the unfinished runs of this protocol that are not live here and that no live
    /// holder has, and resumes them. At the host's start (`at_start`) a changed protocol is an
    /// error when the texts its instances started with are not all kept, unless `force`, and
    /// every run left is said; later a run is left quietly when another host holds it (the
    /// usual case), and said once (`told`) otherwise.
    fn take_over(
        &mut self,
        timers: TimerPolicy,
        force: bool,
        at_start: bool,
        told: &mut HashSet<String>,
    ) -> Result<(), String> {
        let Some(recording) = &self.recording else {
            return Ok(());
        };
        // The store never holds a secret input: a host not given the protocol's secret inputs
        // could claim its runs but not resume them. It leaves them to a host that has them, and
        // says so once (at the start, each run it cannot resume is said, naming the input).
        let missing: Vec<&str> = self
            .machine
            .inputs
            .iter()
            .filter(|input| input.secret && !self.pinned.is_pinned(&input.name))
            .map(|input| input.name.as_str())
            .collect();
        if !at_start && !missing.is_empty() {
            if told.insert(String::from("\0secret inputs")) {
                eprintln!(
                    "serve: runs of this protocol whose host dies are left to a host given its \
                     secret input(s) {}: this one was not (--input {}); they are not stored \
                     with the runs",
                    missing.join(", "),
                    missing.join(" --input ")
                );
            }
            return Ok(());
        }
        let room = self.max_instances.saturating_sub(self.by_name.len());
        // At the start every unfinished run is read, so that those left past the limit are
        // counted; later no more than there is room for.
        let limit = if at_start { usize::MAX } else { room };
        let runs = recording
            .store
            .unfinished_runs(&recording.protocol_path, limit)
            .map_err(|error| error.to_string())?;
        let (recorded, started_by_mcp): (Vec<_>, Vec<_>) = runs
            .into_iter()
            .filter(|run| {
                run.id
                    .strip_prefix(&self.prefix)
                    .is_some_and(|name| !self.by_name.contains_key(name))
            })
            .partition(|run| run.origin != Some(RunOrigin::Mcp));
        // An MCP server resumes its own runs (their clients reach them through it, not here).
        if at_start && !started_by_mcp.is_empty() {
            eprintln!(
                "serve: {} unfinished run(s) of this protocol were started by `protocol-run mcp` \
                 and are left to it (the next `mcp` server resumes them)",
                started_by_mcp.len()
            );
        }
        // The protocol, and each library and child protocol its load read: each recorded
        // hash compared once, however many instances share it (reading the files again).
        let mut compared = HashSet::new();
        let mut changed_versions = Vec::new();
        for run in &recorded {
            if !compared.insert(run.protocol_hash.as_str()) {
                continue;
            }
            let unchanged = crate::runtime::runs::resume::unchanged(
                &recording.protocol_path,
                &recording.protocol_text,
                &run.protocol_hash,
                || format!("instance `{}`", &run.id[self.prefix.len()..]),
            );
            if let Err(changed) = unchanged
                && !force
            {
                changed_versions.push((run.id.clone(), run.protocol_hash.clone(), changed));
            }
        }
        // A version whose texts are kept goes on with them (pinned), beside the file's.
        let mut changed_hashes = HashSet::new();
        for (run, hash, changed) in changed_versions {
            let why = match self.prepare_version(&run, &hash) {
                Ok(true) => {
                    if told.insert(hash) {
                        eprintln!(
                            "serve: {} changed since {} started; the instances recorded under the \
                             text it started with go on with it (--upgrade moves them to the \
                             file's)",
                            changed.changed.path, changed.whose
                        );
                    }
                    continue;
                }
                Ok(false) => "The texts they started with are not all kept".to_string(),
                Err(message) => message,
            };
            if at_start {
                return Err(changed.message(&format!(
                    "{why}: restore the file, or pass --upgrade to move the instances to it as \
                     long as their states still exist"
                )));
            }
            if told.insert(hash.clone()) {
                eprintln!(
                    "warning: {}",
                    changed.message(&format!(
                        "{why}: left to a host that serves the text they started with"
                    ))
                );
            }
            changed_hashes.insert(hash);
        }
        let over_the_limit = recorded.len().saturating_sub(room);
        let resumable: Vec<String> = recorded
            .into_iter()
            .filter(|run| !changed_hashes.contains(&run.protocol_hash))
            .take(room)
            .map(|run| run.id)
            .collect();
        // One transaction claims them all: an instance another live process drives is left
        // to it.
        let Some(recording) = &mut self.recording else {
            return Ok(());
        };
        let claims = crate::runtime::runs::claims::claim(
            &mut *recording.store,
            &recording.holder.clone(),
            &resumable,
        )
        .map_err(|error| error.to_string())?;
        for (run, claimed) in resumable.iter().zip(claims) {
            let name = &run[self.prefix.len()..];
            if let Err(refused) = claimed {
                if at_start {
                    eprintln!("error: instance `{name}` not resumed: {refused}");
                }
                continue;
            }
            if !at_start {
                eprintln!("serve: instance `{name}` taken over (its host is gone)");
            }
            if let Err(message) = self.resume_run(run, timers) {
                // Left for another process (a `resume` that can supply what is missing).
                if let Some(recording) = &mut self.recording
                    && let Err(error) = recording
                        .store
                        .release_runs(std::slice::from_ref(run), &recording.holder)
                {
                    eprintln!("error: {error}");
                }
                if at_start || told.insert(run.clone()) {
                    eprintln!(
                        "error: instance `{name}` cannot resume: {}",
                        crate::base::secrets::mask(&message)
                    );
                }
            }
        }
        if over_the_limit > 0 && at_start {
            eprintln!(
                "warning: {over_the_limit} unfinished instance(s) not resumed: {} are live, the \
                 limit (--max-instances); they resume with a later `serve` once fewer are",
                self.max_instances
            );
        }
        self.commit();
        Ok(())
    }
}
