//! The dashboard's event sources: one channel fed by an input thread, a data thread and a
//! termination-signal thread.
//!
//! Owns [`Msg`] and the three threads. The input thread blocks in `crossterm::event::read`; the
//! data thread takes a reading at each interval, or at once when asked ([`Request::Refresh`]),
//! blocking on its request channel in between; the signal thread waits in `sigwait` for
//! SIGTERM, SIGINT or SIGHUP (blocked in every thread by [`block_termination_signals`]) so that
//! the terminal is restored before foster exits. Nothing polls: an idle dashboard sleeps in
//! three blocking calls.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread;
use std::time::Duration;

use crossterm::event::{Event, KeyEvent, MouseEvent};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};

use crate::top::dialogs::{ControlError, SignalResult};
use crate::top::model::{Sample, Source, SourceError};

/// One thing that happened.
#[derive(Debug)]
pub enum Msg {
    Key(KeyEvent),
    /// A click or a wheel step (mouse capture is on while the dashboard runs).
    Mouse(MouseEvent),
    /// The terminal changed size.
    Resize,
    /// A new reading, or why it failed.
    Data(Result<Sample, SourceError>),
    /// The source has nothing more to read (its supervisor stopped, its root exited): why.
    Ended(String),
    /// Reading the terminal failed (it is gone).
    InputFailed(String),
    /// A termination signal arrived.
    Terminate(Signal),
    /// Signals sent through the supervisor (attached mode): one result per target.
    SignalDone {
        signal: Signal,
        results: Vec<SignalResult>,
    },
    /// The supervisor's answer to a restart or stop.
    ControlDone(Result<String, ControlError>),
    /// The log pane's stream number N has lines to take (attached mode).
    Logs(u64),
}

/// What the main loop asks the data thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// Take a reading now.
    Refresh,
}

/// The signals that end the dashboard.
fn termination_signals() -> SigSet {
    let mut set = SigSet::empty();
    set.add(Signal::SIGTERM);
    set.add(Signal::SIGINT);
    set.add(Signal::SIGHUP);
    set
}

/// Blocks SIGTERM, SIGINT and SIGHUP in the calling thread, and so in every thread it spawns
/// afterwards: call it before spawning any. They are then taken by [`spawn_signals`].
pub fn block_termination_signals() -> nix::Result<()> {
    pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&termination_signals()), None)
}

/// Waits for a termination signal and reports it.
pub fn spawn_signals(tx: Sender<Msg>) {
    thread::Builder::new()
        .name("top-signals".into())
        .spawn(move || {
            if let Ok(sig) = termination_signals().wait() {
                let _ = tx.send(Msg::Terminate(sig));
            }
        })
        .expect("spawn the signal thread");
}

/// Reads terminal events until the receiver is gone or reading fails.
pub fn spawn_input(tx: Sender<Msg>) {
    thread::Builder::new()
        .name("top-input".into())
        .spawn(move || {
            loop {
                let msg = match crossterm::event::read() {
                    Ok(Event::Key(k)) => Msg::Key(k),
                    Ok(Event::Mouse(m)) => Msg::Mouse(m),
                    Ok(Event::Resize(..)) => Msg::Resize,
                    Ok(_) => continue,
                    Err(e) => {
                        let _ = tx.send(Msg::InputFailed(e.to_string()));
                        return;
                    }
                };
                if tx.send(msg).is_err() {
                    return;
                }
            }
        })
        .expect("spawn the input thread");
}

/// Takes a reading at once, then every `interval` or whenever asked (by the main loop, or by
/// the source itself when it is told of a change), until the main loop is gone. Returns the
/// channel to ask on.
pub fn spawn_data(
    mut source: Box<dyn Source>,
    interval: Duration,
    tx: Sender<Msg>,
) -> Sender<Request> {
    let (req_tx, req_rx): (Sender<Request>, Receiver<Request>) = mpsc::channel();
    let wake = req_tx.clone();
    source.set_waker(Box::new(move || {
        let _ = wake.send(Request::Refresh);
    }));
    thread::Builder::new()
        .name("top-data".into())
        .spawn(move || {
            loop {
                let msg = match source.sample() {
                    Err(e) if source.ended() => Msg::Ended(e.0),
                    r => Msg::Data(r),
                };
                let end = matches!(msg, Msg::Ended(_));
                if tx.send(msg).is_err() || end {
                    return;
                }
                // The next reading comes `interval` after this one, or at once when asked.
                match req_rx.recv_timeout(interval) {
                    Ok(Request::Refresh) => while req_rx.try_recv().is_ok() {},
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            }
        })
        .expect("spawn the data thread");
    req_tx
}
