//! The standard `process_*` metrics of the Prometheus client libraries, of the supervisor
//! itself, read from `/proc/self` when a scrape asks (as client_golang's process collector
//! does): CPU time, resident (`statm`'s, as `foster top` reads it) and virtual memory, open
//! and allowed descriptors, start time.
//! Unprefixed, so that dashboards made for any exporter read them.

use std::path::Path;
use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

/// What `/proc/self` says now; `None` for what could not be read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SelfReading {
    pub cpu_seconds: Option<f64>,
    pub resident_bytes: Option<u64>,
    pub virtual_bytes: Option<u64>,
    pub open_fds: Option<u64>,
    pub max_fds: Option<u64>,
    pub start_time_seconds: Option<f64>,
}

impl SelfReading {
    /// Reads this process.
    pub fn now() -> SelfReading {
        SelfReading::of(Path::new("/proc/self"))
    }

    /// Reads the process whose `/proc` directory is `dir` (the limit on descriptors is this
    /// process's). The resident memory is `statm`'s, as `foster top` and `ps` read it: `stat`'s
    /// is the kernel's unsummed approximation.
    fn of(dir: &Path) -> SelfReading {
        let stat =
            procfs::process::Process::new_with_root(dir.to_path_buf()).and_then(|p| p.stat());
        let hz = procfs::ticks_per_second() as f64;
        let page = procfs::page_size();
        let mut r = SelfReading::default();
        if let Ok(s) = &stat {
            r.cpu_seconds = Some((s.utime + s.stime) as f64 / hz);
            r.virtual_bytes = Some(s.vsize);
            r.start_time_seconds = procfs::boot_time_secs()
                .ok()
                .map(|boot| boot as f64 + s.starttime as f64 / hz);
        }
        r.resident_bytes = std::fs::read(dir.join("statm"))
            .ok()
            .and_then(|line| crate::process::procstat::parse_statm_resident(&line))
            .map(|pages| pages.saturating_mul(page));
        r.open_fds = std::fs::read_dir(dir.join("fd"))
            .ok()
            .map(|d| d.count().saturating_sub(1) as u64); // less the one read_dir holds
        r.max_fds = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
            .ok()
            .map(|(soft, _)| soft);
        r
    }
}

/// Registers `r`'s numbers in `reg` (a registry without prefix); what was not read is left out.
pub fn register(reg: &mut Registry, r: &SelfReading) {
    if let Some(v) = r.cpu_seconds {
        let c = Counter::<f64, AtomicU64>::default();
        c.inc_by(v);
        let help = "Total user and system CPU time spent in seconds";
        reg.register_with_unit("process_cpu", help, Unit::Seconds, c);
    }
    let gauges = [
        (
            "process_resident_memory",
            "Resident memory size in bytes",
            Some(Unit::Bytes),
            r.resident_bytes,
        ),
        (
            "process_virtual_memory",
            "Virtual memory size in bytes",
            Some(Unit::Bytes),
            r.virtual_bytes,
        ),
        (
            "process_open_fds",
            "Number of open file descriptors",
            None,
            r.open_fds,
        ),
        (
            "process_max_fds",
            "Maximum number of open file descriptors",
            None,
            r.max_fds,
        ),
    ];
    for (name, help, unit, v) in gauges {
        let Some(v) = v else { continue };
        let g = Gauge::<i64>::default();
        g.set(i64::try_from(v).unwrap_or(i64::MAX));
        match unit {
            Some(unit) => reg.register_with_unit(name, help, unit, g),
            None => reg.register(name, help, g),
        }
    }
    if let Some(v) = r.start_time_seconds {
        let g = Gauge::<f64, AtomicU64>::default();
        g.set(v);
        let help = "Start time of the process since unix epoch in seconds";
        reg.register_with_unit("process_start_time", help, Unit::Seconds, g);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The resident memory is `statm`'s second field, in bytes: read of a stopped process,
    /// whose pages do not change, `stat`'s field 24 falls short of it.
    #[test]
    fn resident_memory_is_statms() {
        use nix::sys::signal::{Signal, kill};
        use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
        let mut child = std::process::Command::new("sleep")
            .arg("1000")
            .spawn()
            .unwrap();
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        kill(pid, Signal::SIGSTOP).unwrap();
        let stopped = waitpid(pid, Some(WaitPidFlag::WUNTRACED)).unwrap();
        let dir = std::path::PathBuf::from(format!("/proc/{pid}"));
        let statm = std::fs::read_to_string(dir.join("statm")).unwrap();
        let r = SelfReading::of(&dir);
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(matches!(stopped, WaitStatus::Stopped(..)), "{stopped:?}");
        let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
        assert_eq!(
            r.resident_bytes,
            Some(pages * procfs::page_size()),
            "{statm}"
        );
    }

    #[test]
    fn this_process_reads_and_names_as_the_clients_do() {
        let r = SelfReading::now();
        assert!(
            r.cpu_seconds.is_some() && r.resident_bytes.unwrap() > 0,
            "{r:?}"
        );
        assert!(r.open_fds.unwrap() >= 3 && r.max_fds.unwrap() >= r.open_fds.unwrap());
        let mut reg = Registry::default();
        register(&mut reg, &r);
        let mut out = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut out, &reg).unwrap();
        for name in [
            "process_cpu_seconds_total ",
            "process_resident_memory_bytes ",
            "process_virtual_memory_bytes ",
            "process_open_fds ",
            "process_max_fds ",
            "process_start_time_seconds ",
        ] {
            assert!(out.contains(&format!("\n{name}")), "{name}: {out}");
        }
    }
}
