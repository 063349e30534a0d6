//! Credentials and privileged targets: a credential change before and after the arm, set-id
//! targets.

use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use super::startup::{SERVE, serving};
use crate::gate::policy::Policy;
use crate::gate::{self, DeathPath};
use crate::process::identity::Identity;
use crate::qualify::barrier::{self, pipe, write_all};
use crate::qualify::harness::{End, Outcome, Root, fork_run, wait_end};

pub(super) fn cred_drop_before_arm(r: &mut Root) -> Outcome {
    let s = r.simple_supervisor(
        |f| {
            let mut spec = f.spec("/bin/sh", SERVE, Policy::term(), 0);
            spec.uid = Some(65534);
            spec.gid = Some(65534);
            spec
        },
        false,
    );
    let mut o = serving(r, s, libc::SIGTERM);
    o.prctl = format!("after setresuid(65534): {}", o.prctl);
    o.checked = "the spawner changed uid/gid first and armed after: the setting was kept".into();
    o
}

/// Arms in a forked child, changes its uid, reads the setting back: the kernel fact.
pub(super) fn raw_cleared_by_setuid() -> i32 {
    let (rd, wr) = pipe().expect("pipe");
    let w = wr.as_raw_fd();
    let pid = fork_run(move || {
        // SAFETY: prctl and setresuid in a forked single-threaded child.
        unsafe {
            libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGTERM as libc::c_ulong,
                0,
                0,
                0,
            );
            libc::setresgid(65534, 65534, 65534);
            libc::setresuid(65534, 65534, 65534);
            let mut got: libc::c_int = -1;
            libc::prctl(
                libc::PR_GET_PDEATHSIG,
                &mut got as *mut libc::c_int,
                0,
                0,
                0,
            );
            write_all(w, &got.to_ne_bytes());
        }
        0
    });
    drop(wr);
    let mut b = [0u8; 4];
    let n = barrier::read_full(
        rd.as_raw_fd(),
        &mut b,
        Instant::now() + Duration::from_secs(10),
    );
    let _ = wait_end(pid, Instant::now() + Duration::from_secs(10));
    if n == 4 { i32::from_ne_bytes(b) } else { -1 }
}

pub(super) fn cred_drop_after_arm(r: &mut Root) -> Outcome {
    let raw = raw_cleared_by_setuid();
    let foster = r.foster.to_string_lossy().into_owned();
    let s = r.simple_supervisor(
        move |f| {
            let args = [
                "-v",
                "exec",
                "--uid",
                "65534",
                "--gid",
                "65534",
                "--",
                "/bin/sh",
                "-c",
                "echo started; exec sleep 30",
            ];
            let mut spec = f.spec(&foster, &args, Policy::term(), 0);
            spec.env
                .push(("RUST_LOG".into(), Some("foster=info".into())));
            spec
        },
        false,
    );
    let mut o = serving(r, s, libc::SIGTERM);
    let mut saw = false;
    let mut line = r.err.next_line(Instant::now());
    while let Some(l) = line {
        saw |= l.contains("PR_GET_PDEATHSIG is 0 after the credential change: re-arming");
        line = r.err.next_line(Instant::now());
    }
    o.check(
        raw == 0,
        format!("raw: PR_GET_PDEATHSIG after setresuid read {raw}, expected 0 (cleared)"),
    );
    o.check(
        saw,
        "foster exec did not report the cleared setting and its re-arming",
    );
    o.prctl = format!(
        "raw: armed SIGTERM, read {raw} after setresuid (cleared); foster exec re-read 0 and \
         re-armed SIGTERM"
    );
    o.checked =
        "the kernel clears the setting on a uid change; foster exec re-read it and re-armed".into();
    o
}

// Long: one case's scenario, read top to bottom.
pub(super) fn setuid_target(r: &mut Root) -> Outcome {
    let mut o = Outcome::default();
    let target = std::env::temp_dir().join(format!("foster-qualify-setuid-{}", r.me));
    let src = if std::path::Path::new("/bin/true").exists() {
        "/bin/true"
    } else {
        "/usr/bin/true"
    };
    if std::fs::copy(src, &target).is_err()
        || std::fs::set_permissions(
            &target,
            std::os::unix::fs::PermissionsExt::from_mode(0o4755),
        )
        .is_err()
    {
        o.problems
            .push("cannot make a set-user-ID file in the temporary directory".into());
        return o;
    }
    let path = target.to_string_lossy().into_owned();
    let p2 = path.clone();
    r.simple_supervisor(move |f| f.spec(&p2, &[], Policy::term(), 0), false);
    let line = r.sup.next_line(r.soon()).unwrap_or_default();
    o.check(
        line.starts_with("error ") && line.contains("set-user-ID"),
        format!("the Spawner did not refuse: {line}"),
    );
    let run = |extra: &[&str]| {
        let mut c = std::process::Command::new(&r.foster);
        crate::process::signal::reserved_as_inherited(&mut c);
        c.args([
            "exec",
            "--parent",
            &Identity::current()
                .map(|i| i.to_string())
                .unwrap_or_default(),
        ])
        .args(extra)
        .arg("--")
        .arg(&path)
        .output()
    };
    let refused = run(&[]);
    let allowed = run(&["--allow-setid"]);
    let _ = std::fs::remove_file(&target);
    match (refused, allowed) {
        (Ok(a), Ok(b)) => {
            let msg = String::from_utf8_lossy(&a.stderr);
            o.check(
                a.status.code() == Some(gate::EXIT_REFUSED_TARGET),
                format!("foster exec status {:?}, expected 123", a.status.code()),
            );
            o.check(
                msg.contains("set-user-ID"),
                format!("foster exec message: {msg}"),
            );
            o.check(
                b.status.code() == Some(0),
                format!("--allow-setid status {:?}", b.status.code()),
            );
            o.check(
                String::from_utf8_lossy(&b.stderr).contains("warning"),
                "--allow-setid gave no warning",
            );
            o.helper = format!(
                "not created by the Spawner; foster exec {}",
                End::Exited(a.status.code().unwrap_or(-1)).text()
            );
        }
        _ => o.problems.push("cannot run foster exec".into()),
    }
    o.observed_parent = "not checked (refused before fork)".into();
    o.prctl = "not reached".into();
    o.path = Some(DeathPath::None);
    o.target = "never started (started only with --allow-setid)".into();
    o.checked =
        "refused with a message naming set-user-ID; --allow-setid ran it with a warning".into();
    o
}
