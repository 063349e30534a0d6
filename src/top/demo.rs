//! `foster demo` in a terminal: the dashboard attached to the demo's supervisor.
//!
//! Owns [`run`]: it starts the demo's supervisor ([`crate::supervision::demo::start`], its output sent to a
//! log file and its helpers' lines kept but not relayed, so that nothing but the dashboard
//! writes to the terminal), runs the dashboard on its control socket, and, however the
//! dashboard ends (`q`, a termination signal, an error), stops the supervisor
//! ([`crate::supervision::demo::Demo::stop`]: SIGTERM, its orderly shutdown, which ends the whole tree) and
//! waits until it has ended, so that nothing the demo started is left running; then it says how
//! the tree ended and where the supervisor's log is.

use std::process::ExitCode;
use std::time::Duration;

use crate::supervision::demo::{self, DemoOptions};
use crate::top::{TopError, TopOptions};

/// Runs the demo with its dashboard; returns 0 once the tree has ended after `q` or a
/// termination signal, else the supervisor's exit status.
pub fn run(socket: Option<std::path::PathBuf>) -> Result<ExitCode, TopError> {
    let mut d = demo::start(&DemoOptions {
        json: false,
        socket,
        log_to_file: true,
    })?;
    let shown = crate::top::run(TopOptions {
        root: None,
        attach: Some(d.socket.clone()),
        interval: Duration::from_secs(1),
        collapse_depth: None,
        keys: crate::top::app::Keymap::Foster,
    });
    // The terminal may be gone (SIGHUP): these lines are best effort, the teardown is not.
    say("foster demo: stopping the supervisor; it ends the whole tree...");
    let (status, killed) = d.stop()?;
    say(&demo::ended_text(status, true, &killed));
    say(&format!(
        "foster demo: the supervisor's own lines are in {}",
        d.log.display()
    ));
    // Quitting, or a signal asking to stop, is the demo's normal end once the tree has ended.
    shown?;
    Ok(ExitCode::from(
        demo::exit_code(status, true).clamp(0, 255) as u8
    ))
}

/// Writes a line to standard error, ignoring failure (`eprintln!` would panic on a closed
/// terminal, before the supervisor is stopped).
fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}
