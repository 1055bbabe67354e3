//! `protocol-run lsp` under a real editor: headless Neovim's own LSP client (Debian's
//! `neovim` package, which .ci/run installs) gets diagnostics, completion and hover.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::lsp::client::end_of;

#[test]
fn neovim_shows_diagnostics_and_completes_states() {
    let neovim = Command::new("nvim").arg("--version").output().is_ok();
    if !crate::support::requirement::met(
        "neovim_shows_diagnostics_and_completes_states",
        "Neovim (`nvim`), the editor whose LSP client this test drives",
        "install Debian's package with `apt-get install -y neovim` (the install line in .ci/run)",
        neovim,
    ) {
        return;
    }
    let directory = crate::lsp::project("neovim");
    let typo = crate::lsp::PROTOCOL.replace("&& attempts >=", "&& atempts >=");
    let protocol = directory.join("demo.yaml");
    std::fs::write(&protocol, &typo).unwrap();
    let result_file = directory.join("result.json");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/lsp_neovim/client.lua");
    let (typo_line, typo_end) = end_of(&typo, "&& atempts");
    let (complete_line, complete_character) = end_of(&typo, "{ target: ");
    let (hover_line, hover_character) = end_of(&typo, "stop: idl");

    let output = Command::new("nvim")
        .args(["--headless", "--clean", "-n", "-i", "NONE", "-c"])
        .arg(format!("luafile {}", script.display()))
        .env("PROTOCOL_RUN", env!("CARGO_BIN_EXE_protocol-run"))
        .env("PROTOCOL_FILE", &protocol)
        .env("RESULT_FILE", &result_file)
        .env("TYPO_LINE", typo_line.to_string())
        .env("COMPLETE_LINE", complete_line.to_string())
        .env("COMPLETE_CHARACTER", complete_character.to_string())
        .env("HOVER_LINE", hover_line.to_string())
        .env("HOVER_CHARACTER", hover_character.to_string())
        .env("XDG_STATE_HOME", &directory)
        .env("XDG_CACHE_HOME", &directory)
        .current_dir(&directory)
        .output()
        .unwrap();
    let text = std::fs::read_to_string(&result_file).unwrap_or_else(|_| {
        panic!(
            "neovim wrote no results ({}):\n{}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    });
    let results: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(results.get("error"), None, "{results}");

    assert_eq!(results["diagnostics_received"], true, "{results}");
    let error = results["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|diagnostic| diagnostic["severity"] == 1)
        .unwrap_or_else(|| panic!("no error among {results}"));
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("unknown name `atempts`"),
        "{error}"
    );
    assert_eq!(error["line"], typo_line);
    // Neovim's column is a byte index into the line (it converts the server's UTF-16 one).
    let line_text = typo.lines().nth(typo_line).unwrap();
    let byte_column = line_text.find("atempts").unwrap();
    assert_eq!(error["col"], byte_column, "UTF-16 end {typo_end}: {error}");

    // The fix typed into the buffer (unsaved) cleared the error.
    assert_eq!(results["cleared"], true, "{results}");
    assert_eq!(
        results["completion"],
        serde_json::json!(["idle", "working", "finished"])
    );
    let hover = results["hover"].as_str().unwrap();
    assert!(hover.contains("Waiting for work."), "{hover}");
}
