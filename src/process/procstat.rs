//! The `/proc/<pid>/stat` format's hand parser, allocation-free.
//!
//! Owns two things: where a `stat` line's command name (field 2) begins and ends, and
//! [`StatFields::parse`], the fields foster needs from a line. Also the other `/proc` lines
//! foster parses by hand, `NSpid:` ([`parse_nspid`], of `status` and of a pidfd's `fdinfo`), and
//! the resident pages of `statm` ([`parse_statm_resident`]). `comm` sits between parentheses
//! and may itself hold `)`, `(`, spaces, newlines and bytes that are not UTF-8, so the name ends at
//! the **last** `)` of the line ([`split`]).
//!
//! Written by hand on purpose: the gate calls it between fork and exec, where nothing may
//! allocate ([`StatFields::parse`] says more). Field numbers are those of `proc_pid_stat(5)`,
//! counting from 1.

/// Flag bit of field 9 (`flags`) marking a kernel thread (`PF_KTHREAD` in `include/linux/sched.h`).
pub const PF_KTHREAD: u64 = 0x0020_0000;

/// Flag bit of field 9 (`flags`) marking a process in `exit` (`PF_EXITING`): its children are
/// reparented, and its memory released, before it shows as a zombie.
pub const PF_EXITING: u64 = 0x4;

/// Why a `stat` line could not be parsed. Each variant names what was wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StatError {
    /// No `(` opening the command name (field 2).
    #[error("no '(' opening the command name (field 2)")]
    NoOpenParen,
    /// No `)` closing the command name (field 2).
    #[error("no ')' closing the command name (field 2)")]
    NoCloseParen,
    /// The pid before the name (field 1) is not a number.
    #[error("field 1 (pid) is not a number")]
    BadPid,
    /// The line ends before field `.0`.
    #[error("the line ends before field {0}")]
    MissingField(u8),
    /// Field `.0` is not the number it must be.
    #[error("field {0} is not a number")]
    BadField(u8),
}

/// The fields of one `stat` line, borrowing the name from the input. Allocation-free.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatFields<'a> {
    /// Field 1.
    pub pid: i32,
    /// Field 2, raw bytes without the parentheses (at most 15 bytes from the kernel).
    pub comm: &'a [u8],
    /// Field 3: `R`, `S`, `D`, `Z`, `T`, `t`, `X`, `I`, ...
    pub state: u8,
    /// Field 4.
    pub ppid: i32,
    /// Field 5.
    pub pgrp: i32,
    /// Field 6.
    pub session: i32,
    /// Field 7.
    pub tty_nr: i32,
    /// Field 8.
    pub tpgid: i32,
    /// Field 9 (`PF_*` bits).
    pub flags: u64,
    /// Field 14, clock ticks in user mode.
    pub utime: u64,
    /// Field 15, clock ticks in kernel mode.
    pub stime: u64,
    /// Field 20.
    pub num_threads: i64,
    /// Field 22, clock ticks after boot at which the process started.
    pub start_time: u64,
    /// Field 23, bytes.
    pub vsize: u64,
    /// Field 24, pages.
    pub rss: i64,
    /// Field 26, the address above which program text can run: 0 in the middle of an
    /// `execve` (it is set last), for a kernel thread and past an exit; 0 also when the line
    /// stops before it.
    pub startcode: u64,
    /// Field 28, the address of the start of the stack (0 as `startcode`).
    pub startstack: u64,
    /// Field 48, where the program's arguments begin (`None` when the line stops before it:
    /// kernels before 3.5).
    pub arg_start: Option<u64>,
    /// Field 49, where the program's arguments end.
    pub arg_end: Option<u64>,
}

/// Splits `rest` at the next space, skipping any run of spaces first.
fn next_token<'a>(rest: &mut &'a [u8]) -> Option<&'a [u8]> {
    let s = *rest;
    let start = s.iter().position(|&b| b != b' ' && b != b'\n')?;
    let s = &s[start..];
    let end = s
        .iter()
        .position(|&b| b == b' ' || b == b'\n')
        .unwrap_or(s.len());
    *rest = &s[end..];
    Some(&s[..end])
}

fn parse_u64(tok: &[u8]) -> Option<u64> {
    if tok.is_empty() || tok.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    for &b in tok {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    Some(v)
}

fn parse_i64(tok: &[u8]) -> Option<i64> {
    match tok.split_first() {
        Some((b'-', digits)) => parse_u64(digits)
            .and_then(|v| i64::try_from(v).ok())
            .map(|v| -v),
        _ => parse_u64(tok).and_then(|v| i64::try_from(v).ok()),
    }
}

fn parse_i32(tok: &[u8]) -> Option<i32> {
    parse_i64(tok).and_then(|v| i32::try_from(v).ok())
}

/// The pids of the `NSpid:` line of a `/proc/<pid>/status` text or of a pidfd's `fdinfo`
/// (the same line), outermost namespace first. `None` without that line (a kernel before 4.1)
/// or with a field that is not a positive pid (a reaped process's `-1`). Read by hand, not
/// through procfs's `Status`: that refuses the whole file when the process's name (the `Name:`
/// line, raw bytes) is not UTF-8, and needs some twenty other lines.
pub fn parse_nspid(text: &[u8]) -> Option<Vec<i32>> {
    let line = text
        .split(|&b| b == b'\n')
        .find_map(|l| l.strip_prefix(b"NSpid:"))?;
    let pids: Option<Vec<i32>> = line
        .split(|b| b.is_ascii_whitespace())
        .filter(|f| !f.is_empty())
        .map(|f| parse_i32(f).filter(|&p| p > 0))
        .collect();
    pids.filter(|p| !p.is_empty())
}

/// The resident pages of a `/proc/<pid>/statm` line (its second field), as `ps`, htop and the
/// `VmRSS:` line of `status` count them: the kernel sums its per-CPU counters there, where
/// `stat`'s field 24 reads them unsummed, short by up to some hundred KiB on a small process.
/// `None` when the line has no second field that is a number. Allocation-free.
pub fn parse_statm_resident(line: &[u8]) -> Option<u64> {
    let field = line
        .split(|b| b.is_ascii_whitespace())
        .filter(|f| !f.is_empty())
        .nth(1)?;
    parse_u64(field)
}

/// A `stat` line cut around its command name, borrowing from the line. Allocation-free.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parts<'a> {
    /// Field 1.
    pub pid: i32,
    /// Field 2, raw bytes without the parentheses.
    pub comm: &'a [u8],
    /// Everything after the `)` that closes the name: a space, then field 3 onwards.
    pub rest: &'a [u8],
}

/// Cuts a `stat` line around its command name, which runs from the first `(` to the **last**
/// `)`. The line must have the kernel's shape there (`"%d (%s) %c ..."`): a positive pid and one
/// space before the `(`, and after the `)` one space and a field. Allocation-free.
pub fn split(line: &[u8]) -> Result<Parts<'_>, StatError> {
    let open = line
        .iter()
        .position(|&b| b == b'(')
        .ok_or(StatError::NoOpenParen)?;
    let close = line
        .iter()
        .rposition(|&b| b == b')')
        .ok_or(StatError::NoCloseParen)?;
    if close < open {
        return Err(StatError::NoCloseParen);
    }
    let pid = line[..open]
        .strip_suffix(b" ")
        .and_then(parse_i32)
        .filter(|p| *p > 0)
        .ok_or(StatError::BadPid)?;
    let rest = &line[close + 1..];
    match rest {
        [b' ', f, ..] if !f.is_ascii_whitespace() => {}
        _ => return Err(StatError::MissingField(3)),
    }
    Ok(Parts {
        pid,
        comm: &line[open + 1..close],
        rest,
    })
}

impl<'a> StatFields<'a> {
    /// Parses one `stat` line. The name ends at the last `)` of `line` ([`split`]).
    ///
    /// This parser is written by hand on purpose: the startup gate calls it between fork and exec,
    /// on a stack buffer, where nothing may allocate (and `chainload`, `identity`, `init` and
    /// `spawner` use it for one-off reads). The tree scanner reads every process's line through it
    /// too, every scan: it reads only the fields foster keeps and allocates nothing, where
    /// `procfs`'s `Stat` parses all 52 through `str` searches and copies the name into a lossy
    /// `String` (foster shows a name's exact bytes, escaped). The scanner's tests check that both
    /// agree on every field foster reads.
    // Long: the fields in their order in the line.
    pub fn parse(line: &'a [u8]) -> Result<Self, StatError> {
        let Parts { pid, comm, rest } = split(line)?;
        let mut rest = rest;

        // Fields 3 to 24, in order; the ones foster keeps are picked out as they pass.
        let mut f = StatFields {
            pid,
            comm,
            state: 0,
            ppid: 0,
            pgrp: 0,
            session: 0,
            tty_nr: 0,
            tpgid: 0,
            flags: 0,
            utime: 0,
            stime: 0,
            num_threads: 0,
            start_time: 0,
            vsize: 0,
            rss: 0,
            startcode: 0,
            startstack: 0,
            arg_start: None,
            arg_end: None,
        };
        for field in 3u8..=24 {
            let tok = next_token(&mut rest).ok_or(StatError::MissingField(field))?;
            let bad = StatError::BadField(field);
            match field {
                3 => match tok {
                    [state] => f.state = *state,
                    _ => return Err(bad),
                },
                4 => f.ppid = parse_i32(tok).ok_or(bad)?,
                5 => f.pgrp = parse_i32(tok).ok_or(bad)?,
                6 => f.session = parse_i32(tok).ok_or(bad)?,
                7 => f.tty_nr = parse_i32(tok).ok_or(bad)?,
                8 => f.tpgid = parse_i32(tok).ok_or(bad)?,
                9 => f.flags = parse_u64(tok).ok_or(bad)?,
                14 => f.utime = parse_u64(tok).ok_or(bad)?,
                15 => f.stime = parse_u64(tok).ok_or(bad)?,
                20 => f.num_threads = parse_i64(tok).ok_or(bad)?,
                22 => f.start_time = parse_u64(tok).ok_or(bad)?,
                23 => f.vsize = parse_u64(tok).ok_or(bad)?,
                24 => f.rss = parse_i64(tok).ok_or(bad)?,
                _ => {}
            }
        }
        // Fields 25 to 49, where the kernel writes them (each kernel version added some at the
        // end): those foster keeps are picked out, and the line may stop anywhere among them.
        for field in 25u8..=49 {
            let Some(tok) = next_token(&mut rest) else {
                break;
            };
            let bad = StatError::BadField(field);
            match field {
                26 => f.startcode = parse_u64(tok).ok_or(bad)?,
                28 => f.startstack = parse_u64(tok).ok_or(bad)?,
                48 => f.arg_start = Some(parse_u64(tok).ok_or(bad)?),
                49 => f.arg_end = Some(parse_u64(tok).ok_or(bad)?),
                _ => {}
            }
        }
        Ok(f)
    }

    /// True for kernel threads (`PF_KTHREAD`), which have no command line and no memory of
    /// their own.
    pub fn is_kernel_thread(&self) -> bool {
        self.flags & PF_KTHREAD != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real line from `/proc/1/stat`, with its name replaced by `NAME`.
    fn line(name: &[u8]) -> Vec<u8> {
        let mut v = b"4242 (".to_vec();
        v.extend_from_slice(name);
        v.extend_from_slice(
            b") S 1 4242 4242 34816 4250 4194560 1227 0 3 0 17 9 0 0 20 0 3 0 123456 \
              11534336 812 18446744073709551615 1 1 0 0 0 0 0 0 65536 0 0 0 17 1 0 0 0 0 0 \
              0 0 0 0 0 0 0 0\n",
        );
        v
    }

    fn check(name: &[u8]) {
        let l = line(name);
        let f = StatFields::parse(&l).unwrap_or_else(|e| panic!("{name:?}: {e}"));
        assert_eq!(f.comm, name);
        assert_eq!(f.pid, 4242);
        assert_eq!(f.state, b'S');
        assert_eq!(f.ppid, 1);
        assert_eq!(f.pgrp, 4242);
        assert_eq!(f.session, 4242);
        assert_eq!(f.tty_nr, 34816);
        assert_eq!(f.tpgid, 4250);
        assert_eq!(f.flags, 4194560);
        assert_eq!(f.utime, 17);
        assert_eq!(f.stime, 9);
        assert_eq!(f.num_threads, 3);
        assert_eq!(f.start_time, 123456);
        assert_eq!(f.vsize, 11534336);
        assert_eq!(f.rss, 812);
        assert!(!f.is_kernel_thread());
    }

    #[test]
    fn statm_gives_its_second_field() {
        assert_eq!(parse_statm_resident(b"730 437 410 5 0 89 0\n"), Some(437));
        assert_eq!(parse_statm_resident(b"730"), None);
        assert_eq!(parse_statm_resident(b"730 -4 1"), None);
        assert_eq!(parse_statm_resident(b""), None);
    }

    #[test]
    fn plain_name() {
        check(b"sleep");
    }

    #[test]
    fn name_with_close_paren_and_fake_fields() {
        check(b"a) R 99 99 99");
        check(b")");
        check(b"))");
    }

    #[test]
    fn name_with_open_paren_spaces_and_newlines() {
        check(b"(");
        check(b"((x");
        check(b"a b  c");
        check(b" ");
        check(b"line\nbreak");
        check(b"\n");
    }

    #[test]
    fn name_with_non_utf8_and_escapes() {
        check(b"\xff\xfe\x80");
        check(b"\x1b]0;owned\x07");
        check(b"\0");
    }

    #[test]
    fn fifteen_byte_name_and_empty_name() {
        check(b"abcdefghijklmno");
        check(b"");
    }

    #[test]
    fn kernel_thread_flag() {
        let l = b"2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 3 0 0 20 0 1 0 1 0 0 \
                  18446744073709551615 0 0";
        let f = StatFields::parse(l).unwrap();
        assert!(f.is_kernel_thread());
        assert_eq!(f.tpgid, -1);
        assert_eq!(f.ppid, 0);
    }

    #[test]
    fn errors_name_the_problem() {
        assert_eq!(
            StatFields::parse(b"12 sleep S 1").unwrap_err(),
            StatError::NoOpenParen
        );
        assert_eq!(
            StatFields::parse(b"12 (sleep S 1").unwrap_err(),
            StatError::NoCloseParen
        );
        assert_eq!(
            StatFields::parse(b"x (sleep) S 1").unwrap_err(),
            StatError::BadPid
        );
        assert_eq!(
            StatFields::parse(b"12 (sleep) S 1").unwrap_err(),
            StatError::MissingField(5)
        );
        // The kernel's shape around the name: one space each side, a pid before it.
        for bad in [
            &b"12(sleep) S 1"[..],
            b"(sleep) S 1",
            b" (sleep) S 1",
            b"-1 (x) S 1",
        ] {
            assert_eq!(
                StatFields::parse(bad).unwrap_err(),
                StatError::BadPid,
                "{bad:?}"
            );
        }
        for bad in [
            &b"12 (sleep)S 1"[..],
            b"12 (sleep)",
            b"12 (sleep) ",
            b"12 (x)  S",
        ] {
            assert_eq!(
                StatFields::parse(bad).unwrap_err(),
                StatError::MissingField(3),
                "{bad:?}"
            );
        }
        assert_eq!(
            StatFields::parse(b"12 (sleep) S x").unwrap_err(),
            StatError::BadField(4)
        );
        assert_eq!(
            StatFields::parse(b"12 (sleep) SS 1").unwrap_err(),
            StatError::BadField(3)
        );
        assert_eq!(StatFields::parse(b"").unwrap_err(), StatError::NoOpenParen);
        assert_eq!(
            StatError::MissingField(22).to_string(),
            "the line ends before field 22"
        );
    }

    #[test]
    fn own_stat_parses() {
        let bytes = std::fs::read("/proc/self/stat").unwrap();
        let s = StatFields::parse(&bytes).unwrap();
        assert_eq!(s.pid, std::process::id() as i32);
        assert!(s.start_time > 0);
        assert!(s.num_threads >= 1);
    }
}
