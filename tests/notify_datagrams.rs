//! The notify socket's reader against any datagram, for a bounded time: real datagrams sent
//! over a real socket ([`NotifySocket`]) carrying any number of descriptors (none, up to the
//! kernel's [`SCM_MAX_FD`], and more, which the kernel refuses to send), with and without
//! credentials given by the sender, text of any bytes and any length (past [`MAX_DATAGRAM`]),
//! and read while this process may open only a few more descriptors, so that the kernel cuts
//! the control messages short (`MSG_CTRUNC`). Whatever came, reading and parsing it never
//! panics, and once the datagram is dropped this process holds exactly the descriptors it held
//! before: every one the kernel installed was closed.
//!
//! A test binary of its own, with one test: the count of `/proc/self/fd` is this test's alone.

use std::io::IoSlice;
use std::os::fd::{AsRawFd, OwnedFd};

use foster::supervision::readiness::notify::{MAX_DATAGRAM, Message, NotifySocket, SCM_MAX_FD};
use nix::sys::resource::{Resource, getrlimit, setrlimit};
use nix::sys::socket::{ControlMessage, MsgFlags, UnixAddr, UnixCredentials, sendmsg};
use proptest::prelude::*;

#[path = "it/common/mod.rs"]
mod common;
use common::Dir;

/// The descriptors this process holds (the directory's own, open while it is read, included:
/// the same in every count).
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// The text of a datagram: random bytes, `KEY=VALUE` lines, or text about as long as the
/// limit (either side of it).
fn text() -> impl Strategy<Value = Vec<u8>> {
    let line = prop_oneof![
        Just("READY=1".to_string()),
        Just("BARRIER=1".to_string()),
        "[A-Z_]{1,12}=[ -~]{0,40}",
        "MAINPID=-?[0-9]{1,12}",
        "(WATCHDOG|EXTEND_TIMEOUT)_USEC=[0-9]{1,25}",
    ];
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..200),
        prop::collection::vec(line, 0..20).prop_map(|l| l.join("\n").into_bytes()),
        (MAX_DATAGRAM - 4..MAX_DATAGRAM + 64).prop_map(|n| vec![b'x'; n]),
    ]
}

/// One datagram: its text, how many descriptors it carries, whether the sender gives its
/// credentials itself, and how many descriptors the reader may still open (`None`: no bound).
#[derive(Debug)]
struct Case {
    text: Vec<u8>,
    fds: usize,
    creds: bool,
    room: Option<usize>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        text(),
        prop_oneof![
            0..=20usize,
            SCM_MAX_FD - 3..=SCM_MAX_FD + 20,
            0..=SCM_MAX_FD
        ],
        any::<bool>(),
        prop::option::of(0..SCM_MAX_FD + 4),
    )
        .prop_map(|(text, fds, creds, room)| Case {
            text,
            fds,
            creds,
            room,
        })
}

/// Sends `c` to `to` from `from`, each descriptor a copy of `null`; false when the kernel
/// refuses it (more than [`SCM_MAX_FD`] descriptors).
fn send(from: &OwnedFd, to: &UnixAddr, null: &OwnedFd, c: &Case) -> bool {
    let fds = vec![null.as_raw_fd(); c.fds];
    let cred = UnixCredentials::new();
    let mut cmsgs = Vec::new();
    if !fds.is_empty() {
        cmsgs.push(ControlMessage::ScmRights(&fds));
    }
    if c.creds {
        cmsgs.push(ControlMessage::ScmCredentials(&cred));
    }
    let iov = [IoSlice::new(&c.text)];
    match sendmsg(from.as_raw_fd(), &iov, &cmsgs, MsgFlags::empty(), Some(to)) {
        Ok(_) => true,
        Err(nix::errno::Errno::EINVAL) if c.fds > SCM_MAX_FD => false,
        Err(e) => panic!("sendmsg of {} descriptors: {e}", c.fds),
    }
}

/// Receives the datagram of `c`, while at most `c.room` more descriptors may be opened.
fn receive(socket: &NotifySocket, c: &Case) -> foster::supervision::readiness::notify::Datagram {
    let limits = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    if let Some(room) = c.room {
        // Descriptors are given the lowest free numbers: those held are 0..open_fds() - 1
        // (the count's own closed again), so `room` more fit under this limit.
        let soft = (open_fds() - 1 + room) as u64;
        setrlimit(Resource::RLIMIT_NOFILE, soft, limits.1).unwrap();
    }
    let d = socket.recv();
    setrlimit(Resource::RLIMIT_NOFILE, limits.0, limits.1).unwrap();
    d.unwrap()
}

fn check(
    seen: &std::cell::Cell<(u32, u32, u32)>,
    socket: &NotifySocket,
    to: &UnixAddr,
    null: &OwnedFd,
    c: &Case,
) -> Result<(), TestCaseError> {
    let before = open_fds();
    let (refused, cut, whole) = seen.get();
    if !send(&socket_out(), to, null, c) {
        seen.set((refused + 1, cut, whole));
        prop_assert_eq!(open_fds(), before);
        return Ok(());
    }
    let d = receive(socket, c);
    match d.control_cut {
        true => seen.set((refused, cut + 1, whole)),
        false => seen.set((refused, cut, whole + 1)),
    }
    let _ = Message::parse(&d.bytes);
    prop_assert_eq!(d.too_long, c.text.len() > MAX_DATAGRAM);
    prop_assert_eq!(d.pid, std::process::id() as i32);
    if c.room.is_none() {
        // Room for all: nothing is cut short, every descriptor is there.
        prop_assert!(!d.control_cut);
        prop_assert_eq!(d.fds.len(), c.fds);
    } else {
        prop_assert!(d.fds.len() <= c.fds);
        prop_assert!(d.control_cut || d.fds.len() == c.fds);
    }
    drop(d);
    prop_assert_eq!(open_fds(), before, "descriptors left open by {:?}", c);
    Ok(())
}

/// A datagram socket to send from, closed after each case.
fn socket_out() -> OwnedFd {
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, socket};
    socket(
        AddressFamily::Unix,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .unwrap()
}

/// How many datagrams are tried: about a second.
const CASES: u32 = 1024;

#[test]
fn any_datagram_is_read_without_a_panic_and_leaves_no_descriptor_open() {
    let d = Dir::new("notify", "datagrams");
    let socket = NotifySocket::bind_in(&d.0).unwrap();
    let to = UnixAddr::new(socket.address()).unwrap();
    let null = OwnedFd::from(std::fs::File::open("/dev/null").unwrap());
    let started = std::time::Instant::now();
    let seen = std::cell::Cell::new((0, 0, 0));
    let config = ProptestConfig {
        cases: CASES,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let result = runner.run(&case(), |c| check(&seen, &socket, &to, &null, &c));
    if let Err(e) = result {
        panic!("{e}");
    }
    let (refused, cut, whole) = seen.get();
    eprintln!(
        "{CASES} datagrams in {:?}: {refused} refused by the kernel, {cut} cut short, {whole} \
         whole",
        started.elapsed()
    );
    // The cases reach every path of the reader.
    assert!(refused > 0 && cut > 0 && whole > 0);
}
