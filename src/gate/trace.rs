//! The wire format of the gate's qualification trace: the steps ([`Step`]), where a controller
//! may hold the gate ([`Barrier`]), and the fixed-size [`TraceRecord`] the gate writes at each
//! step. The writing side (allocation-free, between fork and exec) is [`super::plan::Trace`];
//! `foster qualify` reads the records from outside.

/// The steps of the gate, in order; also the tags of [`TraceRecord`]s.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[repr(u32)]
pub enum Step {
    /// The gate started (value: 0).
    Start = 1,
    /// The signal path is in place (value: the signal).
    SignalPath = 2,
    /// `PR_SET_PDEATHSIG` returned (value: what `PR_GET_PDEATHSIG` read back).
    Armed = 3,
    /// The parent was compared (value: 1 match, 0 mismatch, -1 cannot tell).
    Checked = 4,
    /// The gate passed; exec follows (value: 0).
    Passed = 5,
    /// The parent-gone path was taken (value: the [`DeathPath`](super::DeathPath) as a number).
    ParentGone = 6,
    /// A step failed (value: the errno, or the read-back signal).
    Failed = 7,
}

impl Step {
    pub(crate) fn from_u32(v: u32) -> Option<Step> {
        Some(match v {
            1 => Step::Start,
            2 => Step::SignalPath,
            3 => Step::Armed,
            4 => Step::Checked,
            5 => Step::Passed,
            6 => Step::ParentGone,
            7 => Step::Failed,
            _ => return None,
        })
    }
}

/// Where a qualification controller may hold the gate (see [`Trace`](super::plan::Trace)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Barrier {
    /// After the signal path is set, before `prctl`.
    BeforeArm = 1,
    /// After `prctl`, before the parent check.
    BeforeCheck = 2,
    /// After a passed check, before exec.
    AfterCheck = 4,
}

/// One fixed-size record the gate writes to a trace descriptor: allocation-free, atomic on a
/// pipe. Used by `foster qualify` to observe the gate from outside.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(C)]
pub struct TraceRecord {
    pub step: u32,
    pub pid: i32,
    pub ppid: i32,
    pub value: i32,
}

impl TraceRecord {
    /// The size of one record on the wire.
    pub const SIZE: usize = 16;

    /// The record's step, if it is one of ours.
    pub fn step(&self) -> Option<Step> {
        Step::from_u32(self.step)
    }

    /// Decodes one record from its wire form (native endianness).
    pub fn decode(b: &[u8; 16]) -> TraceRecord {
        let w = |i: usize| [b[i], b[i + 1], b[i + 2], b[i + 3]];
        TraceRecord {
            step: u32::from_ne_bytes(w(0)),
            pid: i32::from_ne_bytes(w(4)),
            ppid: i32::from_ne_bytes(w(8)),
            value: i32::from_ne_bytes(w(12)),
        }
    }

    /// The wire form. Panic-free (it runs in the child between fork and exec): constant
    /// indexes into arrays of four, which the compiler checks.
    pub(crate) fn encode(&self) -> [u8; 16] {
        let (s, p) = (self.step.to_ne_bytes(), self.pid.to_ne_bytes());
        let (q, v) = (self.ppid.to_ne_bytes(), self.value.to_ne_bytes());
        [
            s[0], s[1], s[2], s[3], p[0], p[1], p[2], p[3], q[0], q[1], q[2], q[3], v[0], v[1],
            v[2], v[3],
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_record_wire_form() {
        let r = TraceRecord {
            step: Step::Armed as u32,
            pid: 10,
            ppid: 9,
            value: 15,
        };
        assert_eq!(TraceRecord::decode(&r.encode()), r);
        assert_eq!(r.step(), Some(Step::Armed));
    }
}
