//! A schema error and the node it sets aside, so the compiler can still check the rest of the document (`compile::set_aside`).

use crate::base::diagnostic::Diagnostic;

/// One schema error, with what it makes unusable.
#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    pub diagnostic: Diagnostic,
    /// The node set aside before the rest is compiled.
    pub(crate) unusable: String,
    /// Where the compiler's findings are not shown: setting the node aside may have changed
    /// their meaning (a state whose `type` was set aside is read as atomic).
    pub(crate) unreliable: String,
}

impl Violation {
    /// A node wrong in itself (a key the schema does not know, a mapping without a required
    /// key, a list item of no kind): set aside whole; what surrounds it means the same without it.
    pub fn node(pointer: String, diagnostic: Diagnostic) -> Self {
        Violation {
            diagnostic,
            unreliable: pointer.clone(),
            unusable: pointer,
        }
    }

    /// A value of the wrong type or outside its values: without it the mapping holding it
    /// may mean something else.
    pub fn value(pointer: &str, diagnostic: Diagnostic) -> Self {
        let parent = pointer.rsplit_once('/').map_or("", |(parent, _)| parent);
        Violation {
            diagnostic,
            unusable: pointer.to_string(),
            unreliable: parent.to_string(),
        }
    }
}
