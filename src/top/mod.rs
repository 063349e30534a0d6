//! `foster top`: the live dashboard of a process tree. Owns [`run`]: it opens the source
//! (standalone `/proc`, or a supervisor's control socket), puts the terminal in raw mode on the
//! alternate screen with mouse capture, runs the loop over one channel of [`event::Msg`]s, and
//! restores the terminal on every way out (quit, error, termination signal, panic). It redraws
//! only when what the screen shows changed, each frame in a synchronized update. Signals go
//! through a pidfd checked against the identity (standalone) or through the supervisor.
//!
//! The files, each using only those before it in this list:
//! [`theme`], [`model`], [`history`], [`formatting`] (texts), [`detail`] (a process's
//! details, read from `/proc` when asked), [`columns`], [`rows`],
//! [`panes`] (events, logs), [`dialogs`], [`meters`], [`event`] (the threads), [`app`] (the
//! state), [`tree_keys`], [`keys`] (keys and mouse), [`ui`] (drawing), [`standalone`],
//! [`attached`], [`demo`], and this file.

pub mod app;
pub mod attached;
pub mod columns;
pub mod demo;
pub mod detail;
pub mod dialogs;
pub mod event;
pub mod formatting;
pub mod history;
pub mod keys;
pub mod meters;
pub mod model;
pub mod panes;
pub mod rows;
pub mod standalone;
pub mod theme;
pub mod tree_keys;
pub mod ui;

use std::io::{self, IsTerminal, Stdout};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::Signal;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::layout::Rect;

use crate::process::identity::Identity;
use crate::supervision::control::protocol::{Request as ControlRequest, Target};
use crate::top::app::{App, Effect};
use crate::top::event::{Msg, Request};
use crate::top::model::{Source, Tracker};

/// What `foster top` was asked to show.
#[derive(Debug, Clone)]
pub struct TopOptions {
    /// Only this process and its descendants.
    pub root: Option<i32>,
    /// Attach to a supervisor's control socket instead of reading `/proc`.
    pub attach: Option<PathBuf>,
    pub interval: Duration,
    /// Processes at this depth and below start collapsed.
    pub collapse_depth: Option<usize>,
    /// foster's keys, or htop's where they differ.
    pub keys: app::Keymap,
}

/// The error of `foster top`.
pub type TopError = Box<dyn std::error::Error + Send + Sync>;

/// Why a refresh interval was refused.
#[derive(Debug, thiserror::Error)]
pub enum IntervalError {
    #[error(transparent)]
    Duration(#[from] crate::base::duration::DurationError),
    #[error("{0:?}: the interval must be at least 100ms")]
    TooShort(String),
    #[error("{0:?}: the interval must be at most 1 hour")]
    TooLong(String),
}

/// Parses a refresh interval: a duration of [`crate::base::duration`]'s grammar (`1s`, `500ms`,
/// `2.5s`, `1m`, or plain seconds), from 100 ms to 1 hour.
pub fn parse_interval(s: &str) -> Result<Duration, IntervalError> {
    let d = crate::base::duration::parse(s)?;
    if d < Duration::from_millis(100) {
        return Err(IntervalError::TooShort(s.to_string()));
    }
    if d > Duration::from_secs(3600) {
        return Err(IntervalError::TooLong(s.to_string()));
    }
    Ok(d)
}

/// True while the terminal is in the dashboard's mode (raw, alternate screen).
static TERMINAL_ACTIVE: AtomicBool = AtomicBool::new(false);

/// Leaves raw mode and the alternate screen and shows the cursor; does nothing when the
/// terminal is not in the dashboard's mode, so it can run from both a panic hook and a drop.
fn restore_terminal() {
    if TERMINAL_ACTIVE.swap(false, Ordering::SeqCst) {
        let _ = crossterm::terminal::disable_raw_mode();
        let _ = crossterm::execute!(
            io::stdout(),
            crossterm::event::DisableMouseCapture,
            crossterm::terminal::LeaveAlternateScreen,
            crossterm::cursor::Show
        );
    }
}

/// Restores the terminal when dropped: on return, on error and while unwinding.
struct TerminalGuard;

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore_terminal();
    }
}

/// Draws one frame inside the terminal's synchronized update (DEC mode 2026): a terminal
/// that has it shows the frame whole, never half drawn under load; one that does not ignores
/// the mode, as it does any private mode it does not know. The update is ended even when the
/// drawing failed, so the terminal is never left holding its screen.
fn draw_synchronized(
    terminal: &mut Terminal<CrosstermBackend<Stdout>>,
    app: &mut App,
) -> io::Result<()> {
    use crossterm::terminal::{BeginSynchronizedUpdate, EndSynchronizedUpdate};
    crossterm::execute!(terminal.backend_mut(), BeginSynchronizedUpdate)?;
    let drawn = terminal.draw(|f| ui::draw(f, app)).map(|_| ());
    let ended = crossterm::execute!(terminal.backend_mut(), EndSynchronizedUpdate);
    drawn.and(ended)
}

fn enter_terminal() -> io::Result<(Terminal<CrosstermBackend<Stdout>>, TerminalGuard)> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore_terminal();
        hook(info);
    }));
    crossterm::terminal::enable_raw_mode()?;
    TERMINAL_ACTIVE.store(true, Ordering::SeqCst);
    let guard = TerminalGuard;
    crossterm::execute!(
        io::stdout(),
        crossterm::terminal::EnterAlternateScreen,
        crossterm::event::EnableMouseCapture,
        crossterm::cursor::Hide
    )?;
    let terminal = Terminal::new(CrosstermBackend::new(io::stdout()))?;
    Ok((terminal, guard))
}

/// Sends `signal` to the process `id` and no other ([`crate::process::identity::signal`]: a pidfd
/// opened, the start time checked, the signal sent through it). A pid that is gone, or now
/// names another process, gives `ESRCH`.
pub fn send_signal(id: Identity, signal: Signal) -> Result<(), Errno> {
    crate::process::identity::signal(id, signal as i32)
        .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))
}

/// Runs `work` on a thread of its own and posts its message: a request to the supervisor may
/// take as long as the supervisor needs, and the dashboard keeps answering keys meanwhile.
fn spawn_control(tx: &mpsc::Sender<Msg>, work: impl FnOnce() -> Msg + Send + 'static) {
    let tx = tx.clone();
    let spawned = std::thread::Builder::new()
        .name("top-control".into())
        .spawn(move || {
            let _ = tx.send(work());
        });
    if let Err(e) = spawned {
        tracing::warn!("cannot start a thread for the supervisor's request: {e}");
    }
}

/// In debug builds only, the key named by `FOSTER_TOP_TEST_PANIC_KEY` makes the dashboard
/// panic, so that a test can check the terminal is restored on that way out too.
fn test_panic_key() -> Option<char> {
    if !cfg!(debug_assertions) {
        return None;
    }
    std::env::var("FOSTER_TOP_TEST_PANIC_KEY")
        .ok()
        .and_then(|v| v.chars().next())
}

/// The source of the readings, and attached, the supervisor's controller and the flag that
/// asks the data thread for a snapshot from it.
type Opened = (
    Box<dyn Source>,
    Option<(attached::Controller, Arc<AtomicBool>)>,
);

/// Opens the source `opts` asks for, reading what `wants` says.
fn open_source(opts: &TopOptions, wants: &model::SharedWants) -> Result<Opened, TopError> {
    Ok(match (&opts.attach, opts.root) {
        (Some(socket), _) => {
            let s = attached::AttachedSource::connect(socket)?.with_wants(wants.clone());
            let c = (s.controller(), s.dirty_flag());
            (Box::new(s), Some(c))
        }
        (None, root) => (
            Box::new(standalone::ProcSource::new(root, wants.clone())?),
            None,
        ),
    })
}

/// Runs the dashboard until the user quits; the exit status is 0, or 128+N after signal N.
pub fn run(opts: TopOptions) -> Result<ExitCode, TopError> {
    // The columns chosen: a bad file gives the defaults, and the status line says why.
    let (layout, layout_error) = match columns::load() {
        Ok(l) => (l.unwrap_or_default(), None),
        Err(e) => (columns::Layout::default(), Some(e)),
    };
    let wants: model::SharedWants = Arc::new(Mutex::new(layout.wants()));
    let (source, attached) = open_source(&opts, &wants)?;
    if !io::stdout().is_terminal() || !io::stdin().is_terminal() {
        return Err(
            "foster top needs a terminal: standard input and output must both be one \
                    (for a one-shot listing use `foster tree`)"
                .into(),
        );
    }
    event::block_termination_signals()
        .map_err(|e| format!("cannot block termination signals: {e}"))?;
    let (tx, rx) = mpsc::channel();
    event::spawn_signals(tx.clone());
    let (terminal, _guard) = enter_terminal()?;
    event::spawn_input(tx.clone());
    let requests = event::spawn_data(source, opts.interval, tx.clone());
    let mut app = App::new(
        opts.collapse_depth,
        crate::base::duration::Text(opts.interval).to_string(),
    );
    app.columns = layout;
    app.keymap = opts.keys;
    app.message = layout_error
        .map(|e| crate::base::sanitize::escape(e.0.as_bytes()))
        .or_else(|| (opts.keys == app::Keymap::Htop).then(|| app::HTOP_KEYS.to_string()));
    let (controller, dirty) = attached.unzip();
    let mut dash = Dashboard {
        app,
        terminal,
        tx,
        requests,
        wants,
        controller,
        dirty,
        panic_key: test_panic_key(),
        tracker: Tracker::new(),
        machine: meters::Sampler::new(),
        last_screen: None,
        logs: None,
        log_streams: 0,
    };
    loop {
        let msg = rx.recv().map_err(|_| "the dashboard's threads stopped")?;
        let force = match dash.on_msg(msg)? {
            Step::Exit(code) => return Ok(code),
            Step::Redraw(force) => force,
        };
        dash.follow_logs();
        dash.redraw(force)?;
    }
}

/// What the loop does after a message: go on (and redraw even when the screen looks the
/// same), or end with this status.
enum Step {
    Redraw(bool),
    Exit(ExitCode),
}

/// The loop's state: the app, the terminal, the channels to the threads, the supervisor.
struct Dashboard {
    app: App,
    terminal: Terminal<CrosstermBackend<Stdout>>,
    tx: mpsc::Sender<Msg>,
    requests: mpsc::Sender<Request>,
    /// What the readings read (the columns shown decide).
    wants: model::SharedWants,
    /// Attached: the supervisor's controller, and the flag that asks for its snapshot.
    controller: Option<attached::Controller>,
    dirty: Option<Arc<AtomicBool>>,
    panic_key: Option<char>,
    tracker: Tracker,
    machine: meters::Sampler,
    last_screen: Option<app::Screen>,
    /// The log pane's stream, and how many were started.
    logs: Option<attached::LogStream>,
    log_streams: u64,
}

impl Dashboard {
    /// Asks for a reading; attached, one with a snapshot from the supervisor (not only from
    /// /proc).
    fn refresh(&self) {
        if let Some(dirty) = &self.dirty {
            dirty.store(true, Ordering::SeqCst);
        }
        let _ = self.requests.send(Request::Refresh);
    }

    /// Takes one message from the threads.
    fn on_msg(&mut self, msg: Msg) -> Result<Step, TopError> {
        let app = &mut self.app;
        let mut force = false;
        match msg {
            Msg::Key(k) => {
                if self
                    .panic_key
                    .is_some_and(|c| k.code == crossterm::event::KeyCode::Char(c))
                {
                    panic!("the test panic key was pressed (FOSTER_TOP_TEST_PANIC_KEY)");
                }
                let effects = app.on_key(k);
                // The columns shown decide what the next readings read.
                *self.wants.lock().unwrap_or_else(|e| e.into_inner()) = app.wants();
                for effect in effects {
                    if let Some(code) = self.on_effect(effect) {
                        return Ok(Step::Exit(code));
                    }
                }
                return Ok(Step::Redraw(true));
            }
            Msg::Mouse(m) => force = app.on_mouse(m),
            Msg::Resize => {
                force = true;
                // The columns are sized again for the new width.
                app.column_widths.borrow_mut().clear();
                self.terminal.autoresize()?;
            }
            Msg::Data(Ok(sample)) => {
                app.meters.take(self.machine.read());
                // The new model is built in the last one's storage; paused, the view keeps
                // the last one, to carry over the processes that left.
                let last = match app.paused {
                    true => model::Model::default(),
                    false => std::mem::take(&mut app.model),
                };
                app.set_model(self.tracker.update_into(sample, last));
            }
            Msg::Data(Err(e)) => app.set_source_error(e.to_string()),
            Msg::Ended(why) => app.set_ended(why),
            Msg::InputFailed(e) => return Err(format!("reading the terminal failed: {e}").into()),
            Msg::Terminate(sig) => return Ok(Step::Exit(ExitCode::from(128 + sig as u8))),
            Msg::SignalDone { signal, results } => {
                app.signal_results(signal, &results);
                self.refresh();
            }
            Msg::ControlDone(result) => {
                app.control_done(result);
                self.refresh();
            }
            Msg::Logs(id) => {
                if let Some(s) = self.logs.as_ref().filter(|s| s.id() == id) {
                    app.log_items(s.take());
                }
            }
        }
        Ok(Step::Redraw(force))
    }

    /// Does what a key asked; `Some` to end with this status.
    fn on_effect(&mut self, effect: Effect) -> Option<ExitCode> {
        match effect {
            Effect::Quit => return Some(ExitCode::SUCCESS),
            Effect::SaveColumns(layout) => {
                self.app.columns_saved(columns::save(&layout));
                // The new columns' data at once, not at the next tick.
                self.refresh();
            }
            Effect::Refresh => self.refresh(),
            Effect::Signal { targets, signal } => match self.controller.clone() {
                Some(c) => spawn_control(&self.tx, move || Msg::SignalDone {
                    signal,
                    results: targets
                        .into_iter()
                        .map(|(id, name)| {
                            let r = c.request(&ControlRequest::Signal {
                                target: Target::Identity(id),
                                signal: signal.into(),
                            });
                            (id, name, r.map(drop))
                        })
                        .collect(),
                }),
                None => {
                    let results: Vec<_> = targets
                        .into_iter()
                        .map(|(id, name)| (id, name, send_signal(id, signal)))
                        .collect();
                    self.app.signal_done(signal, &results);
                    let _ = self.requests.send(Request::Refresh);
                }
            },
            Effect::Control(action) => {
                if let Some(c) = self.controller.clone() {
                    let req = control_request(action);
                    spawn_control(&self.tx, move || Msg::ControlDone(c.request(&req)));
                }
            }
        }
        None
    }

    /// The log pane's stream follows the selection: at most one at a time.
    fn follow_logs(&mut self) {
        let want = self.app.log_source();
        match &self.app.logs {
            None => self.logs = None,
            Some(p) if p.source != want => {
                self.logs = None;
                self.app.log_switch(want.clone());
                if let (Some(source), Some(c)) = (want, self.controller.as_ref()) {
                    self.log_streams += 1;
                    let tx = self.tx.clone();
                    self.logs = Some(attached::LogStream::start(
                        c.socket(),
                        source,
                        self.log_streams,
                        move |id| {
                            let _ = tx.send(Msg::Logs(id));
                        },
                    ));
                }
            }
            Some(_) => {}
        }
    }

    /// Draws the screen when it changed, or when `force`d.
    fn redraw(&mut self, force: bool) -> io::Result<()> {
        let size = self.terminal.size()?;
        let page = ui::page_height(Rect::new(0, 0, size.width, size.height), &self.app);
        self.app.set_page(page);
        let screen = self.app.screen();
        if force || self.last_screen.as_ref() != Some(&screen) {
            draw_synchronized(&mut self.terminal, &mut self.app)?;
            self.last_screen = Some(self.app.screen());
        }
        Ok(())
    }
}

/// The supervisor's request for an action of the dashboard's.
fn control_request(action: app::Control) -> ControlRequest {
    match action {
        app::Control::Restart(t) => ControlRequest::Restart { helper: t.helper },
        app::Control::Start(t) => ControlRequest::Start { helper: t.helper },
        app::Control::StopHelper(t) => ControlRequest::Stop {
            helper: Some(t.helper),
        },
        app::Control::Stop { .. } => ControlRequest::Stop { helper: None },
    }
}
