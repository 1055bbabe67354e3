//! The documents the editor has open: their text, path, and the last outline that could be read.

use std::collections::HashMap;
use std::path::PathBuf;

use super::outline::Outline;

/// The most documents open at once; past it, opening another is refused with a message.
pub const MAX_DOCUMENTS: usize = 256;

/// The largest document kept: the loader's own limit (`YamlLimits::max_bytes`).
pub const MAX_DOCUMENT_BYTES: usize = 1024 * 1024;

/// One open document.
#[derive(Debug)]
pub struct Document {
    pub text: String,
    /// The file it is (or will be) saved as: imports and children resolve beside it.
    pub path: PathBuf,
    /// From the last text that read as YAML, so a half-typed line does not lose it.
    pub outline: Option<Outline>,
}

/// Open documents by URI.
#[derive(Debug, Default)]
pub struct Documents {
    open: HashMap<String, Document>,
}

impl Document {
    /// Whether it is a scenario file, whose names are its protocol's.
    pub fn is_scenario(&self) -> bool {
        super::scenario::is_scenario_buffer(&self.path, &self.text)
    }
}

impl Documents {
    /// Opens (or replaces) a document; refuses one past the limits, saying which.
    pub fn open(&mut self, uri: &str, text: String) -> Result<&mut Document, String> {
        check_size(&text)?;
        if !self.open.contains_key(uri) && self.open.len() >= MAX_DOCUMENTS {
            return Err(format!(
                "more than {MAX_DOCUMENTS} documents open (the limit MAX_DOCUMENTS): close some"
            ));
        }
        let path = path_of_uri(uri);
        let document = self.open.entry(uri.to_string()).or_insert(Document {
            text: String::new(),
            path,
            outline: None,
        });
        document.text = text;
        Ok(document)
    }

    /// Replaces an open document's text (full sync).
    pub fn change(&mut self, uri: &str, text: String) -> Result<&mut Document, String> {
        check_size(&text)?;
        let document = self
            .open
            .get_mut(uri)
            .ok_or_else(|| format!("{uri} was changed but never opened"))?;
        document.text = text;
        Ok(document)
    }

    pub fn close(&mut self, uri: &str) {
        self.open.remove(uri);
    }

    pub fn get(&self, uri: &str) -> Option<&Document> {
        self.open.get(uri)
    }

    pub fn get_mut(&mut self, uri: &str) -> Option<&mut Document> {
        self.open.get_mut(uri)
    }
}

fn check_size(text: &str) -> Result<(), String> {
    if text.len() > MAX_DOCUMENT_BYTES {
        return Err(format!(
            "the document is {} bytes, more than the limit of {MAX_DOCUMENT_BYTES} \
             (MAX_DOCUMENT_BYTES): split it into child protocols or libraries",
            text.len()
        ));
    }
    Ok(())
}

/// The path of a `file://` URI (percent-decoded); any other URI is taken as a relative name,
/// so an untitled buffer still compiles (its imports resolve against the working directory).
pub fn path_of_uri(uri: &str) -> PathBuf {
    let Some(rest) = uri.strip_prefix("file://") else {
        let name = uri.rsplit(['/', ':']).next().unwrap_or("untitled.yaml");
        return PathBuf::from(name);
    };
    // `file://host/path`: only the local host (empty or `localhost`) is meaningful here.
    let path = rest.strip_prefix("localhost").unwrap_or(rest);
    let bytes = path.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let hex = |at: usize| {
            bytes
                .get(at)
                .and_then(|byte| char::from(*byte).to_digit(16))
        };
        match (bytes[index], hex(index + 1), hex(index + 2)) {
            (b'%', Some(high), Some(low)) => {
                decoded.push(u8::try_from(high * 16 + low).unwrap_or(b'?'));
                index += 3;
            }
            (byte, _, _) => {
                decoded.push(byte);
                index += 1;
            }
        }
    }
    PathBuf::from(String::from_utf8_lossy(&decoded).into_owned())
}

/// The `file://` URI of a path, percent-encoding what a URI may not hold.
pub fn uri_of_path(path: &std::path::Path) -> String {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut uri = String::from("file://");
    for byte in absolute.to_string_lossy().bytes() {
        if byte.is_ascii_alphanumeric() || b"/-._~".contains(&byte) {
            uri.push(char::from(byte));
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_uris_round_trip_with_escapes() {
        let path = std::path::Path::new("/tmp/a dir/p#1.yaml");
        let uri = uri_of_path(path);
        assert_eq!(uri, "file:///tmp/a%20dir/p%231.yaml");
        assert_eq!(path_of_uri(&uri), path);
    }

    #[test]
    fn documents_past_the_limits_are_refused() {
        let mut documents = Documents::default();
        let big = "#".repeat(MAX_DOCUMENT_BYTES + 1);
        assert!(
            documents
                .open("file:///a.yaml", big)
                .unwrap_err()
                .contains("MAX_DOCUMENT_BYTES")
        );
        for index in 0..MAX_DOCUMENTS {
            documents
                .open(&format!("file:///{index}.yaml"), String::new())
                .unwrap();
        }
        let refused = documents.open("file:///one-more.yaml", String::new());
        assert!(refused.unwrap_err().contains("MAX_DOCUMENTS"));
    }
}
