//! What the kernel maps to run a program: the program, the interpreter of its `#!` line, its ELF loader (`PT_INTERP`), and the shared libraries the loader maps.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};

/// A program's file and what the kernel opens to execute it: the ELF interpreter it names
/// (`PT_INTERP`, the dynamic loader), or for a script the interpreter of its `#!` line (and that
/// one's loader). Links are resolved; what cannot be read adds nothing.
pub(super) fn with_interpreters(program: &Path) -> Vec<PathBuf> {
    let mut files = vec![program.to_path_buf()];
    let mut current = program.to_path_buf();
    // A script's interpreter, then the interpreter's loader: two steps at most.
    for _ in 0..2 {
        let Some(next) = interpreter_of(&current) else {
            break;
        };
        let next = next.canonicalize().unwrap_or(next);
        if files.contains(&next) {
            break;
        }
        files.push(next.clone());
        current = next;
    }
    files
}

/// The file the kernel opens to execute `program`, if any: the path after `#!`, or an ELF
/// file's `PT_INTERP`.
pub(super) fn interpreter_of(program: &Path) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = Vec::with_capacity(4096);
    std::fs::File::open(program)
        .ok()?
        .take(4096)
        .read_to_end(&mut head)
        .ok()?;
    if let Some(line) = head.strip_prefix(b"#!") {
        let line = line.split(|byte| *byte == b'\n').next()?;
        let text = std::str::from_utf8(line).ok()?.trim_start();
        let path = text.split_whitespace().next()?;
        return Path::new(path).is_absolute().then(|| PathBuf::from(path));
    }
    elf_interpreter(program)
}

/// `PT_INTERP` of a 64-bit little-endian ELF file (the machines this runs on).
pub(super) fn elf_interpreter(program: &Path) -> Option<PathBuf> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(program).ok()?;
    let mut header = [0u8; 64];
    file.read_exact(&mut header).ok()?;
    if &header[..4] != b"\x7fELF" || header[4] != 2 || header[5] != 1 {
        return None;
    }
    let word = |bytes: &[u8]| u64::from_le_bytes(bytes.try_into().unwrap_or([0; 8]));
    let half = |bytes: &[u8]| u64::from(u16::from_le_bytes(bytes.try_into().unwrap_or([0; 2])));
    let table = word(&header[32..40]);
    let entry_size = half(&header[54..56]);
    let entries = half(&header[56..58]).min(256);
    for index in 0..entries {
        let mut entry = [0u8; 56];
        file.seek(SeekFrom::Start(table + index * entry_size))
            .ok()?;
        file.read_exact(&mut entry).ok()?;
        // Type 3 is PT_INTERP: its bytes are the loader's path, NUL-terminated.
        if u32::from_le_bytes(entry[..4].try_into().ok()?) == 3 {
            let offset = word(&entry[8..16]);
            let size = word(&entry[32..40]).min(4096);
            let mut path = vec![0u8; usize::try_from(size).ok()?];
            file.seek(SeekFrom::Start(offset)).ok()?;
            file.read_exact(&mut path).ok()?;
            let path = path.split(|byte| *byte == 0).next()?;
            return Some(PathBuf::from(std::str::from_utf8(path).ok()?));
        }
    }
    None
}

/// Every file whose code runs when `program` runs: `with_interpreters`, then the shared libraries
/// its loader maps (`DT_NEEDED`, transitively, as the loader resolves them), each canonical.
pub(super) fn code_files(program: &Path) -> Vec<PathBuf> {
    let mut files = with_interpreters(program);
    // The last file that is no script is the one whose libraries are loaded.
    let loaded = files
        .iter()
        .rev()
        .find(|file| elf_interpreter(file).is_some())
        .cloned();
    if let Some(loaded) = loaded {
        for library in shared_libraries(&loaded) {
            if !files.contains(&library) {
                files.push(library);
            }
        }
    }
    files
}

/// The shared libraries the loader of `program` maps for it, as its own `--list` mode says (the
/// loader lists them without running any of their code), each canonical; kept per file and
/// modification time, so a program is listed once.
fn shared_libraries(program: &Path) -> Vec<PathBuf> {
    type Listed = HashMap<(PathBuf, Option<std::time::SystemTime>), Vec<PathBuf>>;
    static LISTED: OnceLock<Mutex<Listed>> = OnceLock::new();
    let modified = std::fs::metadata(program)
        .and_then(|metadata| metadata.modified())
        .ok();
    let key = (program.to_path_buf(), modified);
    let listed = LISTED.get_or_init(Mutex::default);
    if let Some(libraries) = listed
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key)
    {
        return libraries.clone();
    }
    let libraries = list_libraries(program);
    listed
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(key, libraries.clone());
    libraries
}

/// Runs `LOADER --list PROGRAM` (nothing else in the environment) and reads the paths it prints:
/// `name => /path (0x...)` and `/path (0x...)` lines.
fn list_libraries(program: &Path) -> Vec<PathBuf> {
    let Some(loader) = elf_interpreter(program) else {
        return Vec::new();
    };
    let Ok(output) = std::process::Command::new(&loader)
        .arg("--list")
        .arg(program)
        .env_clear()
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
    else {
        return Vec::new();
    };
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            let path = match line.split_once("=> ") {
                Some((_, rest)) => rest,
                None => line,
            };
            let path = path.rsplit_once(" (").map_or(path, |(path, _)| path);
            Path::new(path)
                .is_absolute()
                .then(|| Path::new(path).canonicalize().ok())
                .flatten()
        })
        .collect()
}
