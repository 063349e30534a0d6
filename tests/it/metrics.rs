//! `foster run --metrics ADDR`: a real supervisor scraped over HTTP with a std TcpStream and
//! with curl (where it is installed), its Prometheus text parsed line by line, its numbers
//! checked against what happened (a helper killed: its restarts counter and last exit move),
//! the same numbers through `foster ctl metrics`, and the responder's bounds (unknown paths,
//! methods, oversized heads).

use crate::common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::Value;

use common::Dir;
use common::supervised::{Plain, Run};

/// One sample: its name and labels (sorted), and its value.
type Samples = BTreeMap<(String, Vec<(String, String)>), f64>;

/// Parses the Prometheus text format (version 0.0.4): every line is a `# HELP`, a `# TYPE`
/// (of a known type) or a sample, `NAME{LABEL="VALUE",...} NUMBER`; panics naming the first line
/// that is none of them.
fn parse(text: &str) -> Samples {
    let name_ok = |n: &str| {
        !n.is_empty()
            && n.chars().enumerate().all(|(i, c)| {
                c == '_' || c == ':' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit())
            })
    };
    let mut samples = Samples::new();
    let mut typed = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap();
            assert!(name_ok(name), "bad HELP line: {line}");
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or_else(|| panic!("{line}"));
            assert!(name_ok(name), "bad TYPE line: {line}");
            assert!(
                ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                "bad TYPE line: {line}"
            );
            typed.insert(name.to_string(), kind.to_string());
            continue;
        }
        assert!(
            !line.starts_with('#') && !line.is_empty(),
            "unexpected line: {line:?}"
        );
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line}"));
        let value: f64 = value.parse().unwrap_or_else(|e| panic!("{e}: {line}"));
        let (name, labels) = match series.split_once('{') {
            None => (series, Vec::new()),
            Some((name, rest)) => {
                let mut body = rest.strip_suffix('}').unwrap_or_else(|| panic!("{line}"));
                let mut labels = Vec::new();
                while !body.is_empty() {
                    let (k, v) = body.split_once("=\"").unwrap_or_else(|| panic!("{line}"));
                    assert!(name_ok(k), "bad label name in {line}");
                    let mut val = String::new();
                    let mut chars = v.char_indices();
                    let end = loop {
                        match chars.next() {
                            Some((i, '"')) => break i,
                            Some((_, '\\')) => match chars.next() {
                                Some((_, 'n')) => val.push('\n'),
                                Some((_, c @ ('\\' | '"'))) => val.push(c),
                                other => panic!("bad escape {other:?} in {line}"),
                            },
                            Some((_, c)) => val.push(c),
                            None => panic!("unterminated label value in {line}"),
                        }
                    };
                    labels.push((k.to_string(), val));
                    body = &v[end + 1..];
                    body = body.strip_prefix(',').unwrap_or(body);
                }
                labels.sort();
                (name, labels)
            }
        };
        assert!(name_ok(name), "bad metric name in {line}");
        let family = typed
            .keys()
            .filter(|f| name.starts_with(f.as_str()))
            .max_by_key(|f| f.len());
        assert!(family.is_some(), "sample without a TYPE: {line}");
        let old = samples.insert((name.to_string(), labels), value);
        assert!(old.is_none(), "sample given twice: {line}");
    }
    samples
}

fn get(s: &Samples, name: &str, labels: &[(&str, &str)]) -> f64 {
    let mut l: Vec<(String, String)> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    l.sort();
    *s.get(&(name.to_string(), l))
        .unwrap_or_else(|| panic!("no {name}{labels:?} among {:#?}", s.keys()))
}

/// One HTTP/1.1 exchange with `addr`: the status code, the headers, the body.
fn http(addr: &str, request: &[u8]) -> (u16, String, String) {
    exchange(addr, request).unwrap_or_else(|e| panic!("{addr}: {e}"))
}

/// [`http`], or why no answer came (the connection closed or reset without one).
fn exchange(addr: &str, request: &[u8]) -> Result<(u16, String, String), String> {
    let mut s = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(common::LIMIT)).unwrap();
    s.write_all(request).map_err(|e| format!("write: {e}"))?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).map_err(|e| format!("read: {e}"))?;
    let text = String::from_utf8(out).unwrap();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no answer: {text:?}"))?;
    let code = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("{head}"));
    Ok((code, head.to_string(), body.to_string()))
}

fn scrape(addr: &str) -> Samples {
    let (code, head, body) = http(addr, b"GET /metrics HTTP/1.1\r\nHost: foster\r\n\r\n");
    assert_eq!(code, 200, "{head}\n{body}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    let len: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length: ")
                .map(str::to_string)
        })
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(len, body.len(), "{head}");
    parse(&body)
}

/// `curl http://ADDR/metrics` (failing on an HTTP error, bounded), parsed; `None` without
/// curl.
fn curl(addr: &str) -> Option<Samples> {
    let out = match std::process::Command::new("curl")
        .args(["--fail", "--silent", "--show-error", "--max-time", "30"])
        .args(["--write-out", "\n%{content_type}"])
        .arg(format!("http://{addr}/metrics"))
        .output()
    {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        other => other.expect("run curl"),
    };
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "curl: {}{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (body, kind) = text.rsplit_once('\n').unwrap();
    assert!(kind.starts_with("text/plain; version=0.0.4"), "{kind}");
    Some(parse(body))
}

#[test]
fn metrics_are_scraped_over_http_and_through_ctl() {
    let d = Dir::new("metrics", "scrape");
    let config = r#"
[[helper]]
name = "victim"
command = ["sleep", "600"]
restart = "always"

[[helper]]
name = "orphaner"
command = ["sh", "-c", "(sleep 600 &); exit 0"]
restart = "never"
"#;
    let mut run = Run::start(&d, config, &["--no-contain", "--metrics", "127.0.0.1:0"]);
    run.launch("victim", 1);
    run.until("the orphan's adoption", |e| e["event"] == "reparented");
    let out = run.ctl(&["--json", "status"]);
    assert!(out.status.success(), "{out:?}");
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    let addr = status["status"]["supervisor"]["metrics"]
        .as_str()
        .unwrap_or_else(|| panic!("no metrics address: {status}"))
        .to_string();
    let victim = status["status"]["helpers"][0]["identity"]["pid"]
        .as_i64()
        .unwrap() as i32;

    let s = scrape(&addr);
    // A real HTTP client, as a scraper is one: curl's GET gives the same series.
    match curl(&addr) {
        None => println!("curl not checked: curl is not installed"),
        Some(c) => assert_eq!(
            c.keys().collect::<Vec<_>>(),
            s.keys().collect::<Vec<_>>(),
            "curl and the scrape give other series"
        ),
    }
    let victim_l = [("helper", "victim")];
    assert_eq!(get(&s, "foster_helper_restarts_total", &victim_l), 0.0);
    assert_eq!(get(&s, "foster_helper_launches_total", &victim_l), 1.0);
    assert_eq!(get(&s, "foster_helper_up", &victim_l), 1.0);
    assert_eq!(
        get(
            &s,
            "foster_helper_state",
            &[("helper", "victim"), ("state", "running")]
        ) + get(
            &s,
            "foster_helper_state",
            &[("helper", "victim"), ("state", "ready")]
        ),
        1.0
    );
    assert!(get(&s, "foster_helper_resident_memory_bytes", &victim_l) > 0.0);
    assert_eq!(get(&s, "foster_helper_processes", &victim_l), 1.0);
    assert!(
        get(
            &s,
            "foster_adoptions_total",
            &[("classification", "expected")]
        ) >= 1.0
    );
    assert_eq!(
        get(
            &s,
            "foster_adoptions_total",
            &[("classification", "escaped")]
        ),
        0.0
    );
    // The supervisor and the victim at least (the orphan too, unless its policy ended it).
    assert!(get(&s, "foster_processes", &[]) >= 2.0);
    assert!(get(&s, "foster_orphans_policed_total", &[]) >= 0.0);
    assert_eq!(get(&s, "foster_helper_up", &[("helper", "orphaner")]), 0.0);
    assert_eq!(
        get(
            &s,
            "foster_helper_last_exit_code",
            &[("helper", "orphaner")]
        ),
        0.0
    );
    assert!(get(&s, "foster_supervisor_resident_memory_bytes", &[]) > 0.0);
    assert!(get(&s, "foster_supervisor_uptime_seconds", &[]) >= 0.0);
    // The build, labelled as `foster --version` names it.
    let version = std::process::Command::new(env!("CARGO_BIN_EXE_foster"))
        .arg("--version")
        .output()
        .unwrap();
    let version = String::from_utf8_lossy(&version.stdout).into_owned();
    let commit = version
        .split("(commit ")
        .nth(1)
        .map_or("unknown", |c| c.trim_end().trim_end_matches(')'));
    let build = [("version", env!("CARGO_PKG_VERSION")), ("commit", commit)];
    assert_eq!(get(&s, "foster_build_info", &build), 1.0, "{version}");
    assert!(get(&s, "foster_supervisor_cpu_seconds_total", &[]) >= 0.0);

    // The victim killed: its restart is counted, its last exit is 128 + 9.
    // SAFETY: kill of the pid the supervisor reports as its running helper.
    assert_eq!(unsafe { libc::kill(victim, libc::SIGKILL) }, 0);
    run.launch("victim", 2);
    let s = scrape(&addr);
    assert_eq!(get(&s, "foster_helper_restarts_total", &victim_l), 1.0);
    assert_eq!(get(&s, "foster_helper_launches_total", &victim_l), 2.0);
    assert_eq!(get(&s, "foster_helper_last_exit_code", &victim_l), 137.0);

    // The same numbers through the control socket.
    let out = run.ctl(&["metrics"]);
    assert!(out.status.success(), "{out:?}");
    let c = parse(&String::from_utf8(out.stdout).unwrap());
    assert_eq!(
        c.keys().collect::<Vec<_>>(),
        s.keys().collect::<Vec<_>>(),
        "ctl metrics and the scrape give other series"
    );
    assert_eq!(get(&c, "foster_helper_restarts_total", &victim_l), 1.0);

    // Bounds: only GET /metrics; a head longer than 8 KiB is refused.
    assert_eq!(http(&addr, b"GET / HTTP/1.1\r\n\r\n").0, 404);
    assert_eq!(http(&addr, b"POST /metrics HTTP/1.1\r\n\r\n").0, 405);
    assert_eq!(http(&addr, b"nonsense\r\n\r\n").0, 400);
    let mut big = b"GET /metrics HTTP/1.1\r\nX: ".to_vec();
    big.extend(std::iter::repeat_n(b'a', 9000));
    big.extend_from_slice(b"\r\n\r\n");
    assert_eq!(http(&addr, &big).0, 431);

    let tree: Vec<foster::process::identity::Identity> = status["status"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| serde_json::from_value(p.clone()).unwrap())
        .collect();
    run.stop();
    for id in &tree {
        let now = foster::process::identity::Identity::of(id.pid).ok();
        assert_ne!(now.as_ref(), Some(id), "{id} outlived its supervisor");
    }
    assert!(TcpStream::connect(&addr).is_err(), "{addr} still listens");
}

#[test]
fn metrics_are_off_by_default() {
    let d = Dir::new("metrics", "off");
    let mut run = Run::start(
        &d,
        "[[helper]]\nname = \"a\"\ncommand = [\"sleep\", \"600\"]\n",
        &["--no-contain"],
    );
    run.launch("a", 1);
    let out = run.ctl(&["--json", "status"]);
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        status["status"]["supervisor"].get("metrics").is_none(),
        "{status}"
    );
    // ctl metrics works without --metrics: the numbers come through the socket.
    let out = run.ctl(&["metrics"]);
    assert!(out.status.success(), "{out:?}");
    let s = parse(&String::from_utf8(out.stdout).unwrap());
    assert_eq!(get(&s, "foster_helper_up", &[("helper", "a")]), 1.0);
    run.stop();
}

/// The connections `pid` holds on the local TCP port of `addr` (its listener aside): its
/// descriptors that are sockets of `/proc/net/tcp` on that port in any state but LISTEN.
fn connections(pid: u32, addr: &str) -> usize {
    let port: u16 = addr.rsplit_once(':').unwrap().1.parse().unwrap();
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let inodes: Vec<String> = table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let local = u16::from_str_radix(f.get(1)?.rsplit_once(':')?.1, 16).ok()?;
            let inode = f.get(9)?;
            (local == port && f.get(3)? != &"0A").then(|| format!("socket:[{inode}]"))
        })
        .collect();
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|l| inodes.iter().any(|i| l.as_os_str() == i.as_str()))
        .count()
}

/// Polls (a safety net of LIMIT: nothing tells the test when foster has seen a close) until
/// `pid` holds at most `most` connections on `addr`'s port; how many it holds then.
fn connections_down_to(pid: u32, addr: &str, most: usize) -> usize {
    let t = std::time::Instant::now();
    loop {
        let n = connections(pid, addr);
        if n <= most || t.elapsed() > common::LIMIT {
            return n;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Slow clients do not starve a scraper: 10 connections that send nothing and 2 that send the
/// start of a request and no more, against the 8 served at once; each new connection at the
/// limit closes the oldest one still waiting for its request, so each of 20 scrapes is
/// answered, and foster never holds more than 8. The oldest idle connection is found closed by
/// foster; once the test closes the others, foster holds none.
#[test]
fn slow_connections_do_not_starve_a_scraper() {
    let d = Dir::new("metrics", "slow");
    let mut run = Run::start(
        &d,
        "[[helper]]\nname = \"a\"\ncommand = [\"sleep\", \"600\"]\n",
        &["--no-contain", "--metrics", "127.0.0.1:0"],
    );
    run.launch("a", 1);
    let addr = run.status()["supervisor"]["metrics"]
        .as_str()
        .unwrap()
        .to_string();
    let pid = run.child.id();
    let mut slow: Vec<TcpStream> = (0..12)
        .map(|_| TcpStream::connect(&addr).unwrap())
        .collect();
    for s in &mut slow[10..] {
        s.write_all(b"GE").unwrap(); // the start of a request, the rest never comes
    }
    let answers: Vec<Result<u16, String>> = (0..20)
        .map(|_| exchange(&addr, b"GET /metrics HTTP/1.1\r\n\r\n").map(|a| a.0))
        .collect();
    assert!(answers.iter().all(|a| *a == Ok(200)), "{answers:?}");
    let held = connections_down_to(pid, &addr, 8);
    assert!(held <= 8, "foster holds {held} connections");
    // The oldest was closed by foster (an end of stream, or a reset), not by a timeout of ours.
    slow[0].set_read_timeout(Some(common::LIMIT)).unwrap();
    match slow[0].read(&mut [0u8; 16]) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("the oldest idle connection is still open: {other:?}"),
    }
    drop(slow);
    let held = connections_down_to(pid, &addr, 0);
    assert_eq!(held, 0, "connections left open by foster");
    assert!(run.stop().success());
}

/// `--metrics 127.0.0.1:0` says on standard error the address it took, and that address
/// answers a scrape; `foster ctl status` says it too (and its JSON, as `supervisor.metrics`).
#[test]
fn the_address_a_port_0_took_is_said_and_answers() {
    let d = Dir::new("metrics", "port0");
    let (mut run, err) = Run::start_with_stderr(
        &d,
        "[[helper]]\nname = \"a\"\ncommand = [\"sleep\", \"600\"]\n",
        &["--no-contain", "--metrics", "127.0.0.1:0"],
    );
    let prefix = "foster: metrics on http://";
    let line = loop {
        match err.recv_timeout(common::LIMIT) {
            Ok(l) if l.starts_with(prefix) => break l,
            Ok(_) => {}
            Err(e) => panic!("no line {prefix}...: {e}"),
        }
    };
    let addr = line[prefix.len()..]
        .strip_suffix("/metrics")
        .unwrap_or_else(|| panic!("{line}"))
        .to_string();
    let port: u16 = addr.strip_prefix("127.0.0.1:").unwrap().parse().unwrap();
    assert_ne!(port, 0, "{line}");
    scrape(&addr);
    assert_eq!(run.status()["supervisor"]["metrics"], addr.as_str());
    let out = run.ctl(&["status"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l == format!("metrics http://{addr}/metrics")),
        "{text}"
    );
    assert!(run.stop().success());
}

/// Seconds since the epoch at which process `pid` started, as /proc says it (boot time plus
/// its start in clock ticks), read apart from foster's own reading.
fn started_at(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = stat.rsplit_once(')').unwrap().1;
    let ticks: f64 = after.split_whitespace().nth(19).unwrap().parse().unwrap();
    let boot: f64 = std::fs::read_to_string("/proc/stat")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("btime ").map(|b| b.trim().parse().unwrap()))
        .unwrap();
    // SAFETY: sysconf with a valid name has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    boot + ticks / hz
}

/// The standard `process_*` metrics describe the supervisor process (compared with its
/// /proc entries); `foster_helper_start_time_seconds` is its process's start, and is left out
/// while a helper waits in its restart delay; promtool, where installed, finds nothing to say.
#[test]
fn process_metrics_and_helper_start_times() {
    let d = Dir::new("metrics", "process");
    let config = r#"
[[helper]]
name = "sleeper"
command = ["sleep", "600"]

[[helper]]
name = "flaky"
command = ["false"]
restart = "always"
backoff = { initial = "1h", max = "1h" }
"#;
    let mut run = Run::start(&d, config, &["--no-contain", "--metrics", "127.0.0.1:0"]);
    run.launch("sleeper", 1);
    run.state("flaky", "backoff");
    let h = run.helpers();
    let sleeper = h["sleeper"]["identity"]["pid"].as_u64().unwrap() as u32;
    let addr = run.status()["supervisor"]["metrics"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, _, body) = http(&addr, b"GET /metrics HTTP/1.1\r\n\r\n");
    assert_eq!(code, 200);
    let s = parse(&body);
    let me = run.child.id();
    let close = |a: f64, b: f64| (a - b).abs() < 0.02;
    let start = get(&s, "process_start_time_seconds", &[]);
    assert!(close(start, started_at(me)), "{start} {}", started_at(me));
    let helper_start = get(
        &s,
        "foster_helper_start_time_seconds",
        &[("helper", "sleeper")],
    );
    assert!(close(helper_start, started_at(sleeper)), "{helper_start}");
    assert!(
        !s.keys()
            .any(|(n, l)| n == "foster_helper_start_time_seconds"
                && l.iter().any(|(_, v)| v == "flaky")),
        "a helper in backoff has no start time"
    );
    let limits = std::fs::read_to_string(format!("/proc/{me}/limits")).unwrap();
    let soft: f64 = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(get(&s, "process_max_fds", &[]), soft);
    let open = get(&s, "process_open_fds", &[]);
    assert!(open >= 3.0 && open <= soft, "{open}");
    assert!(get(&s, "process_resident_memory_bytes", &[]) > 0.0);
    assert!(
        get(&s, "process_virtual_memory_bytes", &[])
            >= get(&s, "process_resident_memory_bytes", &[])
    );
    assert!(get(&s, "process_cpu_seconds_total", &[]) >= 0.0);

    match std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
    {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            common::skip::setup("promtool check metrics: promtool is not installed");
        }
        Err(e) => panic!("promtool: {e}"),
        Ok(mut child) => {
            child
                .stdin
                .take()
                .unwrap()
                .write_all(body.as_bytes())
                .unwrap();
            let out = common::child::output_within(child, "promtool check metrics");
            assert!(
                out.status.success(),
                "promtool check metrics:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    assert!(run.stop().success());
}

/// Events the events log could not take (here a full device) are counted for the scraper:
/// `foster_events_log_lost_total`, beside the warning on standard error.
#[test]
fn events_the_events_log_could_not_take_are_counted() {
    let d = Dir::new("metrics", "lost");
    let config = d.file(
        "a.toml",
        "[[helper]]\nname = \"s\"\ncommand = [\"sleep\", \"600\"]\n",
    );
    let options = ["--no-contain", "--events-log", "/dev/full"];
    let p = Plain::start_with(&config, &d.path("a.sock"), &options);
    let out = p.ctl(&["metrics"]);
    assert!(out.status.success(), "{out:?}");
    let s = parse(&String::from_utf8_lossy(&out.stdout));
    // At least the supervisor's start, written before the socket answered.
    let lost = get(&s, "foster_events_log_lost_total", &[]);
    assert!(lost >= 1.0, "lost {lost}");
    assert!(p.stop().success());
}
