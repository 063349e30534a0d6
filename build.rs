//! Build script: records the commit foster is built from, for `foster --version`.
//!
//! Sets FOSTER_COMMIT to `commit HASH` (`git rev-parse --short HEAD`), with `-dirty` when
//! tracked files differ from it, or to `unknown commit` outside a git checkout (a source
//! tarball, a crate from a registry) or without git.

use std::process::Command;

/// `git ARGS` run in the package's directory: its trimmed output, or None when it fails.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    out.status.success().then(|| text.trim().to_string())
}

fn main() {
    let commit = match git(&["rev-parse", "--short", "HEAD"]) {
        Some(hash) if !hash.is_empty() => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            format!("commit {hash}{}", if dirty { "-dirty" } else { "" })
        }
        _ => {
            // Not a checkout: watch a path that never exists, which makes cargo run this again
            // on every build, so that a target directory shared with a checkout never keeps
            // "unknown commit" for it (cargo keys a build script's output by relative paths).
            println!("cargo:rerun-if-changed=.not-a-git-checkout");
            "unknown commit".to_string()
        }
    };
    println!("cargo:rustc-env=FOSTER_COMMIT={commit}");

    // Run again when HEAD moves (a checkout: .git/HEAD; a commit: the branch's ref, or
    // packed-refs), when the index changes, or when a source file does (the dirty flag).
    // Only existing paths: cargo reruns on every build for a missing one.
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=Cargo.toml");
    let mut watched = vec!["HEAD".to_string(), "index".into(), "packed-refs".into()];
    watched.extend(git(&["symbolic-ref", "-q", "HEAD"]));
    for name in watched {
        let path = git(&["rev-parse", "--git-path", &name]);
        if let Some(path) = path.filter(|p| std::path::Path::new(p).exists()) {
            println!("cargo:rerun-if-changed={path}");
        }
    }
}
