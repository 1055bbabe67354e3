//! A protocol a host serves (`serve`, `mcp`): loaded, compiled within the operator's limit, its pinned inputs taken and its grants resolved from them alone, once for every run the host starts of it.

use std::path::Path;
use std::sync::Arc;

use super::exit_code;
use super::fleet::Recording;
use super::grants::PinnedInputs;
use super::resume::PinnedTexts;
use super::start::{Refusal, canonical};
use crate::base::diagnostic::render_all;
use crate::base::model::Permissions;
use crate::effects::capabilities::Capabilities;
use crate::pipeline::compile::machine::Machine;
use crate::pipeline::load::Loaded;
use crate::store::{Holder, RunOrigin, Store};

/// One protocol a host serves: every run of it shares this machine and these grants.
pub struct Served {
    pub loaded: Arc<Loaded>,
    pub machine: Arc<Machine>,
    /// The file, canonicalized: recorded with each run, so a later host resumes it.
    pub path: String,
    pub text: String,
    /// The operator's pinned inputs this protocol takes: every run takes them, no client gives
    /// them, and only they resolve a grant that names an input.
    pub pinned: PinnedInputs,
}

/// What the operator serves protocols under: the limit on grants (`--allow-*`, `--sandbox
/// strict`, as capabilities and as the flags gave them).
pub struct HostOperator<'a> {
    pub limit: &'a Capabilities,
    pub narrowing: &'a Permissions,
}

/// Loads and compiles `file` within the operator's limit, takes the pinned inputs `pin` gives
/// for its machine, and resolves its grants from them (`grants::for_host`); a protocol whose
/// grants a client would choose is refused, naming the input and the flag that would serve it.
pub fn serve(
    file: &Path,
    operator: &HostOperator,
    pin: &mut dyn FnMut(&Machine) -> Result<PinnedInputs, Refusal>,
) -> Result<Served, Refusal> {
    let text = crate::pipeline::load::read_text(file)
        .map_err(|error| Refusal::rendered(&error, exit_code::of_load_error(&error)))?;
    serve_text(file, text, operator, pin)
}

/// A version of `file` its instances started with (`texts`, pinned), compiled as `serve`
/// compiles the file itself, the host's pinned inputs (`pinned`) taken as far as it has them:
/// the machine a host resumes those instances with after the file changed.
pub fn pinned_version(
    file: &Path,
    texts: &PinnedTexts,
    operator: &HostOperator,
    pinned: &PinnedInputs,
) -> Result<Arc<Machine>, Refusal> {
    super::resume::reading_pinned(Some(texts.others.clone()), || {
        serve_text(file, texts.protocol.clone(), operator, &mut |machine| {
            Ok(pinned.taken_by(machine))
        })
    })
    .map(|served| served.machine)
}

/// `serve` of the file's text, `text`.
fn serve_text(
    file: &Path,
    text: String,
    operator: &HostOperator,
    pin: &mut dyn FnMut(&Machine) -> Result<PinnedInputs, Refusal>,
) -> Result<Served, Refusal> {
    let loaded = crate::pipeline::load::load_text(&file.display().to_string(), text.clone())
        .map_err(|diagnostics| Refusal::rendered(render_all(&diagnostics), exit_code::INVALID))?;
    let machine =
        crate::pipeline::compile::compile_limited(&loaded, &Arc::default(), operator.limit)
            .map_err(|diagnostics| {
                Refusal::rendered(render_all(&diagnostics), exit_code::INVALID)
            })?;
    let pinned = pin(&machine)?;
    let machine = super::grants::for_host(
        &loaded,
        operator.limit,
        operator.narrowing,
        machine,
        &pinned,
    )
    .map_err(|refusal| {
        Refusal::rendered(
            refusal.render(&file.display().to_string()),
            exit_code::INVALID,
        )
    })?;
    Ok(Served {
        pinned,
        loaded: Arc::new(loaded),
        machine: Arc::new(machine),
        path: canonical(file),
        text,
    })
}

impl Served {
    /// How a host records the runs of this protocol it starts or resumes in `store`: under the
    /// operator's narrowing as recorded (`grants`), from `origin`, held by `holder`.
    pub fn recording(
        &self,
        store: Box<dyn Store>,
        grants: Option<serde_json::Value>,
        origin: RunOrigin,
        holder: Holder,
    ) -> Recording {
        Recording {
            store,
            protocol_path: self.path.clone(),
            protocol_hash: crate::store::read_files::recorded_hash(&self.machine),
            protocol_text: self.text.clone(),
            read_texts: crate::store::read_files::read_texts(&self.machine),
            grants,
            origin,
            holder,
        }
    }
}
