//! The spawner's edge cases, with real launches: the child's stack and its guard page, standard
//! descriptors whose sources are themselves standard descriptor numbers, and the group list of
//! a launch that sets only a group.
//!
//! The tests that move descriptors 0 to 2 (shared by every test of a process) run again alone
//! in a process of their own ([`in_own_process`]).

use crate::common;

use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::process::{Command, Stdio};

use foster::gate::policy::Policy;
use foster::gate::spawner::{LaunchSpec, Launched, Spawner};

const INNER: &str = "FOSTER_SPAWNER_TEST_INNER";

/// Runs the test `name` again, alone, in a process of its own. True in that process (the
/// caller then runs the body); false in the outer one, once the inner run passed.
fn in_own_process(name: &str) -> bool {
    if std::env::var(INNER).as_deref() == Ok(name) {
        return true;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            &format!("spawner::{name}"),
            "--exact",
            "--test-threads=1",
            "--nocapture",
        ])
        .env(INNER, name)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{name}, in its own process:\n{text}");
    assert!(text.contains("1 passed"), "{name} did not run:\n{text}");
    false
}

/// Waits for a launched child of this process and returns its exit code.
fn reap(l: &Launched) -> i32 {
    let mut status = 0;
    // SAFETY: waits for our own child.
    let r = unsafe { libc::waitpid(l.pid, &mut status, 0) };
    assert_eq!(r, l.pid, "waitpid: {}", std::io::Error::last_os_error());
    assert!(
        libc::WIFEXITED(status),
        "child ended by a signal: {status:#x}"
    );
    libc::WEXITSTATUS(status)
}

/// A close-on-exec pipe: (read end, write end).
fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: an array of two ints; the descriptors are owned from here on.
    unsafe {
        assert_eq!(libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC), 0);
        (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1]))
    }
}

/// `fd` moved to the number `to`, close-on-exec (as a launcher's own descriptors are).
fn move_to(fd: OwnedFd, to: RawFd) -> OwnedFd {
    // SAFETY: dup3 onto a number this process gives up; the result is owned from here on.
    unsafe {
        assert_eq!(libc::dup3(fd.as_raw_fd(), to, libc::O_CLOEXEC), to, "dup3");
        OwnedFd::from_raw_fd(to)
    }
}

/// A close-on-exec duplicate of `fd` above the standard numbers, to put it back later.
fn save(fd: RawFd) -> OwnedFd {
    // SAFETY: duplicates a descriptor of this process.
    unsafe { OwnedFd::from_raw_fd(libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 10)) }
}

fn restore(saved: &OwnedFd, to: RawFd) {
    // SAFETY: puts a saved descriptor back on its number.
    unsafe { libc::dup2(saved.as_raw_fd(), to) };
}

/// A pipe whose read end holds `text` (then end of file).
fn pipe_holding(text: &str) -> OwnedFd {
    let (r, w) = pipe();
    let mut w = std::fs::File::from(w);
    std::io::Write::write_all(&mut w, text.as_bytes()).unwrap();
    r
}

fn file(path: &std::path::Path) -> OwnedFd {
    std::fs::File::create(path).unwrap().into()
}

/// The child runs on a stack of its own between clone and exec, in the launcher's memory
/// (CLONE_VM): a PROT_NONE page below it makes an overflow fault instead of writing into the
/// launcher's heap.
#[test]
fn the_child_stack_has_a_guard_page_below_it() {
    let sp = Spawner::start().unwrap();
    let l = sp
        .launch(LaunchSpec::new("/bin/true", [""; 0], Policy::term()))
        .unwrap();
    assert_eq!(reap(&l), 0);
    let stack = sp.child_stack();
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let mapping_of = |addr: usize| {
        maps.lines()
            .find(|l| {
                let (range, _) = l.split_once(' ').unwrap();
                let (lo, hi) = range.split_once('-').unwrap();
                let (lo, hi) = (
                    usize::from_str_radix(lo, 16).unwrap(),
                    usize::from_str_radix(hi, 16).unwrap(),
                );
                lo <= addr && addr < hi
            })
            .map(|l| l.to_string())
    };
    let top = mapping_of(stack.end - 1).expect("the stack is mapped");
    let bottom = mapping_of(stack.start).expect("the stack is mapped");
    assert!(top.contains(" rw-p "), "{top}");
    assert_eq!(top, bottom, "the stack is one mapping");
    let below = mapping_of(stack.start - 1);
    assert!(
        below.as_deref().is_some_and(|l| l.contains(" ---p ")),
        "no PROT_NONE guard page below the child stack {stack:#x?}: {below:?}"
    );
}

/// A source on its own number (`stdin` from descriptor 0, close-on-exec): `dup2(0, 0)` does
/// nothing, and left close-on-exec set, so the program started with its stdin closed.
#[test]
fn a_stdio_source_on_its_own_number_reaches_the_program() {
    if !in_own_process("a_stdio_source_on_its_own_number_reaches_the_program") {
        return;
    }
    let d = common::Dir::new("spawner", "own");
    let out = d.path("out");
    let saved = save(0);
    let mut spec = LaunchSpec::new("/bin/cat", [""; 0], Policy::term());
    spec.stdin = Some(move_to(pipe_holding("hello\n"), 0));
    spec.stdout = Some(file(&out));
    let sp = Spawner::start().unwrap(); // kept: its thread is the child's parent
    let l = sp.launch(spec).unwrap();
    restore(&saved, 0);
    assert_eq!(reap(&l), 0, "cat failed: its stdin was closed");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "hello\n");
}

/// Sources that are other slots' targets: stdin from descriptor 1, stdout from 2, stderr from
/// 0 (a rotation). Applied in order, the first dup2 overwrote the next one's source.
#[test]
fn stdio_sources_that_are_each_others_targets_are_moved_first() {
    if !in_own_process("stdio_sources_that_are_each_others_targets_are_moved_first") {
        return;
    }
    let d = common::Dir::new("spawner", "rotate");
    let (out, err) = (d.path("out"), d.path("err"));
    let saved: Vec<OwnedFd> = (0..3).map(save).collect();
    let mut spec = LaunchSpec::new("/bin/sh", ["-c", "cat; echo oops >&2"], Policy::term());
    spec.stdin = Some(move_to(pipe_holding("hello\n"), 1));
    spec.stdout = Some(move_to(file(&out), 2));
    spec.stderr = Some(move_to(file(&err), 0));
    let sp = Spawner::start().unwrap(); // kept: its thread is the child's parent
    let l = sp.launch(spec);
    for (i, s) in saved.iter().enumerate() {
        restore(s, i as RawFd);
    }
    let l = l.unwrap();
    assert_eq!(reap(&l), 0);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "hello\n", "stdout");
    assert_eq!(std::fs::read_to_string(&err).unwrap(), "oops\n", "stderr");
}

/// A group alone (no uid) clears the supplementary group list, as the field's documentation
/// says, in a launcher that has one.
#[test]
fn a_group_alone_clears_the_supplementary_groups() {
    if common::skip::unless_root("not root, so no group list to set") {
        return;
    }
    if !in_own_process("a_group_alone_clears_the_supplementary_groups") {
        return;
    }
    // This process (alone in its own) gets a group list of its own first.
    let groups: [libc::gid_t; 2] = [4243, 4244];
    // SAFETY: setgroups with an array of two gids.
    assert_eq!(unsafe { libc::setgroups(2, groups.as_ptr()) }, 0);
    let (r, w) = pipe();
    let mut spec = LaunchSpec::new("/bin/cat", ["/proc/self/status"], Policy::term());
    spec.gid = Some(4242);
    spec.stdout = Some(w);
    let sp = Spawner::start().unwrap(); // kept: its thread is the child's parent
    let l = sp.launch(spec).unwrap();
    let mut status = String::new();
    std::fs::File::from(r).read_to_string(&mut status).unwrap();
    assert_eq!(reap(&l), 0);
    assert_eq!(common::status_ids(&status, "Gid:"), vec![4242; 4]);
    assert_eq!(common::status_ids(&status, "Groups:"), Vec::<u32>::new());
    assert_eq!(common::status_ids(&status, "Uid:"), vec![0; 4]);
}

/// A launcher started with its stdin closed: the spawner's own descriptors (its pidfd, the
/// gate's lifeline; the report pipe) may land on 0 to 2, where the child's stdio then
/// overwrote them (the gate polled the program's stdin as its lifeline, and refused with 124).
#[test]
fn a_launcher_without_stdin_keeps_its_own_descriptors_apart() {
    if !in_own_process("a_launcher_without_stdin_keeps_its_own_descriptors_apart") {
        return;
    }
    let d = common::Dir::new("spawner", "closed");
    let out = d.path("out");
    let input = pipe_holding("hello\n");
    let output = file(&out);
    let saved = save(0);
    // SAFETY: closes this process's stdin (saved above, put back below).
    unsafe { libc::close(0) };
    let sp = Spawner::start().unwrap(); // kept: its thread is the child's parent
    let mut spec = LaunchSpec::new("/bin/cat", [""; 0], Policy::term());
    spec.stdin = Some(input);
    spec.stdout = Some(output);
    let l = sp.launch(spec).map(|mut l| {
        if l.pidfd.as_raw_fd() == 0 {
            l.pidfd = save(0); // (and 0 is closed when the original is dropped here)
        }
        l
    });
    restore(&saved, 0);
    let l = l.unwrap();
    assert_eq!(reap(&l), 0);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "hello\n");
}

/// Extra descriptors (the s6 notification descriptor) reach their numbers, whichever numbers
/// their sources and the spawner's own descriptors (its pidfd, the report pipe) had: here the
/// sources sit just above the standard ones, where the numbers asked for are. The child's own
/// pid reaches the variable named for it (systemd's `WATCHDOG_PID`), replacing one inherited.
#[test]
fn extra_descriptors_reach_their_numbers_and_the_pid_variable_its_pid() {
    if !in_own_process("extra_descriptors_reach_their_numbers_and_the_pid_variable_its_pid") {
        return;
    }
    let sp = Spawner::start().unwrap(); // kept: its thread is the child's parent
    let (ra, wa) = pipe();
    let (rb, wb) = pipe();
    // Each source is given the other's number (a swap): placed in order, the first placement
    // would overwrite the second one's source.
    let (na, nb) = (wb.as_raw_fd(), wa.as_raw_fd());
    let script = format!("echo a >&{na}; echo b >&{nb}; echo \"$WATCHDOG_PID $$\" >&{na}");
    let mut spec = LaunchSpec::new("/bin/sh", ["-c", script.as_str()], Policy::term());
    spec.extra_fds = vec![(wa, na), (wb, nb)];
    spec.env = vec![("WATCHDOG_PID".into(), Some("1".into()))];
    spec.pid_env = Some("WATCHDOG_PID".into());
    let l = sp.launch(spec).unwrap();
    assert_eq!(reap(&l), 0);
    let mut a = String::new();
    std::fs::File::from(ra).read_to_string(&mut a).unwrap();
    let mut b = String::new();
    std::fs::File::from(rb).read_to_string(&mut b).unwrap();
    assert_eq!(a, format!("a\n{0} {0}\n", l.pid), "the first pipe, at {na}");
    assert_eq!(b, "b\n", "the second pipe, at {nb}");
    // Numbers 0 to 2 are the standard ones, and a number is given once.
    for numbers in [[2, 5], [5, 5]] {
        let mut spec = LaunchSpec::new("/bin/true", [""; 0], Policy::term());
        spec.extra_fds = numbers.iter().map(|&n| (pipe().1, n)).collect();
        let e = sp.launch(spec).unwrap_err();
        assert!(e.pid().is_none(), "{numbers:?}: refused before fork: {e}");
    }
}

/// The numbers of the descriptors process `pid` holds, ascending.
fn numbers(pid: i32) -> Vec<RawFd> {
    let mut v: Vec<RawFd> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_str().unwrap().parse().unwrap())
        .collect();
    v.sort_unstable();
    v
}

/// A helper holds its standard descriptors, its extra ones and those this process's caller
/// passed (open without close-on-exec when the spawner started), nothing else: not the
/// launcher's own (close-on-exec: other helpers' pipes, pidfds), not the spawner's reserved
/// numbers, not the copies of its sources placed there. A launch whose descriptors fit below
/// the spawner's boundary shares the launcher's table and keeps only what lies below it, so a
/// descriptor opened later without close-on-exec, high, does not reach it either; a launch
/// whose extra descriptor sits above the reserved numbers copies the table as fork does.
#[test]
fn a_helper_holds_only_its_own_descriptors() {
    if !in_own_process("a_helper_holds_only_its_own_descriptors") {
        return;
    }
    let (_passed_r, passed) = pipe();
    // SAFETY: clears close-on-exec on a descriptor we own, as a caller passing it would.
    unsafe { libc::fcntl(passed.as_raw_fd(), libc::F_SETFD, 0) };
    // Those this process's caller passed (the test harness's), and `passed`.
    let inherited: Vec<RawFd> = numbers(std::process::id() as i32)
        .into_iter()
        // SAFETY: reads the flags of a number, open or not.
        .filter(|&fd| fd > 2 && unsafe { libc::fcntl(fd, libc::F_GETFD) } == 0)
        .collect();
    assert!(inherited.contains(&passed.as_raw_fd()));
    let sp = Spawner::start().unwrap(); // kept: its thread is the child's parent
    // What a supervisor of many helpers holds: their pipes, close-on-exec.
    let held: Vec<(OwnedFd, OwnedFd)> = (0..100).map(|_| pipe()).collect();
    // SAFETY: a duplicate without close-on-exec, high; owned from here on.
    let late = unsafe { libc::fcntl(held[0].1.as_raw_fd(), libc::F_DUPFD, 400) };
    assert!(late >= 400, "{}", std::io::Error::last_os_error());
    // SAFETY: `late` was just returned by fcntl(F_DUPFD): open and owned by nobody else.
    let late = unsafe { OwnedFd::from_raw_fd(late) };
    // The helper, a `cat`, copies a line from one pipe to another: once the line is back, it
    // runs its program (its exec is over); its table is read, then its input closed.
    let list = |number: RawFd| {
        let (in_r, in_w) = pipe();
        let (out_r, out_w) = pipe();
        let (_note_r, note_w) = pipe();
        let mut spec = LaunchSpec::new("/bin/cat", [""; 0], Policy::term());
        spec.stdin = Some(in_r);
        spec.stdout = Some(out_w);
        spec.extra_fds = vec![(note_w, number)];
        let l = sp.launch(spec).unwrap();
        let mut input = std::fs::File::from(in_w);
        std::io::Write::write_all(&mut input, b"line\n").unwrap();
        let mut out = std::fs::File::from(out_r);
        let mut line = [0u8; 5];
        out.read_exact(&mut line).unwrap();
        let held = numbers(l.pid);
        drop(input);
        assert_eq!(reap(&l), 0);
        // End of file: no copy of the write end is left on a reserved number either.
        let mut rest = String::new();
        out.read_to_string(&mut rest).unwrap();
        held
    };
    let want = |number: RawFd| {
        let mut v = vec![0, 1, 2, number];
        v.extend(&inherited);
        v.sort_unstable();
        v
    };
    assert_eq!(
        list(7),
        want(7),
        "the launch's own, and {inherited:?} passed"
    );
    // Above the reserved numbers: the copied table, which holds the late one (without
    // close-on-exec, as a descriptor foster opens never is): closed first.
    drop(late);
    assert_eq!(
        list(250),
        want(250),
        "the launch's own, and {inherited:?} passed"
    );
    drop(held);
}

/// The identity a gated launch hands back, and the `FOSTER_PARENT` its helper execs with, are
/// the helper's own as `/proc` tells them: the start time the child takes from the clock
/// (`BirthClock`, most launches) or from `/proc/self/stat` (a launch across a clock tick) is
/// the kernel's. 200 launches: a few cross a tick, and take the second way.
#[test]
fn a_gated_launch_knows_its_helpers_identity() {
    use std::io::BufRead;
    let sp = Spawner::start().unwrap(); // kept: its thread is the children's parent
    for i in 0..200 {
        let (in_rd, in_wr) = pipe();
        let (out_rd, out_wr) = pipe();
        let script = "echo \"$FOSTER_PARENT\"; exec cat";
        let mut spec = LaunchSpec::new("/bin/sh", ["-c", script], Policy::term());
        (spec.stdin, spec.stdout) = (Some(in_rd), Some(out_wr));
        let l = sp.launch(spec).unwrap();
        // The helper waits on the pipe this test holds: it lives while it is read.
        let mut seen = String::new();
        std::io::BufReader::new(std::fs::File::from(out_rd))
            .read_line(&mut seen)
            .unwrap();
        let from_proc = foster::process::identity::Identity::of(l.pid).unwrap();
        drop(in_wr);
        assert_eq!(reap(&l), 0);
        assert_eq!(l.identity, Some(from_proc), "launch {i}");
        assert_eq!(
            seen.trim_end(),
            from_proc.to_string(),
            "launch {i}: FOSTER_PARENT"
        );
    }
}
