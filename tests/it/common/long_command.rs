//! A helper whose command line is longer than any terminal line, under a `foster run` of the
//! test's ([`Run`]): `/bin/sleep 1000` and sixty `0` arguments, named `long`. Shared by the
//! tests of how `ctl status` prints (or cuts) a command line.

use super::Dir;
use super::supervised::Run;

/// Starts the supervisor with the helper and returns once the helper has exec'd (its launch
/// event comes before the exec: its command line in `ctl --json status` says when), with the
/// command line as printed whole (`/bin/sleep 1000 0 0 …`).
pub fn start(d: &Dir) -> (Run, String) {
    let mut argv = vec!["/bin/sleep", "1000"];
    argv.extend(std::iter::repeat_n("0", 60));
    let config = format!(
        "[[helper]]\nname = \"long\"\ncommand = {}\n",
        serde_json::to_string(&argv).unwrap()
    );
    let mut run = Run::start_uncontained(d, &config);
    run.launch("long", 1);
    run.wait_status("the helper's command line exec'd", |s| {
        s["processes"]
            .as_array()
            .is_some_and(|ps| ps.iter().any(|p| p["cmdline"] == serde_json::json!(argv)))
    });
    (run, argv.join(" "))
}
