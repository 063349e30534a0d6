//! The qualification cases: what each does, what it expects, and the programs it runs.
//!
//! Owns the table of cases ([`CASES`]), their scenarios (run by a case root on the harness of
//! [`crate::qualify::harness`]) and the programs some cases run as helpers ([`lifeline_helper`],
//! [`enter_helper`]). A case root is single-threaded when it forks; helpers are launched
//! through the real spawner and gate, and targets are real programs (`/bin/sh`, `sleep`,
//! `foster exec`).
//!
//! - [`startup`]: the orderings, serving and notification, failed launches.
//! - [`threads`]: the creating thread.
//! - [`credentials`]: credential changes and privileged targets.
//! - [`generations`]: generations, adoption, stale identities, the lifeline.
//! - [`pidns`]: a parent in another PID namespace.
//! - [`adoption`]: an adoption through a short-lived parent.

mod adoption;
mod credentials;
mod generations;
mod pidns;
mod startup;
mod threads;

pub use self::generations::{enter_helper, lifeline_helper};

use self::adoption::adoption_through_short_lived_parent;
use self::credentials::{cred_drop_after_arm, cred_drop_before_arm, setuid_target};
use self::generations::{
    grandchild_next_generation, lifeline_only, nested_subreaper, stale_parent,
};
use self::pidns::{other_pidns_exec, other_pidns_in_process};
use self::startup::{
    exec_failure, gone_after_check, gone_before_arm, gone_between_arm_and_check, later_loss,
    normal, notify, prctl_failure, signal_blocked, signal_ignored,
};
use self::threads::{thread_exit_raw, thread_exit_spawner};
use crate::qualify::harness::CaseDef;

/// Every case, in matrix order.
pub static CASES: &[CaseDef] = &[
    CaseDef {
        name: "gone-before-arm",
        death: "supervisor killed while the helper waits before prctl",
        expect: "check path: exit 120, target never starts",
        needs_root: None,
        run: gone_before_arm,
    },
    CaseDef {
        name: "gone-between-arm-and-check",
        death: "supervisor killed after prctl, before the parent check",
        expect: "signal (or check) path, target never starts",
        needs_root: None,
        run: gone_between_arm_and_check,
    },
    CaseDef {
        name: "gone-after-check",
        death: "supervisor killed after a passed check, before exec",
        expect: "signal path, target never starts",
        needs_root: None,
        run: gone_after_check,
    },
    CaseDef {
        name: "normal",
        death: "none: the target runs and exits 0",
        expect: "no notification, exit 0, supervisor reaps",
        needs_root: None,
        run: normal,
    },
    CaseDef {
        name: "later-loss",
        death: "supervisor killed while the target serves",
        expect: "signal path: target killed by SIGTERM",
        needs_root: None,
        run: later_loss,
    },
    CaseDef {
        name: "signal-blocked",
        death: "supervisor (SIGTERM blocked in its launcher) killed while serving",
        expect: "gate unblocks it: killed by SIGTERM",
        needs_root: None,
        run: signal_blocked,
    },
    CaseDef {
        name: "signal-ignored",
        death: "supervisor (SIGTERM ignored in its launcher) killed while serving",
        expect: "gate resets it: killed by SIGTERM",
        needs_root: None,
        run: signal_ignored,
    },
    CaseDef {
        name: "exec-failure",
        death: "none: the target's interpreter does not exist",
        expect: "launcher gets ENOENT, helper exits 127",
        needs_root: None,
        run: exec_failure,
    },
    CaseDef {
        name: "prctl-failure",
        death: "none: the policy names signal 65",
        expect: "launcher gets EINVAL, helper exits 121, target never starts",
        needs_root: None,
        run: prctl_failure,
    },
    CaseDef {
        name: "thread-exit-raw",
        death: "a worker thread that forked a raw armed child exits",
        expect: "child signalled while the supervisor lives (the kernel fact)",
        needs_root: None,
        run: thread_exit_raw,
    },
    CaseDef {
        name: "thread-exit-spawner",
        death: "a worker thread that asked the Spawner for the helper exits; later the supervisor",
        expect: "helper unharmed by the thread, killed by SIGTERM with the supervisor",
        needs_root: None,
        run: thread_exit_spawner,
    },
    CaseDef {
        name: "cred-drop-before-arm",
        death: "supervisor killed; helper launched with uid/gid 65534",
        expect: "armed after the change, kept: killed by SIGTERM",
        needs_root: Some("setresuid needs root"),
        run: cred_drop_before_arm,
    },
    CaseDef {
        name: "cred-drop-after-arm",
        death: "supervisor killed; foster exec --uid 65534 drops after arming",
        expect: "cleared by the change, foster exec re-arms: killed by SIGTERM",
        needs_root: Some("setresuid needs root"),
        run: cred_drop_after_arm,
    },
    CaseDef {
        name: "setuid-target",
        death: "none: the target is set-user-ID",
        expect: "refused by the Spawner and by foster exec (123); allowed with --allow-setid",
        needs_root: None,
        run: setuid_target,
    },
    CaseDef {
        name: "grandchild-next-generation",
        death: "the helper (a shell) is killed; its child ran foster exec",
        expect: "grandchild armed with the next policy: killed by SIGHUP",
        needs_root: None,
        run: grandchild_next_generation,
    },
    CaseDef {
        name: "nested-subreaper",
        death: "the helper's parent, then the nearer subreaper, are killed",
        expect: "adopted by subreaper B, then A (never PID 1), notified each time",
        needs_root: None,
        run: nested_subreaper,
    },
    CaseDef {
        name: "stale-parent",
        death: "none: FOSTER_PARENT inherited through a foster-unaware shell, or reused pid",
        expect: "foster exec refuses both (120), target never starts",
        needs_root: None,
        run: stale_parent,
    },
    CaseDef {
        name: "lifeline-only",
        death: "supervisor killed after the helper's signal was cleared",
        expect: "lifeline path: the helper exits 124",
        needs_root: None,
        run: lifeline_only,
    },
    CaseDef {
        name: "notify",
        death: "supervisor killed while an in-process helper with reaction notify serves",
        expect: "the loss reaches the program's event loop; it drains and exits 0 itself",
        needs_root: None,
        run: notify,
    },
    CaseDef {
        name: "other-pidns-exec",
        death: "supervisor killed; its child, in another PID namespace, ran foster exec",
        expect: "122 without FOSTER_PARENT_PIDFD; with it the pidfd decides: killed by SIGTERM",
        needs_root: Some("a PID namespace needs root"),
        run: other_pidns_exec,
    },
    CaseDef {
        name: "other-pidns-in-process",
        death: "supervisor killed; its child, in another PID namespace, used the in-process gate",
        expect: "122 without FOSTER_PARENT_PIDFD; with it the pidfd decides: exits 143",
        needs_root: Some("a PID namespace needs root"),
        run: other_pidns_in_process,
    },
    CaseDef {
        name: "adoption-through-short-lived-parent",
        death: "a helper's child forks and ends at once, born after foster read its tree",
        expect: "its orphan adopted as expected, generation 3, and ended by its SIGTERM policy",
        needs_root: Some("the kernel announces births in the tree only to CAP_NET_ADMIN here"),
        run: adoption_through_short_lived_parent,
    },
];

/// The case named `name`.
pub fn find(name: &str) -> Option<&'static CaseDef> {
    CASES.iter().find(|c| c.name == name)
}
