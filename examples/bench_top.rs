//! What one refresh of `foster top` costs, stage by stage, with about N processes on the
//! machine: the reading (`/proc` scan), the model (tree, CPU%, anomalies), the rows, and a full
//! render into an off-screen buffer; for the whole system and for a quiet `--root` subtree.
//! Times are the thread's CPU time, not wall-clock time.
//!
//!     cargo run --release --example bench_top -- [N] [ROUNDS]
//!
//! It starts the sleeping processes it needs (N minus those already there) and kills them, by
//! pid, before it exits. The side-by-side comparison with htop in real terminals is
//! `benches/top_cpu.sh`; both are described in docs/benchmarks.md.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use foster::top::app::App;
use foster::top::model::{Source, Tracker};
use foster::top::standalone::ProcSource;
use foster::top::ui;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

fn count_procs() -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .count()
}

struct Stages {
    read: Duration,
    model: Duration,
    rows: Duration,
    render: Duration,
}

/// CPU time of the calling thread: wall-clock time would count the other processes of a busy
/// machine too.
fn cpu_now() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

fn measure(mut source: ProcSource, rounds: u32) -> (Stages, usize) {
    let mut tracker = Tracker::new();
    let mut app = App::new(None, "1s".into());
    let mut term = Terminal::new(TestBackend::new(120, 40)).unwrap();
    let mut s = Stages {
        read: Duration::ZERO,
        model: Duration::ZERO,
        rows: Duration::ZERO,
        render: Duration::ZERO,
    };
    let mut shown = 0;
    // One warm-up round: command lines are read once per identity.
    app.set_model(tracker.update(source.sample().unwrap()));
    for _ in 0..rounds {
        let t0 = cpu_now();
        let sample = source.sample().unwrap();
        let t1 = cpu_now();
        let model = tracker.update(sample);
        let t2 = cpu_now();
        app.set_model(model);
        let _ = app.screen();
        let t3 = cpu_now();
        term.draw(|f| ui::draw(f, &mut app)).unwrap();
        let t4 = cpu_now();
        s.read += t1 - t0;
        s.model += t2 - t1;
        s.rows += t3 - t2;
        s.render += t4 - t3;
        shown = app.model.len();
    }
    let per = |d: Duration| d / rounds;
    (
        Stages {
            read: per(s.read),
            model: per(s.model),
            rows: per(s.rows),
            render: per(s.render),
        },
        shown,
    )
}

fn report(what: &str, s: &Stages, shown: usize) {
    let total = s.read + s.model + s.rows + s.render;
    println!(
        "{what:<28} {shown:>5} shown  read {:>7.3} ms  model {:>6.3} ms  rows {:>6.3} ms  \
         render {:>6.3} ms  total {:>7.3} ms = {:.3}% of a core at 1 s",
        s.read.as_secs_f64() * 1e3,
        s.model.as_secs_f64() * 1e3,
        s.rows.as_secs_f64() * 1e3,
        s.render.as_secs_f64() * 1e3,
        total.as_secs_f64() * 1e3,
        total.as_secs_f64() * 100.0,
    );
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map(|a| a.parse().expect("N")).unwrap_or(1000);
    let rounds: u32 = args
        .next()
        .map(|a| a.parse().expect("ROUNDS"))
        .unwrap_or(50);
    let spawn = |arg: &str| -> Child {
        Command::new("sleep")
            .arg(arg)
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn sleep")
    };
    let mut load: Vec<Child> = Vec::new();
    while count_procs() < n {
        load.push(spawn("3600"));
    }
    let quiet = Command::new("sh")
        .args(["-c", "for i in 1 2 3 4 5; do sleep 3600 & done; wait"])
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn sh");
    std::thread::sleep(Duration::from_millis(300)); // let the quiet shell fork its five

    println!(
        "processes on the machine: {}, {rounds} rounds each",
        count_procs()
    );
    if std::env::var_os("BENCH_ONLY_ROOT").is_none() {
        let (s, shown) = measure(ProcSource::new(None, Default::default()).unwrap(), rounds);
        report("whole system", &s, shown);
    }
    let (s, shown) = measure(
        ProcSource::new(Some(quiet.id() as i32), Default::default()).unwrap(),
        rounds,
    );
    report("--root quiet subtree", &s, shown);
    // Its floor: listing /proc, which finds the pids born since the last reading.
    let mut scanner =
        foster::process::tree::Scanner::new(foster::process::tree::ScanOptions::default()).unwrap();
    let t0 = cpu_now();
    let mut listed = 0;
    for _ in 0..rounds {
        listed = scanner.list_pids().unwrap().len();
    }
    let per = (cpu_now() - t0) / rounds;
    println!(
        "{:<28} {listed:>5} pids   {:.3} ms",
        "listing /proc alone",
        per.as_secs_f64() * 1e3
    );

    // Teardown, by pid: the quiet shell's sleeps, the shell, the load.
    let qpid = quiet.id() as i32;
    let mut quiet = quiet;
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        if let Ok(b) = std::fs::read(format!("/proc/{pid}/stat"))
            && foster::process::procstat::StatFields::parse(&b).is_ok_and(|f| f.ppid == qpid)
        {
            let _ =
                nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL);
        }
    }
    let _ = quiet.kill();
    let _ = quiet.wait();
    for c in &mut load {
        let _ = c.kill();
    }
    for c in &mut load {
        let _ = c.wait();
    }
}
