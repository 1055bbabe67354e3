//! Texts a load reads instead of the files on disk: a resumed run's libraries and child protocols as they were when it started (pinned), whatever the files hold now.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;

thread_local! {
    /// The texts that stand for files in the load running on this thread, by canonical path.
    /// Held here rather than passed down: files are read deep inside compilation (an import of
    /// an import, a child's child), through every front end's call of it.
    static PINNED: RefCell<Option<Rc<HashMap<PathBuf, String>>>> = const { RefCell::new(None) };
}

/// Runs `body` (loading and compiling a protocol) with `texts` read in place of the files at
/// their paths (canonical, as `ReadFile` records them); any other file is read from disk.
pub fn with_texts<T>(texts: HashMap<PathBuf, String>, body: impl FnOnce() -> T) -> T {
    /// Puts back what was pinned before, however `body` ends (a panic included).
    struct Restore(Option<Rc<HashMap<PathBuf, String>>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let before = self.0.take();
            PINNED.with(|pinned| *pinned.borrow_mut() = before);
        }
    }
    let before = PINNED.with(|pinned| pinned.borrow_mut().replace(Rc::new(texts)));
    let _restore = Restore(before);
    body()
}

/// The text pinned for the file at `path`, if the load running on this thread pins it.
pub(super) fn text_of(path: &Path) -> Option<String> {
    PINNED.with(|pinned| {
        let pinned = pinned.borrow();
        let texts = pinned.as_ref()?;
        texts.get(&canonical(path)).cloned()
    })
}

/// `path` canonicalized, or, for a file that is gone (a pinned file may have been deleted),
/// made absolute with `.` and `..` resolved by their names: what canonicalizing gave when it
/// existed, unless a symbolic link was on the way.
fn canonical(path: &Path) -> PathBuf {
    if let Ok(canonical) = path.canonicalize() {
        return canonical;
    }
    let absolute = std::env::current_dir()
        .map(|directory| directory.join(path))
        .unwrap_or_else(|_| path.to_path_buf());
    let mut resolved = PathBuf::new();
    for component in absolute.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                resolved.pop();
            }
            other => resolved.push(other),
        }
    }
    resolved
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pinned_text_stands_for_its_file_only_while_the_body_runs() {
        let path = PathBuf::from("/nonexistent/protocol-run/lib.library.yaml");
        let texts = HashMap::from([(path.clone(), "blocks: {}\n".to_string())]);
        let read = with_texts(texts, || {
            text_of(Path::new(
                "/nonexistent/protocol-run/sub/../lib.library.yaml",
            ))
        });
        assert_eq!(read.as_deref(), Some("blocks: {}\n"));
        assert_eq!(text_of(&path), None);
    }
}
