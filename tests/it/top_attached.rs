//! `foster top --attach`: the attached source's reading of the control protocol, and its error
//! paths against a tiny server of this test's own that misbehaves on purpose (a socket that
//! closes in the middle of a reply, an error reply, a stream that ends). The dashboard against
//! the real supervisor is tested end to end in `top_tmux.rs` (`foster demo`); the pids of a
//! contained supervisor's events that a client outside could not translate, against the real
//! one (root only).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use foster::process::identity::Identity;
use foster::supervision::control::protocol::{
    EventRecord, Reply, ReplyBody, Request, Status, parse_request,
};
use foster::supervision::event::Event;
use foster::top::app::App;
use foster::top::attached::{AttachedSource, Controller, policy_text, sample_of};
use foster::top::model::{Anomaly, Source, Tracker};

use crate::common;

/// The snapshot of docs/control.md, with one helper in a restart loop and a descendant whose
/// parent is not the expected one.
const STATUS: &str = r#"{"version":1,"status":{
  "supervisor":{"identity":{"pid":4700,"start_time":912345},"config":"examples/demo.toml",
                "socket":"/run/user/1000/foster/demo.sock","contained":false,
                "shutting_down":false,"started_ms":1767000000000},
  "helpers":[{"name":"crasher","state":"backoff","identity":null,"launches":4,
              "restarts_in_a_row":3,"restart":"on-failure",
              "last_exit":{"how":"exited","code":3},"next_launch_in_ms":1650,
              "policy":"SIGTERM:exit:5s"},
             {"name":"web","state":"running","identity":{"pid":4710,"start_time":912350},
              "launches":1,"restarts_in_a_row":0,"restart":"always","last_exit":null,
              "next_launch_in_ms":null,"policy":"SIGTERM:exit:5s;SIGHUP:notify:2s",
              "stop_signal":"SIGTERM","stop_grace_ms":10000}],
  "processes":[
    {"pid":4700,"start_time":912345,"role":"supervisor","helper":null,"generation":0,
     "policy":null,"expected_parent":null,"parent":{"pid":4650,"start_time":912000},
     "ppid":4650,"adoption":null,"state":"S","comm":"foster",
     "cmdline":["foster","run","examples/demo.toml"],"uid":1000,"threads":3,
     "rss_bytes":5242880,"cpu_ticks":2},
    {"pid":4710,"start_time":912350,"role":"helper","helper":"web","generation":1,
     "policy":"SIGTERM:exit:5s","expected_parent":{"pid":4700,"start_time":912345},
     "parent":{"pid":4700,"start_time":912345},"ppid":4700,"adoption":null,"state":"S",
     "comm":"web","cmdline":["web","--port","8080"],"uid":1000,"threads":1,
     "rss_bytes":1048576,"cpu_ticks":10},
    {"pid":4711,"start_time":912360,"role":"descendant","helper":"web","generation":2,
     "policy":"SIGHUP:notify:2s","expected_parent":{"pid":4710,"start_time":912350},
     "parent":{"pid":4710,"start_time":912350},"ppid":4710,"adoption":null,"state":"S",
     "comm":[101,118,255],"cmdline":[[101,118,255],"\u001b[2J"],"uid":1000,"threads":1,
     "rss_bytes":1048576,"cpu_ticks":0},
    {"pid":4712,"start_time":912361,"role":"descendant","helper":"web","generation":2,
     "policy":"SIGHUP:notify:2s","expected_parent":{"pid":4710,"start_time":999},
     "parent":{"pid":4710,"start_time":912350},"ppid":4710,"adoption":null,"state":"S",
     "comm":"stray","cmdline":["stray"],"uid":1000,"threads":1,
     "rss_bytes":1048576,"cpu_ticks":0},
    {"pid":4755,"start_time":912410,"role":"adopted_orphan","helper":"orphaner",
     "generation":2,"policy":"SIGTERM:exit:5s",
     "expected_parent":{"pid":4720,"start_time":912360},
     "parent":{"pid":4700,"start_time":912345},"ppid":4700,
     "adoption":{"from":{"pid":4720,"start_time":912360},"to":{"pid":4700,"start_time":912345},
                 "expected":{"pid":4700,"start_time":912345},"classification":"expected",
                 "ts_ms":1767000001234},
     "state":"S","comm":"sleep","cmdline":["sleep","300"],"uid":1000,"threads":1,
     "rss_bytes":1048576,"cpu_ticks":0},
    {"pid":4756,"start_time":912411,"role":"adopted_orphan","helper":null,
     "generation":2,"policy":"SIGTERM:exit:5s",
     "expected_parent":{"pid":4720,"start_time":912360},
     "parent":{"pid":4700,"start_time":912345},"ppid":4700,
     "adoption":{"from":{"pid":4720,"start_time":912360},"to":{"pid":4700,"start_time":912345},
                 "expected":{"pid":4721,"start_time":912362},"classification":"foreign_reaper",
                 "ts_ms":1767000001235}, "state":"S","comm":"sleep","cmdline":["sleep","301"],
     "uid":1000,"threads":1,"rss_bytes":1048576,"cpu_ticks":0}],
  "now_ticks":913000,"hz":100}}"#;

fn status() -> Status {
    let reply: Reply = serde_json::from_str(STATUS).expect("the documented snapshot parses");
    match reply.body {
        ReplyBody::Status(s) => *s,
        other => panic!("not a status: {other:?}"),
    }
}

fn id(pid: i32, start_time: u64) -> Identity {
    Identity { pid, start_time }
}

#[test]
fn a_snapshot_becomes_supervised_rows_with_anomalies_and_events() {
    let st = status();
    let events = vec![
        EventRecord {
            seq: 7,
            ts_ms: 1_767_000_001_200,
            event: Event::Exit {
                pid: 4730,
                identity: Some(id(4730, 912370)),
                helper: Some("crasher".into()),
                generation: Some(1),
                status: foster::process::reaper::ExitStatus::Exited { code: 3 },
            },
            foreign_pids: Vec::new(),
            outer_pids: Vec::new(),
        },
        EventRecord {
            seq: 8,
            ts_ms: 1_767_000_001_201,
            event: Event::Restart {
                helper: "crasher".into(),
                attempt: 3,
                delay_ms: 2000,
            },
            foreign_pids: Vec::new(),
            outer_pids: Vec::new(),
        },
    ];
    let sample = sample_of(&st, &events, 1_767_000_002_201);
    assert!(sample.supervised);
    assert!(
        sample.origin == "supervisor 4700 of demo.toml",
        "{}",
        sample.origin
    );
    let by_pid = |p: i32| sample.procs.iter().find(|x| x.id.pid == p).unwrap();
    let sup = |p: i32| by_pid(p).supervision.clone().unwrap();
    assert_eq!(sup(4700).role, "supervisor");
    assert_eq!(sup(4710).role, "helper");
    assert_eq!(sup(4710).helper.as_deref(), Some("web"));
    assert_eq!(sup(4711).role, "descendant");
    assert_eq!(sup(4755).role, "adopted");
    assert_eq!(sup(4711).policy, "HUP→notify 2s");
    assert_eq!(by_pid(4711).comm, b"ev\xff");
    // Event times: placed on the snapshot's tick clock (1 s before it), wall clock kept.
    assert_eq!(sample.events.len(), 2);
    assert_eq!(sample.events[1].at_ticks, 913_000 - 100);
    assert_eq!(sample.events[1].wall_ms, 1_767_000_001_201);
    assert_eq!(
        String::from_utf8_lossy(&sample.events[0].text),
        "crasher[4730] exited with code 3"
    );

    let model = Tracker::new().update(sample);
    let anomalies = |p: i32| {
        model.nodes[&id(p, model_start(&model, p))]
            .anomalies
            .clone()
    };
    // The crasher has no process: its restart loop shows on the supervisor's row.
    assert!(
        matches!(&anomalies(4700)[..], [Anomaly::HelperDown(h)] if h.helper == "crasher" && h.restarts == 3),
        "{:?}",
        anomalies(4700)
    );
    // Wrong parent: same pid, another start time than expected.
    assert!(
        matches!(&anomalies(4712)[..], [Anomaly::WrongParent { expected, .. }] if expected.start_time == 999),
        "{:?}",
        anomalies(4712)
    );
    // An expected adoption is no anomaly; a foreign reaper is.
    assert!(anomalies(4755).is_empty(), "{:?}", anomalies(4755));
    assert!(
        matches!(&anomalies(4756)[..], [Anomaly::UnexpectedAdoption { expected: Some(e), .. }] if e.pid == 4721),
        "{:?}",
        anomalies(4756)
    );
    assert!(anomalies(4710).is_empty() && anomalies(4711).is_empty());
    // The tree: the adopted orphans under the supervisor, the descendants under web; after
    // them the row of the crasher, which has no process (its pid: minus its place, first).
    let sup_node = &model.nodes[&id(4700, 912345)];
    let kids: Vec<i32> = sup_node.children.iter().map(|c| c.pid).collect();
    assert_eq!(kids, vec![4710, 4755, 4756, -1]);

    // Rows: hostile bytes escaped; R on a descendant asks to restart its helper.
    let mut app = App::new(None, "1s".into());
    app.set_model(model);
    let row = app.rows.iter().find(|r| r.id.pid == 4711).unwrap();
    assert_eq!(row[foster::top::columns::Column::Command], r"ev\xff \e[2J");
    assert_eq!(row[foster::top::columns::Column::Helper], "web");
    app.cursor = Some(row.id);
    app.on_key(key('R'));
    let foster::top::app::Dialog::ConfirmControl(c) = app.dialog.clone() else {
        panic!("no confirmation: {:?}", app.dialog);
    };
    // It names the row's process, the helper it belongs to, and what happens to which.
    assert_eq!(
        c.question(),
        "ev\\xff 4711 belongs to helper web. Restart helper web: SIGTERM to its process 4710, \
         SIGKILL after 10s to what is left of it and of its 2 descendants, then launch it again?"
    );
    let fx = app.on_key(key('y'));
    assert!(
        matches!(&fx[..], [foster::top::app::Effect::Control(foster::top::app::Control::Restart(t))] if t.helper == "web" && t.process == Some(id(4710, 912350))),
        "{fx:?}"
    );
    assert_eq!(app.message.as_deref(), Some("restarting web…"));
    // The crasher has no process: it has a row of its own, which a filter for it matches
    // (the supervisor's note names it, but the note is not the supervisor's own: the
    // supervisor is shown as its ancestor, unmatched); on its row, R offers to launch it now.
    app.on_key(key('/'));
    for c in "crasher".chars() {
        app.on_key(key(c));
    }
    app.on_key(crossterm::event::KeyEvent::new(
        crossterm::event::KeyCode::Enter,
        crossterm::event::KeyModifiers::NONE,
    ));
    let matched: Vec<bool> = app.rows.iter().map(|r| r.matched).collect();
    assert_eq!(matched, vec![false, true], "{:?}", app.rows);
    assert!(app.rows[1].vacant && app.rows[1][foster::top::columns::Column::Helper] == "crasher");
    assert_eq!(app.cursor, Some(app.rows[1].id));
    // On the supervisor's row, R says it acts on a helper's row.
    app.on_key(key('k'));
    assert_eq!(app.cursor.map(|c| c.pid), Some(4700));
    assert!(app.on_key(key('R')).is_empty());
    assert!(
        app.message
            .as_deref()
            .is_some_and(|m| m.contains("is the supervisor")),
        "{:?}",
        app.message
    );
    app.on_key(key('j'));
    app.on_key(key('R'));
    let foster::top::app::Dialog::ConfirmControl(c) = app.dialog.clone() else {
        panic!("no confirmation: {:?}", app.dialog);
    };
    assert_eq!(
        c.question(),
        "Launch helper crasher now (it is backoff, with no process), its backoff count \
         started over?"
    );
    app.on_key(key('n'));
    // X asks to stop the supervisor; anything but y cancels.
    app.on_key(key('X'));
    assert!(matches!(
        app.dialog,
        foster::top::app::Dialog::ConfirmControl(foster::top::app::Control::Stop { supervisor }) if supervisor.pid == 4700
    ));
    assert!(app.on_key(key('n')).is_empty());
    assert_eq!(app.message.as_deref(), Some("cancelled"));
}

fn model_start(m: &foster::top::model::Model, pid: i32) -> u64 {
    m.nodes.keys().find(|i| i.pid == pid).unwrap().start_time
}

fn key(c: char) -> crossterm::event::KeyEvent {
    crossterm::event::KeyEvent::new(
        crossterm::event::KeyCode::Char(c),
        crossterm::event::KeyModifiers::NONE,
    )
}

#[test]
fn standalone_rows_refuse_restart_and_stop_with_a_reason() {
    let st = status();
    let mut sample = sample_of(&st, &[], 0);
    sample.supervised = false;
    for p in &mut sample.procs {
        p.supervision = None;
    }
    let mut app = App::new(None, "1s".into());
    app.set_model(Tracker::new().update(sample));
    assert!(app.on_key(key('R')).is_empty());
    assert!(app.message.as_deref().unwrap().contains("--attach"));
    assert!(app.on_key(key('X')).is_empty());
    assert!(app.message.as_deref().unwrap().contains("--attach"));
}

#[test]
fn event_texts_and_policies_read_well() {
    assert_eq!(policy_text("SIGTERM:exit:5s"), "TERM→exit 5s");
    assert_eq!(
        policy_text("SIGRTMIN+3:notify:500ms"),
        "RTMIN+3→notify 500ms"
    );
    let t = format!(
        "{:#}",
        Event::Reparented {
            identity: id(10, 1),
            helper: Some("orphaner".into()),
            generation: Some(2),
            from: Some(id(9, 1)),
            to: id(1, 1),
            expected: Some(id(5, 1)),
            classification: foster::gate::adoption::Classification::Escaped,
        }
    );
    assert_eq!(
        t,
        "orphaner's child 10 lost its parent 9 and was adopted by 1: UNEXPECTED (escaped; \
         expected 5)"
    );
    let t = format!(
        "{:#}",
        Event::Restart {
            helper: "crasher".into(),
            attempt: 2,
            delay_ms: 1500,
        }
    );
    assert_eq!(t, "crasher: restarting in 1.5s (2nd in a row)");
}

/// A server of this test's own on a fresh socket: each connection is handed to `serve`.
struct MiniServer {
    path: PathBuf,
    _dir: common::Dir,
}

impl MiniServer {
    fn start(
        serve: impl Fn(usize, BufReader<std::os::unix::net::UnixStream>) + Send + 'static,
    ) -> MiniServer {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir = common::Dir::new("top-attached", &n.to_string());
        let path = dir.path("s.sock");
        let listener = UnixListener::bind(&path).unwrap();
        std::thread::spawn(move || {
            for (n, conn) in listener.incoming().enumerate() {
                let Ok(conn) = conn else { return };
                serve(n, BufReader::new(conn));
            }
        });
        MiniServer { path, _dir: dir }
    }
}

fn read_request(r: &mut BufReader<std::os::unix::net::UnixStream>) -> Option<Request> {
    let mut line = String::new();
    if r.read_line(&mut line).ok()? == 0 {
        return None;
    }
    Some(parse_request(line.trim_end().as_bytes()).expect("the client speaks the protocol"))
}

fn reply(r: &mut BufReader<std::os::unix::net::UnixStream>, line: &str) {
    let s = r.get_mut();
    s.write_all(line.as_bytes()).unwrap();
    s.write_all(b"\n").unwrap();
}

#[test]
fn a_missing_socket_says_what_to_do() {
    let e = AttachedSource::connect(Path::new("/nonexistent/foster.sock")).unwrap_err();
    assert!(
        e.0.contains("/nonexistent/foster.sock") && e.0.contains("foster run"),
        "{e}"
    );
    // A socket file nobody listens on.
    let dir = common::Dir::new("top", "stale");
    let path = dir.path("stale.sock");
    drop(UnixListener::bind(&path).unwrap());
    let e = AttachedSource::connect(&path).unwrap_err();
    assert!(e.0.contains("nothing listens"), "{e}");
}

#[test]
fn a_refusal_is_reported_with_its_kind() {
    let srv = MiniServer::start(|_, mut r| {
        reply(
            &mut r,
            r#"{"version":1,"error":{"kind":"permission_denied","message":"uid 65534 may not use this socket"}}"#,
        );
    });
    let e = AttachedSource::connect(&srv.path).unwrap_err();
    assert!(
        e.0.contains("permission_denied") && e.0.contains("uid 65534"),
        "{e}"
    );
}

#[test]
fn a_socket_closing_mid_reply_is_an_error_not_a_hang() {
    // The first connection answers status; every later one closes in the middle of a line.
    let srv = MiniServer::start(|n, mut r| {
        let Some(Request::Status) = read_request(&mut r) else {
            return;
        };
        if n == 0 {
            reply(&mut r, STATUS.replace('\n', "").as_str());
            // Then the second status of this connection is cut short.
            if read_request(&mut r).is_some() {
                r.get_mut().write_all(b"{\"version\":1,\"sta").unwrap();
            }
        } else {
            r.get_mut().write_all(b"{\"version\":1,\"sta").unwrap();
        }
    });
    let mut src = AttachedSource::connect(&srv.path).unwrap();
    let e = src.sample().unwrap_err();
    assert!(e.0.contains("in the middle of a reply"), "{e}");
}

#[test]
fn the_event_stream_wakes_the_dashboard_and_survives_its_end() {
    // Connection 0: the connect-time status, then statuses on demand. Connection 1: events,
    // the backlog of two, then one live event when the test says so, then the end of the
    // stream. Connection 2: events again, replaying the backlog (already seen: skipped) plus one
    // new event.
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let go_rx = std::sync::Mutex::new(go_rx);
    let status_line = STATUS.replace('\n', "");
    let ev = |seq: u64, helper: &str| {
        format!(
            r#"{{"version":1,"event":{{"seq":{seq},"ts_ms":1767000001200,"event":"launch","helper":"{helper}","identity":{{"pid":{},"start_time":1}},"attempt":1}}}}"#,
            100 + seq
        )
    };
    let srv = MiniServer::start(move |n, mut r| {
        let status_line = status_line.clone();
        match n {
            0 => {
                std::thread::spawn(move || {
                    while let Some(req) = read_request(&mut r) {
                        assert_eq!(req, Request::Status);
                        reply(&mut r, &status_line);
                    }
                });
            }
            1 => {
                let Some(Request::Events { backlog, follow }) = read_request(&mut r) else {
                    panic!("events expected");
                };
                assert!(follow && backlog.is_some());
                reply(
                    &mut r,
                    r#"{"version":1,"events":{"backlog":2,"follow":true}}"#,
                );
                reply(&mut r, &ev(1, "a"));
                reply(&mut r, &ev(2, "b"));
                go_rx.lock().unwrap().recv().unwrap();
                reply(&mut r, r#"{"version":1,"lagged":{"dropped":5}}"#);
                reply(&mut r, &ev(8, "c"));
                // The stream ends here (dropping r closes it).
            }
            _ => {
                let Some(Request::Events { .. }) = read_request(&mut r) else {
                    panic!("events expected");
                };
                reply(
                    &mut r,
                    r#"{"version":1,"events":{"backlog":3,"follow":true}}"#,
                );
                for l in [ev(2, "b"), ev(8, "c"), ev(9, "d")] {
                    reply(&mut r, &l);
                }
                // Keep the stream open until the test ends.
                let _ = read_request(&mut r);
            }
        }
    });
    let mut src = AttachedSource::connect(&srv.path).unwrap();
    let (wake_tx, wake_rx) = mpsc::channel::<()>();
    let wake_tx = std::sync::Mutex::new(wake_tx);
    src.set_waker(Box::new(move || {
        let _ = wake_tx.lock().unwrap().send(());
    }));
    let texts = |src: &mut AttachedSource| -> Vec<String> {
        src.sample()
            .unwrap()
            .events
            .iter()
            .map(|e| String::from_utf8_lossy(&e.text).into_owned())
            .collect()
    };
    // The first reading starts the stream; the backlog wakes the dashboard.
    let _ = texts(&mut src);
    let deadline = Duration::from_secs(10);
    let until = |src: &mut AttachedSource, want: &dyn Fn(&[String]) -> bool| -> Vec<String> {
        let start = std::time::Instant::now();
        loop {
            let t = texts(src);
            if want(&t) {
                return t;
            }
            assert!(start.elapsed() < deadline, "never got there: {t:?}");
            let _ = wake_rx.recv_timeout(deadline);
        }
    };
    let t = until(&mut src, &|t| t.len() == 2);
    assert_eq!(t, vec!["a[101] launched", "b[102] launched"]);
    go_tx.send(()).unwrap();
    // The live event and the lag marker arrive; then the stream ends and the next reading
    // follows again: the replayed backlog adds only what is new.
    let t = until(&mut src, &|t| {
        t.iter().any(|l| l.contains("d[109] launched"))
    });
    assert_eq!(
        t,
        vec![
            "a[101] launched",
            "b[102] launched",
            "5 events skipped: the dashboard did not read fast enough",
            "c[108] launched",
            "d[109] launched",
        ]
    );
}

#[test]
fn a_control_error_reply_reaches_the_status_line() {
    let srv = MiniServer::start(|_, mut r| {
        while let Some(req) = read_request(&mut r) {
            match req {
                Request::Restart { helper } => reply(
                    &mut r,
                    &format!(
                        r#"{{"version":1,"error":{{"kind":"no_such_helper","message":"no helper named {helper}"}}}}"#
                    ),
                ),
                Request::Stop { helper: None } => reply(
                    &mut r,
                    r#"{"version":1,"done":{"request":"stop","message":"shutting down"}}"#,
                ),
                _ => reply(
                    &mut r,
                    r#"{"version":1,"error":{"kind":"refused","message":"no"}}"#,
                ),
            }
        }
    });
    let c = Controller::new(&srv.path);
    assert_eq!(
        c.request(&Request::Restart {
            helper: "nope".into()
        }),
        Err("no_such_helper: no helper named nope".into())
    );
    assert_eq!(
        c.request(&Request::Stop { helper: None }),
        Ok("shutting down".to_string())
    );
    let mut app = App::new(None, "1s".into());
    app.control_done(Err("refused: \x1b[2J".into()));
    assert_eq!(app.message.as_deref(), Some(r"failed: refused: \e[2J"));
}

/// Against the real supervisor (`foster run --socket`): the dashboard's readings between events
/// come from `/proc`, and a process that vanished without an event (a helper's child killed and
/// reaped by the helper) makes the next reading ask the supervisor again. Contained too (as
/// root), where the supervisor knows the pids of its own namespace and the dashboard shows, reads
/// and signals this one's.
#[test]
fn real_supervisor_readings_between_events_follow_a_vanished_child() {
    real_supervisor_readings(&[]);
    if nix::unistd::geteuid().is_root() {
        real_supervisor_readings(&["--contain"]);
    } else {
        common::skip::setup("part: the contained run: a PID namespace needs root here");
    }
}

fn real_supervisor_readings(flags: &[&str]) {
    let mut sup = RealSup::start(
        "real",
        "[[helper]]\nname = \"pair\"\ncommand = [\"sh\", \"-c\", \"sleep 1011 & sleep 1012 & wait\"]\n",
        flags,
    );
    let sleeps = |s: &foster::top::model::Sample| -> Vec<Identity> {
        s.procs
            .iter()
            .filter(|p| p.cmdline.first().is_some_and(|a| a == b"sleep"))
            .map(|p| p.id)
            .collect()
    };
    // Both sleeps are under the helper (the shell starts them just after its launch event).
    let s = sup.until("both sleeps", |s| sleeps(s).len() == 2);
    let roles: Vec<&str> = s
        .procs
        .iter()
        .map(|p| p.supervision.as_ref().unwrap().role.as_str())
        .collect();
    assert!(
        roles.contains(&"supervisor") && roles.contains(&"helper"),
        "{roles:?}"
    );
    let both = sleeps(&s);
    // Nothing happens: a reading between events still shows both, with fresh CPU counters.
    let quiet = sup.src.sample().unwrap();
    assert_eq!(sleeps(&quiet).len(), 2);
    // One sleep is killed; the shell reaps it and goes on waiting: no event. The next reading
    // sees it gone from /proc and asks the supervisor, whose snapshot no longer has it.
    let victim = both[0];
    foster::top::send_signal(victim, nix::sys::signal::Signal::SIGKILL).unwrap();
    common::wait_reaped(victim, "the killed sleep");
    let after = sup.src.sample().unwrap();
    assert_eq!(sleeps(&after), vec![both[1]], "{:?}", after.procs);
    // Every process shown is the one of this namespace under that pid.
    for p in &after.procs {
        assert_eq!(Identity::of(p.id.pid).ok(), Some(p.id), "{flags:?}: {p:?}");
    }
    // A signal chosen in the dashboard goes through the supervisor to that process.
    let said = Controller::new(&sup.sock).request(&Request::Signal {
        target: foster::supervision::control::protocol::Target::Identity(both[1]),
        signal: foster::process::signal::Sig::KILL,
    });
    assert!(
        said.as_ref()
            .is_ok_and(|m| m.contains(&both[1].to_string())),
        "{flags:?}: {said:?}"
    );
    common::wait_reaped(both[1], "the sleep signalled through the supervisor");
    // Teardown: the supervisor's orderly shutdown ends its tree.
    common::send(sup.id.pid, libc::SIGTERM);
    let status = sup.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(
        !both[1].is_alive(),
        "the helper's child outlived the supervisor"
    );
}

/// A real `foster run` of the test's own on `config`, with `flags`, and an attached source on
/// its socket; on drop the supervisor gets SIGTERM (its orderly shutdown) and is reaped.
struct RealSup {
    child: std::process::Child,
    id: Identity,
    sock: PathBuf,
    src: AttachedSource,
    wake: mpsc::Receiver<()>,
    _dir: common::Dir,
}

impl RealSup {
    fn start(tag: &str, config: &str, flags: &[&str]) -> RealSup {
        use std::process::{Command, Stdio};
        use std::time::Instant;
        let dir = common::Dir::new("top", &format!("{tag}{}", flags.concat()));
        let cfg = dir.file("t.toml", config);
        let sock = dir.path("t.sock");
        let child = Command::new(env!("CARGO_BIN_EXE_foster"))
            .args(["-q", "run"])
            .args(flags)
            .arg("--socket")
            .arg(&sock)
            .arg(&cfg)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let id = Identity::of(child.id() as i32).unwrap();
        let deadline = Instant::now() + Duration::from_secs(15);
        // Bounded wait for the socket (the supervisor binds it as it starts).
        let mut src = loop {
            match AttachedSource::connect(&sock) {
                Ok(s) => break s,
                Err(e) => {
                    assert!(Instant::now() < deadline, "no socket: {e}");
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        };
        let (wake_tx, wake) = mpsc::channel::<()>();
        let wake_tx = std::sync::Mutex::new(wake_tx);
        src.set_waker(Box::new(move || {
            let _ = wake_tx.lock().unwrap().send(());
        }));
        RealSup {
            child,
            id,
            sock,
            src,
            wake,
            _dir: dir,
        }
    }

    /// Readings until one satisfies `ok` (each after an event or 50 ms), bounded.
    fn until(
        &mut self,
        what: &str,
        ok: impl Fn(&foster::top::model::Sample) -> bool,
    ) -> foster::top::model::Sample {
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        loop {
            let s = self.src.sample().unwrap();
            if ok(&s) {
                return s;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "never saw {what}: {:?}",
                s.procs
            );
            let _ = self.wake.recv_timeout(Duration::from_millis(50));
        }
    }
}

impl Drop for RealSup {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(self.id.pid),
                nix::sys::signal::Signal::SIGTERM,
            );
            let status = self.child.wait();
            if !std::thread::panicking() {
                assert!(
                    status.is_ok_and(|s| s.success()),
                    "the supervisor's shutdown"
                );
            }
        }
    }
}

fn press_keys(app: &mut App, keys: &[crossterm::event::KeyCode]) {
    for k in keys {
        app.on_key(crossterm::event::KeyEvent::new(
            *k,
            crossterm::event::KeyModifiers::NONE,
        ));
    }
}

fn typed(text: &str) -> Vec<crossterm::event::KeyCode> {
    text.chars().map(crossterm::event::KeyCode::Char).collect()
}

/// A helper that gave up is named on its supervisor's row, but filtering on its name matches no
/// row (the note is about another process, not the supervisor's own fields); a filter matches a
/// row's own name, command, helper or pid; `/` again starts from the current filter.
#[test]
fn the_filter_matches_a_rows_own_fields_and_reopens_with_itself() {
    use crossterm::event::KeyCode;
    let mut sup = RealSup::start(
        "filter",
        "[[helper]]\nname = \"worker\"\ncommand = [\"sleep\", \"1021\"]\n\
         [[helper]]\nname = \"crasher\"\ncommand = [\"sh\", \"-c\", \"exit 3\"]\n\
         restart = \"on-failure\"\nbackoff = { initial = \"20ms\", limit = 3 }\n",
        &[],
    );
    let sample = sup.until("the crasher given up, on the supervisor's row", |s| {
        s.procs.iter().any(|p| {
            p.supervision
                .as_ref()
                .is_some_and(|v| v.down_helpers.iter().any(|d| d.helper == "crasher"))
        }) && s.procs.iter().any(|p| p.comm == b"sleep")
    });
    let mut app = App::new(None, "1s".into());
    app.set_model(Tracker::new().update(sample));
    let sleep = app
        .model
        .nodes
        .values()
        .find(|n| n.info.comm == b"sleep")
        .unwrap()
        .info
        .id;
    press_keys(&mut app, &[KeyCode::Char('/')]);
    press_keys(&mut app, &typed("crasher"));
    press_keys(&mut app, &[KeyCode::Enter]);
    // The crasher's own row matches; the supervisor is there as its ancestor only.
    let matched: Vec<bool> = app.rows.iter().map(|r| r.matched).collect();
    assert_eq!(matched, vec![false, true], "the supervisor's note matched");
    assert!(app.rows[1].vacant, "{:?}", app.rows);
    // Its own fields: the helper's name, then refined from where it was.
    press_keys(&mut app, &[KeyCode::Char('/')]);
    assert_eq!(app.filter, "crasher", "reopened with the current filter");
    press_keys(&mut app, &[KeyCode::Esc]);
    press_keys(&mut app, &[KeyCode::Char('/')]);
    press_keys(&mut app, &typed("wor"));
    press_keys(&mut app, &[KeyCode::Enter]);
    press_keys(&mut app, &[KeyCode::Char('/')]);
    assert!(app.filter_editing);
    press_keys(&mut app, &typed("ker"));
    press_keys(&mut app, &[KeyCode::Enter]);
    assert_eq!(app.filter, "worker");
    let matched: Vec<i32> = app
        .rows
        .iter()
        .filter(|r| r.matched)
        .map(|r| r.id.pid)
        .collect();
    assert_eq!(matched, vec![sleep.pid]);
    let roles: Vec<&str> = app
        .rows
        .iter()
        .map(|r| r[foster::top::columns::Column::Role].as_str())
        .collect();
    assert_eq!(
        roles,
        ["supervisor", "helper"],
        "the match and its ancestor"
    );
    // By pid, and by name.
    for text in [sleep.pid.to_string(), "sleep".to_string()] {
        press_keys(
            &mut app,
            &[KeyCode::Char('/'), KeyCode::Esc, KeyCode::Char('/')],
        );
        press_keys(&mut app, &typed(&text));
        press_keys(&mut app, &[KeyCode::Enter]);
        let matched: Vec<i32> = app
            .rows
            .iter()
            .filter(|r| r.matched)
            .map(|r| r.id.pid)
            .collect();
        assert_eq!(matched, vec![sleep.pid], "{text}");
    }
    drop(sup);
    assert!(!sleep.is_alive(), "the helper outlived its supervisor");
}

/// Narrow, an attached view keeps who is who (role and helper) longest: policy, generation and
/// age go first; at 120 columns it has them all.
#[test]
fn attached_columns_keep_role_and_helper_longest() {
    use foster::top::ui::{Column, columns_for};
    let narrow = columns_for(80, true, true);
    assert!(
        narrow.contains(&Column::Role) && narrow.contains(&Column::Helper),
        "{narrow:?}"
    );
    for c in [Column::Policy, Column::Generation] {
        assert!(!narrow.contains(&c), "{c:?} kept at 80: {narrow:?}");
    }
    let narrower = columns_for(74, true, true);
    assert!(
        narrower.contains(&Column::Helper) && !narrower.contains(&Column::Age),
        "{narrower:?}"
    );
    let wide = columns_for(120, true, true);
    for c in [
        Column::Policy,
        Column::Generation,
        Column::Age,
        Column::Helper,
        Column::Role,
    ] {
        assert!(wide.contains(&c), "{c:?} dropped at 120: {wide:?}");
    }
    assert!(!columns_for(120, true, false).contains(&Column::Helper));
}

/// The screen of `app` on a `w` x `h` terminal, one string per line.
fn render(app: &mut App, w: u16, h: u16) -> Vec<String> {
    let mut term = ratatui::Terminal::new(ratatui::backend::TestBackend::new(w, h)).unwrap();
    term.draw(|f| foster::top::ui::draw(f, app)).unwrap();
    let buf = term.backend().buffer().clone();
    let lines: Vec<String> = (0..h)
        .map(|y| (0..w).map(|x| buf[(x, y)].symbol()).collect::<String>())
        .collect();
    eprintln!("--- {w}x{h}\n{}", lines.join("\n"));
    lines
}

/// At start the cursor is on the supervisor's row, whose note says a helper has no process:
/// the note has a line of its own, and the key hint stays on the last line, at both sizes.
#[test]
fn the_key_hint_stays_beside_the_cursor_rows_anomaly() {
    let mut sup = RealSup::start(
        "footer",
        "[[helper]]\nname = \"worker\"\ncommand = [\"sleep\", \"1022\"]\n\
         [[helper]]\nname = \"crasher\"\ncommand = [\"sh\", \"-c\", \"exit 3\"]\n\
         restart = \"on-failure\"\nbackoff = { initial = \"20ms\", limit = 3 }\n",
        &[],
    );
    let sample = sup.until("the crasher given up, on the supervisor's row", |s| {
        s.procs.iter().any(|p| {
            p.supervision
                .as_ref()
                .is_some_and(|v| v.down_helpers.iter().any(|d| d.helper == "crasher"))
        }) && s.procs.iter().any(|p| p.comm == b"sleep")
    });
    let mut app = App::new(None, "1s".into());
    app.set_model(Tracker::new().update(sample));
    assert_eq!(
        app.cursor_row()
            .map(|r| r[foster::top::columns::Column::Role].as_str()),
        Some("supervisor")
    );
    for (w, h) in [(80, 24), (200, 60)] {
        let lines = render(&mut app, w, h);
        let last = lines[h as usize - 1].trim_end();
        assert!(last.starts_with("q quit · ? help"), "{w}x{h}: {last}");
        let above = &lines[h as usize - 2];
        assert!(
            above.contains("helper crasher has no process"),
            "{w}x{h}: {above}"
        );
        // The rest of the screen still shows the tree.
        assert!(lines.iter().any(|l| l.contains("sleep 1022")), "{w}x{h}");
    }
    // A notice (here a key's) takes the notice line; the hint stays.
    app.on_key(crossterm::event::KeyEvent::new(
        crossterm::event::KeyCode::F(7),
        crossterm::event::KeyModifiers::NONE,
    ));
    let lines = render(&mut app, 80, 24);
    assert!(lines[22].starts_with("F7: "), "{}", lines[22]);
    assert!(lines[23].starts_with("q quit · ? help"), "{}", lines[23]);
}

/// A running nested supervisor (helper `nested`) with a `sleep` of its own, and a helper
/// stopped by request.
const NESTED: &str = r#"{"version":1,"status":{
  "supervisor":{"identity":{"pid":100,"start_time":1000},"config":"demo.toml","socket":"/s",
                "contained":false,"shutting_down":false,"started_ms":0},
  "helpers":[{"name":"nested","state":"running","identity":{"pid":110,"start_time":1010},
              "launches":1,"restarts_in_a_row":0,"restart":"never","last_exit":null,
              "next_launch_in_ms":null,"policy":"SIGTERM:exit:5s","stop_signal":"SIGTERM",
              "stop_grace_ms":2000},
             {"name":"web","state":"stopped","detail":"by request","identity":null,
              "launches":1,"restarts_in_a_row":0,"restart":"always","last_exit":null,
              "next_launch_in_ms":null,"policy":"SIGTERM:exit:5s","stop_signal":"SIGINT",
              "stop_grace_ms":10000}],
  "processes":[
    {"pid":100,"start_time":1000,"role":"supervisor","helper":null,"generation":0,
     "policy":null,"expected_parent":null,"parent":null,"ppid":1,"adoption":null,"state":"S",
     "comm":"foster","cmdline":["foster","run","demo.toml"],"uid":0,"threads":3,
     "rss_bytes":1,"cpu_ticks":0},
    {"pid":110,"start_time":1010,"role":"supervisor","helper":"nested","generation":1,
     "policy":"SIGTERM:exit:5s","expected_parent":{"pid":100,"start_time":1000},
     "parent":{"pid":100,"start_time":1000},"ppid":100,"adoption":null,"state":"S",
     "comm":"foster","cmdline":["foster","run","-"],"uid":0,"threads":3,
     "rss_bytes":1,"cpu_ticks":0},
    {"pid":120,"start_time":1020,"role":"descendant","helper":"nested","generation":2,
     "policy":"SIGTERM:exit:5s","expected_parent":{"pid":110,"start_time":1010},
     "parent":{"pid":110,"start_time":1010},"ppid":110,"adoption":null,"state":"S",
     "comm":"sleep","cmdline":["sleep","86400"],"uid":0,"threads":1,
     "rss_bytes":1,"cpu_ticks":0}],
  "now_ticks":2000,"hz":100}}"#;

/// A key acts on the helper the row belongs to, and its confirmation says exactly what will
/// happen to what: `R` on the `sleep` of a running nested supervisor restarts helper `nested`,
/// whose process is that supervisor (not "launch it again" as if it had none); `x` stops it;
/// `o` starts a helper stopped by request, from the supervisor's row.
#[test]
fn keys_act_on_the_rows_helper_and_say_what_they_do() {
    use foster::top::app::{Control, Dialog, Effect};
    let reply: Reply = serde_json::from_str(NESTED).unwrap();
    let ReplyBody::Status(st) = reply.body else {
        panic!("not a status")
    };
    let mut tracker = Tracker::default();
    let model = tracker.update(sample_of(&st, &[], 0));
    let mut app = App::new(None, "1s".into());
    app.set_model(model);
    let question = |app: &App| match &app.dialog {
        Dialog::ConfirmControl(c) => c.question(),
        other => panic!("no confirmation: {other:?}"),
    };
    app.cursor = Some(id(120, 1020));
    app.on_key(key('R'));
    assert_eq!(
        question(&app),
        "sleep 120 belongs to helper nested. Restart helper nested: SIGTERM to its process 110 \
         (a nested supervisor), SIGKILL after 2s to what is left of it and of its 1 descendant, \
         then launch it again?"
    );
    let fx = app.on_key(key('y'));
    assert!(
        matches!(&fx[..], [Effect::Control(Control::Restart(t))] if t.helper == "nested" && t.process == Some(id(110, 1010))),
        "{fx:?}"
    );
    app.on_key(key('x'));
    assert_eq!(
        question(&app),
        "sleep 120 belongs to helper nested. Stop helper nested: SIGTERM to its process 110 \
         (a nested supervisor), SIGKILL after 2s to what is left of it and of its 1 descendant? \
         It stays stopped until started (o)."
    );
    let fx = app.on_key(key('y'));
    assert!(
        matches!(&fx[..], [Effect::Control(Control::StopHelper(t))] if t.helper == "nested"),
        "{fx:?}"
    );
    // o on a running helper's row: nothing to start, said so.
    app.on_key(key('o'));
    assert_eq!(app.dialog, Dialog::None);
    assert!(
        app.message
            .as_deref()
            .is_some_and(|m| m.contains("already running (110)")),
        "{:?}",
        app.message
    );
    // The supervisor's row stands for no helper; web, stopped by request, has a row of its own.
    app.cursor = Some(id(100, 1000));
    app.on_key(key('o'));
    assert_eq!(app.dialog, Dialog::None);
    assert!(
        app.message
            .as_deref()
            .is_some_and(|m| m.contains("is the supervisor"))
    );
    app.cursor = app.rows.iter().find(|r| r.vacant).map(|r| r.id);
    app.on_key(key('o'));
    assert_eq!(
        question(&app),
        "Start helper web now (it is stopped by request, with no process), its backoff count \
         started over?"
    );
    let fx = app.on_key(key('y'));
    assert!(
        matches!(&fx[..], [Effect::Control(Control::Start(t))] if t.helper == "web"),
        "{fx:?}"
    );
    app.on_key(key('x'));
    assert_eq!(app.dialog, Dialog::None, "web is stopped already");
    assert_eq!(
        app.message.as_deref(),
        Some("helper web is already stopped by request")
    );
}

/// The events pane leaves out the states a launch, exit or restart line says already
/// (`running`, `backoff`), and shows those it does not (`waiting` and why).
#[test]
fn the_pane_shows_the_states_no_other_line_says() {
    use foster::process::state::HelperState;
    let st = status();
    let rec = |seq: u64, event: Event| EventRecord {
        seq,
        ts_ms: 1,
        event,
        foreign_pids: Vec::new(),
        outer_pids: Vec::new(),
    };
    let events = [
        rec(
            1,
            Event::Launch {
                helper: "web".into(),
                identity: id(4710, 912350),
                attempt: 1,
            },
        ),
        rec(
            2,
            Event::State {
                helper: "web".into(),
                state: HelperState::Running,
                detail: None,
                status_text: None,
            },
        ),
        rec(
            3,
            Event::State {
                helper: "api".into(),
                state: HelperState::Waiting,
                detail: Some("for db: gave up after 5 restarts".into()),
                status_text: None,
            },
        ),
    ];
    let sample = sample_of(&st, &events, 2);
    let texts: Vec<String> = sample
        .events
        .iter()
        .map(|e| String::from_utf8_lossy(&e.text).to_string())
        .collect();
    assert_eq!(
        texts,
        [
            "web[4710] launched",
            "api: waiting for db: gave up after 5 restarts"
        ]
    );
}

/// A contained supervisor's events about processes that ended before a client outside could
/// see them (a crash loop's quick exits) keep the supervisor's pids, named in `foreign_pids`
/// and in the line for people: never `?` or 0. The supervisor is two PID namespaces down (a
/// contained `foster run` as the helper of another): the outer pids it sends are those of the
/// namespace between, not the client's. Root only (a PID namespace).
#[test]
fn unseen_pids_of_a_contained_supervisor_are_marked_never_zero() {
    if common::skip::unless_root("--contain needs root here (a PID namespace)") {
        return;
    }
    let d = common::Dir::new("foreign", "pids");
    let cfg = d.file(
        "run.toml",
        "[[helper]]\nname = \"crashy\"\ncommand = [\"/bin/sh\", \"-c\", \"exit 7\"]\n\
         restart = \"always\"\n\
         backoff = { initial = \"50ms\", max = \"50ms\", limit = 2, reset_after = \"30s\" }\n\
         [[helper]]\nname = \"keeper\"\ncommand = [\"sleep\", \"600\"]\n",
    );
    let (socket, events) = (d.path("run.sock"), d.path("events.log"));
    let inner = [
        env!("CARGO_BIN_EXE_foster"),
        "run",
        "--contain",
        "--events-log",
        &events.display().to_string(),
        "--socket",
        &socket.display().to_string(),
        &cfg.display().to_string(),
    ]
    .map(|a| format!("{a:?}"));
    let outer = d.file(
        "outer.toml",
        &format!(
            "[[helper]]\nname = \"inner\"\ncommand = [{}]\n",
            inner.join(", ")
        ),
    );
    let mut run = common::foster_run::FosterRun::new()
        .arg("--contain")
        .socket(&d.path("outer.sock"))
        .stdout(std::process::Stdio::null())
        .spawn(&outer);
    let pid = run.id() as i32;
    let start = std::time::Instant::now();
    while !std::fs::read_to_string(&events).is_ok_and(|l| l.contains("\"give_up\"")) {
        if run.try_wait().unwrap().is_some() {
            let mut err = String::new();
            std::io::Read::read_to_string(&mut run.stderr.take().unwrap(), &mut err).unwrap();
            if err.contains("cannot create a PID namespace") {
                common::skip::host(format!("no PID namespace can be had here: {err}"));
                return;
            }
            panic!("foster run ended: {err}");
        }
        if start.elapsed() > common::LIMIT {
            // SAFETY: kill(2) of our own unreaped child, by its pid.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            let _ = run.wait();
            panic!("crashy never gave up");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let ctl = |json: bool| {
        let mut c = common::supervised::ctl_command(&socket);
        if json {
            c.arg("--json");
        }
        c.args(["events", "--no-follow"]).output().unwrap()
    };
    let (json, text) = (ctl(true), ctl(false));
    common::send(pid, libc::SIGTERM);
    assert!(run.wait().unwrap().success());
    let exits: Vec<serde_json::Value> = String::from_utf8_lossy(&json.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| v["event"].clone())
        .filter(|e| e["event"] == "exit")
        .collect();
    assert_eq!(exits.len(), 3, "{json:?}");
    for e in &exits {
        let p = e["identity"]["pid"].as_i64().unwrap();
        assert!(p > 0 && e["pid"] == p, "{e}");
        assert_eq!(e["foreign_pids"], serde_json::json!([p]), "{e}");
    }
    let text = String::from_utf8_lossy(&text.stdout);
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("exited with code 7"))
        .collect();
    assert_eq!(lines.len(), 3, "{text}");
    for l in lines {
        assert!(
            !l.contains("[?]") && l.contains("is the supervisor's"),
            "{l}"
        );
    }
}
