//! A file a protocol was loaded from, by canonical path with a hash of its text: what a resume compares to tell a changed protocol, and the text a run keeps.

/// One file a load read (the protocol's own, or a library it imports), by canonical path,
/// with its text and the `content_hash` of it: a run keeps the texts it started with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadFile {
    pub path: String,
    pub hash: String,
    pub text: std::sync::Arc<str>,
}

impl ReadFile {
    /// The file shown as `path` (relative to the working directory), whose text is `text`.
    pub fn new(path: &str, text: &str) -> ReadFile {
        let shown = std::path::Path::new(path);
        let canonical = shown.canonicalize().unwrap_or_else(|_| shown.to_path_buf());
        ReadFile {
            path: canonical.display().to_string(),
            hash: content_hash(text),
            text: std::sync::Arc::from(text),
        }
    }
}

/// A stable fingerprint of a protocol's text: `fnv1a64:` and 16 hex digits. Not cryptographic:
/// it detects edits, not tampering; the text itself is stored too.
pub fn content_hash(text: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("fnv1a64:{hash:016x}")
}
