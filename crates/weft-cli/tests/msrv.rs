//! The workspace's `rust-version` (the README's "1.90 or newer") is at least what every locked
//! dependency declares: a dependency update that raises the oldest toolchain able to build
//! weft must raise it too. (It once said 1.85 while ordered-float needed 1.90, so the README's
//! commands failed on the toolchain it named.) `cargo metadata` reads the lockfile, offline
//! when every locked package is already downloaded; a build downloads only this platform's,
//! so on a fresh machine it fetches the rest (Windows-only crates, say) from the registry.

use std::process::Command;

/// "1.90" or "1.88.0" as (major, minor, patch).
fn version(v: &str) -> (u64, u64, u64) {
    let mut parts = v.split('.').map(|p| p.parse::<u64>().unwrap_or(0));
    (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    )
}

#[test]
fn rust_version_covers_every_locked_dependency() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let metadata = |offline: bool| {
        let mut c = Command::new(&cargo);
        c.args(["metadata", "--format-version", "1", "--locked"])
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        if offline {
            c.arg("--offline");
        }
        c.output().expect("cargo metadata runs")
    };
    let mut out = metadata(true);
    if !out.status.success() {
        out = metadata(false);
    }
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata is JSON");
    let packages = m["packages"].as_array().expect("packages");
    let ours = packages
        .iter()
        .find(|p| p["name"] == "weft-core")
        .and_then(|p| p["rust_version"].as_str())
        .expect("weft-core has a rust-version");
    let too_new: Vec<String> = packages
        .iter()
        .filter_map(|p| {
            let v = p["rust_version"].as_str()?;
            (version(v) > version(ours)).then(|| {
                format!(
                    "{} {} needs {v}",
                    p["name"].as_str().unwrap_or("?"),
                    p["version"].as_str().unwrap_or("?")
                )
            })
        })
        .collect();
    assert!(
        too_new.is_empty(),
        "rust-version {ours} in Cargo.toml (and the README) is older than what these need: {}",
        too_new.join(", ")
    );
}
