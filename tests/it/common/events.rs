//! A supervisor's events as a test reads them: JSON lines, from an events log FIFO
//! (`--events-log`) or from the control socket's event stream, read on a thread as foster
//! writes them; waits for the first event a predicate holds for (seen already, or to come),
//! each bounded by a safety net; every event seen so far, in order. Shared by every test that
//! orders itself on foster's events.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::LIMIT;

use serde_json::Value;

/// The events of one supervisor, in the order it wrote them.
pub struct Events {
    rx: mpsc::Receiver<Value>,
    /// Every event read so far, in order.
    pub seen: Vec<Value>,
}

impl Events {
    /// The events of an events log FIFO (`foster run --events-log FIFO`): opening it waits for
    /// foster to open its end, on the reading thread.
    pub fn open(fifo: &Path) -> Events {
        let fifo = fifo.to_path_buf();
        Events::read(move || std::fs::File::open(&fifo).unwrap(), Some)
    }

    /// The events of the control socket's event stream (`{"request":"events"}` already sent
    /// on `stream`): the `event` member of each reply line that has one.
    pub fn follow(stream: std::os::unix::net::UnixStream) -> Events {
        Events::read(
            move || stream,
            |mut v: Value| v.get_mut("event").map(Value::take),
        )
    }

    /// Reads the lines of what `open` gives on a thread, each line's JSON passed through `pick`
    /// (`None`: not an event); the thread ends at the stream's end or once nobody listens.
    fn read<R: Read>(
        open: impl FnOnce() -> R + Send + 'static,
        pick: fn(Value) -> Option<Value>,
    ) -> Events {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(open()).lines() {
                let Ok(line) = line else { break };
                let v: Value = serde_json::from_str(&line).expect("a JSON line");
                if let Some(v) = pick(v)
                    && tx.send(v).is_err()
                {
                    break;
                }
            }
        });
        Events {
            rx,
            seen: Vec::new(),
        }
    }

    /// Reads events until one satisfies `f` (the first seen already, if one was); returns its
    /// index in [`Events::seen`].
    pub fn until(&mut self, what: &str, f: impl Fn(&Value) -> bool) -> usize {
        self.until_within(LIMIT, what, f)
    }

    /// [`Events::until`] with a limit of its own.
    pub fn until_within(
        &mut self,
        limit: Duration,
        what: &str,
        f: impl Fn(&Value) -> bool,
    ) -> usize {
        self.try_until(limit, f)
            .unwrap_or_else(|| panic!("no event {what} within {limit:?}; seen: {:#?}", self.seen))
    }

    /// [`Events::until_within`] that says `None` (for the test to clean up before it fails)
    /// when no such event came within `limit`.
    pub fn try_until(&mut self, limit: Duration, f: impl Fn(&Value) -> bool) -> Option<usize> {
        if let Some(i) = self.seen.iter().position(&f) {
            return Some(i);
        }
        let t = Instant::now();
        loop {
            let v = self
                .rx
                .recv_timeout(limit.saturating_sub(t.elapsed()))
                .ok()?;
            self.seen.push(v);
            if f(self.seen.last().unwrap()) {
                return Some(self.seen.len() - 1);
            }
        }
    }

    /// The first event (seen already, or to come) for which `f` holds.
    pub fn wait_for(&mut self, what: &str, f: impl Fn(&Value) -> bool) -> Value {
        let i = self.until(what, f);
        self.seen[i].clone()
    }

    /// [`Events::wait_for`] with a limit of its own.
    pub fn wait_within(
        &mut self,
        limit: Duration,
        what: &str,
        f: impl Fn(&Value) -> bool,
    ) -> Value {
        let i = self.until_within(limit, what, f);
        self.seen[i].clone()
    }

    /// The next event not read yet, whatever it is.
    pub fn next(&mut self, what: &str) -> Value {
        match self.rx.recv_timeout(LIMIT) {
            Ok(v) => {
                self.seen.push(v.clone());
                v
            }
            Err(_) => panic!("no event {what} within {LIMIT:?}; seen: {:#?}", self.seen),
        }
    }

    /// The events received so far, without waiting.
    pub fn so_far(&mut self) -> &[Value] {
        while let Ok(v) = self.rx.try_recv() {
            self.seen.push(v);
        }
        &self.seen
    }

    /// Every event to the end of the stream (foster closes it when it exits).
    pub fn rest(&mut self) -> &[Value] {
        while let Ok(v) = self.rx.recv_timeout(LIMIT) {
            self.seen.push(v);
        }
        &self.seen
    }

    /// The index of the `state` event putting `helper` in `state`.
    pub fn state(&mut self, helper: &str, state: &str) -> usize {
        self.until(&format!("{helper} {state}"), |e| {
            e["event"] == "state" && e["helper"] == helper && e["state"] == state
        })
    }

    /// The supervisor's `start` event (its identity in `supervisor`).
    pub fn started(&mut self) -> Value {
        self.wait_for("start", |e| kind(e) == "start")
    }

    /// The index of `helper`'s launch number `attempt`.
    pub fn launch(&mut self, helper: &str, attempt: u64) -> usize {
        self.until(&format!("launch {attempt} of {helper}"), |e| {
            e["event"] == "launch" && e["helper"] == helper && e["attempt"] == attempt
        })
    }
}

/// What an event is (its `event` member), "" for none.
pub fn kind(v: &Value) -> &str {
    v["event"].as_str().unwrap_or("")
}
