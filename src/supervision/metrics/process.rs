//! The standard `process_*` metrics of the Prometheus client libraries, of the supervisor
//! itself, read from `/proc/self` when a scrape asks (as client_golang's process collector
//! does): CPU time, resident and virtual memory, open and allowed descriptors, start time.
//! Unprefixed, so that dashboards made for any exporter read them.

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
        let stat = procfs::process::Process::myself().and_then(|p| p.stat());
        let hz = procfs::ticks_per_second() as f64;
        let page = procfs::page_size();
        let mut r = SelfReading::default();
        if let Ok(s) = &stat {
            r.cpu_seconds = Some((s.utime + s.stime) as f64 / hz);
            r.resident_bytes = Some(s.rss.saturating_mul(page));
            r.virtual_bytes = Some(s.vsize);
            r.start_time_seconds = procfs::boot_time_secs()
                .ok()
                .map(|boot| boot as f64 + s.starttime as f64 / hz);
        }
        r.open_fds = std::fs::read_dir("/proc/self/fd")
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
