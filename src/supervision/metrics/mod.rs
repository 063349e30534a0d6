//! foster run's numbers for Prometheus: `--metrics ADDR` and `foster ctl metrics`.
//!
//! Owns [`render`], the Prometheus text format (version 0.0.4) of one [`Status`] snapshot and
//! the supervisor's running [`Counts`], encoded by the `prometheus-client` crate into a registry
//! made for that one scrape (nothing is polled: the numbers are gathered when asked for), and
//! [`http`], the small HTTP/1.1 responder of `GET /metrics`; [`process`]: the standard
//! `process_*` metrics of the supervisor. `docs/metrics.md` lists the metrics.

pub mod http;
pub mod process;

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use crate::supervision::control::protocol::{HelperInfo, HelperState, Role, Status};

/// The `Content-Type` of what [`render`] writes.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// What the supervisor counts as it goes (a snapshot cannot tell): kept from its start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// Restarts by the restart rules (`restart` events with a delay), by helper.
    pub restarts: BTreeMap<String, u64>,
    /// Restarts asked for (`ctl restart`), by helper: apart, so that a crash-loop alert on
    /// `restarts` does not fire on an operator's.
    pub requested_restarts: BTreeMap<String, u64>,
    /// Adoptions (`reparented` events), by classification (`expected`, `foreign_reaper`...).
    pub adoptions: BTreeMap<String, u64>,
    /// Signals of an orphan policy sent (`signal` events with reason `orphan_policy`).
    pub orphans_policed: u64,
    /// Times the kernel's announcements of births and ends were lost (its socket's buffer
    /// overflowed) and the whole tree was read instead.
    pub tree_events_lost: u64,
    /// Events the events log could not take (a write failed, or its FIFO was full).
    pub events_log_lost: u64,
    /// Events of this supervisor.
    pub events: u64,
}

impl Counts {
    /// Helper `name` is restarted on request.
    pub fn requested_restart(&mut self, name: &str) {
        *self.requested_restarts.entry(name.to_string()).or_default() += 1;
    }
}

type Labels = Vec<(&'static str, String)>;
type FGauge = Gauge<f64, AtomicU64>;
type FCounter = Counter<f64, AtomicU64>;

fn helper(name: &str) -> Labels {
    vec![("helper", name.to_string())]
}

/// A state's name in JSON and metrics (`gave_up`).
fn state_name(s: HelperState) -> String {
    serde_json::to_value(s)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The Prometheus text of `status` and `counts` (`now_ms`: the wall clock, milliseconds since
/// the Unix epoch, for the supervisor's uptime).
pub fn render(status: &Status, counts: &Counts, now_ms: u64) -> String {
    let mut reg = Registry::with_prefix("foster");
    register_build(&mut reg);
    register_supervisor(&mut reg, status, now_ms);
    register_counts(&mut reg, counts);
    let mut helpers = HelperFamilies {
        boot_secs: procfs::boot_time_secs().ok(),
        ..HelperFamilies::default()
    };
    for h in &status.helpers {
        helpers.add(h, status, counts);
    }
    helpers.register(&mut reg);
    let mut out = String::new();
    // Writing to a String does not fail.
    let _ = prometheus_client::encoding::prometheus_text::encode(&mut out, &reg);
    // The standard process metrics, unprefixed, of this process: render runs in the supervisor.
    let mut standard = Registry::default();
    process::register(&mut standard, &process::SelfReading::now());
    let _ = prometheus_client::encoding::prometheus_text::encode(&mut out, &standard);
    out
}

/// What foster was built from, as exporters say it: `foster_build_info{version, commit} 1`
/// (the commit `unknown` outside a git checkout, with `-dirty` when the checkout had changes).
fn register_build(reg: &mut Registry) {
    let commit = env!("FOSTER_COMMIT")
        .strip_prefix("commit ")
        .unwrap_or("unknown");
    let labels = vec![("version", env!("CARGO_PKG_VERSION")), ("commit", commit)];
    reg.register(
        "build",
        "The version and commit foster was built from",
        prometheus_client::metrics::info::Info::new(labels),
    );
}

/// The supervisor's own numbers: its uptime, memory and CPU, the tree's size, the shutdown.
fn register_supervisor(reg: &mut Registry, status: &Status, now_ms: u64) {
    let hz = status.hz.max(1) as f64;
    let ticks = |t: u64| t as f64 / hz;

    let sup = status
        .processes
        .iter()
        .find(|p| p.role == Role::Supervisor && p.generation == 0);
    let up = FGauge::default();
    up.set(now_ms.saturating_sub(status.supervisor.started_ms) as f64 / 1000.0);
    reg.register_with_unit(
        "supervisor_uptime",
        "Time since foster run started",
        Unit::Seconds,
        up,
    );
    let rss = Gauge::<i64>::default();
    rss.set(sup.map_or(0, |p| p.rss_bytes) as i64);
    reg.register_with_unit(
        "supervisor_resident_memory",
        "Resident memory of the supervisor process",
        Unit::Bytes,
        rss,
    );
    let cpu = FCounter::default();
    cpu.inc_by(sup.map_or(0.0, |p| ticks(p.cpu_ticks)));
    reg.register_with_unit(
        "supervisor_cpu",
        "User and system CPU time of the supervisor process",
        Unit::Seconds,
        cpu,
    );
    let procs = Gauge::<i64>::default();
    procs.set(status.processes.len() as i64);
    reg.register(
        "processes",
        "Live processes of the supervised tree, the supervisor included",
        procs,
    );
    let shutting = Gauge::<i64>::default();
    shutting.set(i64::from(status.supervisor.shutting_down));
    reg.register(
        "shutting_down",
        "1 once the orderly shutdown has begun",
        shutting,
    );
}

/// What the supervisor counted: events, adoptions, orphans policed, announcements lost.
fn register_counts(reg: &mut Registry, counts: &Counts) {
    let events = Counter::<u64>::default();
    events.inc_by(counts.events);
    reg.register("events", "Supervision events since the start", events);
    let adoptions = Family::<Labels, Counter>::default();
    for class in ["expected", "foreign_reaper", "escaped", "pid_reused"] {
        let n = counts.adoptions.get(class).copied().unwrap_or(0);
        adoptions
            .get_or_create(&vec![("classification", class.to_string())])
            .inc_by(n);
    }
    reg.register(
        "adoptions",
        "Processes reparented inside the tree, by how the adoption compares with the expected one",
        adoptions,
    );
    let policed = Counter::<u64>::default();
    policed.inc_by(counts.orphans_policed);
    reg.register(
        "orphans_policed",
        "Signals sent to orphans by their generation's orphan policy",
        policed,
    );
    let lost = Counter::<u64>::default();
    lost.inc_by(counts.tree_events_lost);
    reg.register(
        "tree_events_lost",
        "Times the kernel's announcements of births and ends in the tree were lost (its socket's \
         buffer overflowed) and the whole tree was read instead",
        lost,
    );
    let log_lost = Counter::<u64>::default();
    log_lost.inc_by(counts.events_log_lost);
    reg.register(
        "events_log_lost",
        "Events the events log could not take (a write failed, or its FIFO was full)",
        log_lost,
    );
}

/// The families of the helpers' numbers, one series per helper.
#[derive(Default)]
struct HelperFamilies {
    state: Family<Labels, Gauge>,
    ready: Family<Labels, Gauge>,
    up: Family<Labels, Gauge>,
    restarts: Family<Labels, Counter>,
    requested: Family<Labels, Counter>,
    launches: Family<Labels, Counter>,
    last_exit: Family<Labels, Gauge>,
    uptime: Family<Labels, FGauge>,
    start_time: Family<Labels, FGauge>,
    /// The boot's time (seconds since the epoch), which process start times count from.
    boot_secs: Option<u64>,
    tree: TreeFamilies,
}

/// The series of a helper's tree: its live processes, their memory and CPU summed.
#[derive(Default)]
struct TreeFamilies {
    procs: Family<Labels, Gauge>,
    rss: Family<Labels, Gauge>,
    cpu: Family<Labels, FGauge>,
}

impl TreeFamilies {
    /// The families, in the order of the text.
    fn register(mut self, reg: &mut Registry) {
        use std::mem::take;
        reg.register(
            "helper_processes",
            "Live processes of the helper's tree",
            take(&mut self.procs),
        );
        reg.register_with_unit(
            "helper_resident_memory",
            "Resident memory of the helper's tree, its live processes summed",
            Unit::Bytes,
            take(&mut self.rss),
        );
        reg.register_with_unit(
            "helper_cpu",
            "User and system CPU time of the helper's tree, its live processes summed (falls \
             when one ends)",
            Unit::Seconds,
            take(&mut self.cpu),
        );
    }
}

impl HelperFamilies {
    /// Helper `h`'s series.
    fn add(&mut self, h: &HelperInfo, status: &Status, counts: &Counts) {
        let hz = status.hz.max(1) as f64;
        let ticks = |t: u64| t as f64 / hz;
        let l = helper(&h.name);
        for s in HelperState::ALL {
            let mut ls = l.clone();
            ls.push(("state", state_name(s)));
            self.state.get_or_create(&ls).set(i64::from(h.state == s));
        }
        self.ready
            .get_or_create(&l)
            .set(i64::from(h.state == HelperState::Ready));
        self.up
            .get_or_create(&l)
            .set(i64::from(h.identity.is_some()));
        self.restarts
            .get_or_create(&l)
            .inc_by(counts.restarts.get(&h.name).copied().unwrap_or(0));
        self.requested
            .get_or_create(&l)
            .inc_by(counts.requested_restarts.get(&h.name).copied().unwrap_or(0));
        self.launches
            .get_or_create(&l)
            .inc_by(u64::from(h.launches));
        if let Some(e) = h.last_exit {
            self.last_exit
                .get_or_create(&l)
                .set(i64::from(e.shell_code()));
        }
        if let Some(p) = h.identity.and_then(|id| {
            status
                .processes
                .iter()
                .find(|p| p.pid == id.pid && p.start_time == id.start_time)
        }) {
            self.uptime
                .get_or_create(&l)
                .set(ticks(status.now_ticks.saturating_sub(p.start_time)));
            if let Some(boot) = self.boot_secs {
                self.start_time
                    .get_or_create(&l)
                    .set(boot as f64 + ticks(p.start_time));
            }
        }
        let tree = status
            .processes
            .iter()
            .filter(|p| p.role != Role::Supervisor && p.helper.as_deref() == Some(&*h.name));
        let (mut n, mut rss, mut cpu) = (0i64, 0u64, 0u64);
        for p in tree {
            n += 1;
            rss += p.rss_bytes;
            cpu += p.cpu_ticks;
        }
        self.tree.procs.get_or_create(&l).set(n);
        self.tree.rss.get_or_create(&l).set(rss as i64);
        self.tree.cpu.get_or_create(&l).set(ticks(cpu));
    }

    /// The families, in the order of the text.
    fn register(mut self, reg: &mut Registry) {
        self.register_lifecycle(reg);
        self.register_current(reg);
    }

    /// The families of the helpers' lives so far: state, readiness, restarts, launches, last
    /// exit.
    fn register_lifecycle(&mut self, reg: &mut Registry) {
        use std::mem::take;
        reg.register(
            "helper_state",
            "1 for the state each helper is in, 0 for the others",
            take(&mut self.state),
        );
        reg.register(
            "helper_ready",
            "1 while the helper is ready",
            take(&mut self.ready),
        );
        reg.register(
            "helper_up",
            "1 while the helper has a process",
            take(&mut self.up),
        );
        reg.register(
            "helper_restarts",
            "Restarts by the restart rules since foster started",
            take(&mut self.restarts),
        );
        reg.register(
            "helper_requested_restarts",
            "Restarts asked for through the control socket since foster started",
            take(&mut self.requested),
        );
        reg.register(
            "helper_launches",
            "Launches that ran the helper's program since foster started",
            take(&mut self.launches),
        );
        reg.register(
            "helper_last_exit_code",
            "How the helper's last process ended: its exit code, or 128 + the signal that \
             killed it",
            take(&mut self.last_exit),
        );
    }

    /// The families of the helpers' current processes and trees: uptime, start time, size,
    /// memory, CPU.
    fn register_current(&mut self, reg: &mut Registry) {
        use std::mem::take;
        reg.register_with_unit(
            "helper_uptime",
            "Time since the helper's current process started",
            Unit::Seconds,
            take(&mut self.uptime),
        );
        reg.register_with_unit(
            "helper_start_time",
            "Start time of the helper's current process since unix epoch (none while it has \
             no process: in its restart delay, stopped, ended)",
            Unit::Seconds,
            take(&mut self.start_time),
        );
        take(&mut self.tree).register(reg);
    }
}
