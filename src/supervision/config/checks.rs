//! A helper's readiness and liveness keys: `ready = { ... }`, `health = { ... }`, `watchdog`.
//!
//! Owns how they are written and read: [`ReadySection`] and [`HealthSection`] as the file gives
//! them (each field read by a type of its own, so that a wrong value is a mistake at its own
//! key), then [`ReadySection::check`] and [`HealthSection::probe`], which say which check the
//! section asks for, or why it is not one (none given, two given, an option that does not
//! apply); `Config::validate` reports those at the section's key. The values: a notification
//! descriptor number ([`NotifyFd`]), a TCP address ([`TcpTarget`]), a regular expression
//! ([`LogPattern`], the `regex` crate, bounded in text and compiled size), a count of failures
//! ([`Failures`]); durations through [`PositiveDuration`] (`crate::base::duration`). What the
//! checks do at run time is `crate::supervision::readiness`; the reference is `docs/run.md`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use serde::Deserialize;
use serde::de::{self, Deserializer};

use super::value::{CommandLine, FieldError, PositiveDuration};
use crate::base::duration::Text;

/// How long a helper has to become ready when its `ready` gives no `timeout`: 90 s, systemd's
/// default start timeout.
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(90);
/// The time between two attempts of a readiness probe (`exec`, `tcp`) when none is given.
pub const DEFAULT_READY_INTERVAL: Duration = Duration::from_secs(1);
/// The time between two health checks when none is given.
pub const DEFAULT_HEALTH_INTERVAL: Duration = Duration::from_secs(10);
/// How long one health check may take when no `timeout` is given.
pub const DEFAULT_HEALTH_TIMEOUT: Duration = Duration::from_secs(5);
/// Failed health checks in a row that fail the helper when no `failures` is given.
pub const DEFAULT_FAILURES: u32 = 3;
/// The most failures in a row a health check may be given.
pub const MAX_FAILURES: u32 = 1000;
/// The highest notification descriptor number (`ready = { fd = N }`).
pub const MAX_NOTIFY_FD: i32 = 255;
/// The longest `ready = { log = ... }` pattern, in bytes.
pub const MAX_PATTERN: usize = 4096;
/// The most memory a compiled `log` pattern may take (the `regex` crate's size limit).
pub const MAX_PATTERN_COMPILED: usize = 1 << 20;

/// `ready = { ... }` as written: exactly one of `notify`, `fd`, `exec`, `tcp`, `log`, and the
/// options that apply to it ([`ReadySection::check`]).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadySection {
    /// The systemd protocol (`sd_notify`): `true`.
    #[serde(default)]
    pub notify: Option<NotifyOn>,
    /// The s6 protocol: the descriptor number the helper writes a newline to.
    #[serde(default)]
    pub fd: Option<NotifyFd>,
    /// A probe command: ready once it exits 0.
    #[serde(default)]
    pub exec: Option<CommandLine>,
    /// A connect probe: ready once a TCP connection to this address is accepted.
    #[serde(default)]
    pub tcp: Option<TcpTarget>,
    /// Ready once a line of the helper's captured output matches.
    #[serde(default)]
    pub log: Option<LogPattern>,
    /// Between two attempts of a probe (`exec`, `tcp`).
    #[serde(default)]
    pub interval: Option<PositiveDuration>,
    /// How long the helper has, from its launch, to become ready.
    #[serde(default)]
    pub timeout: Option<PositiveDuration>,
}

/// Which readiness check a [`ReadySection`] asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadyCheck<'a> {
    /// `READY=1` on the notify socket, from a process of the helper's tree.
    Notify,
    /// A newline on this descriptor.
    Fd(i32),
    /// This command exits 0; tried again `interval` after each failure.
    Exec {
        command: &'a CommandLine,
        interval: Duration,
    },
    /// A connection to this address is accepted; tried again `interval` after each failure.
    Tcp {
        addr: SocketAddr,
        interval: Duration,
    },
    /// A line of the helper's output matches.
    Log(&'a LogPattern),
}

impl ReadyCheck<'_> {
    /// Its name in events and status: `notify`, `fd`, `exec`, `tcp`, `log`.
    pub fn name(&self) -> &'static str {
        match self {
            ReadyCheck::Notify => "notify",
            ReadyCheck::Fd(_) => "fd",
            ReadyCheck::Exec { .. } => "exec",
            ReadyCheck::Tcp { .. } => "tcp",
            ReadyCheck::Log(_) => "log",
        }
    }
}

/// A field of a section that does not fit the others.
fn misfit(field: &'static str, message: String) -> FieldError {
    FieldError {
        field,
        span: None,
        message,
    }
}

impl ReadySection {
    /// The check this section asks for, or why it is not one (the error's field is
    /// `ready`'s own key, or the option that does not apply).
    pub fn check(&self) -> Result<ReadyCheck<'_>, FieldError> {
        let given: Vec<&'static str> = [
            ("notify", self.notify.is_some()),
            ("fd", self.fd.is_some()),
            ("exec", self.exec.is_some()),
            ("tcp", self.tcp.is_some()),
            ("log", self.log.is_some()),
        ]
        .into_iter()
        .filter_map(|(k, set)| set.then_some(k))
        .collect();
        let one = "give exactly one of notify = true, fd = N, exec = [...], tcp = \"HOST:PORT\", \
                   log = \"REGEX\"";
        match given.len() {
            0 => return Err(misfit("", format!("no readiness check: {one}"))),
            1 => {}
            _ => {
                return Err(misfit(
                    "",
                    format!("{} given together: {one}", given.join(" and ")),
                ));
            }
        }
        let interval = self.interval.map_or(DEFAULT_READY_INTERVAL, |d| d.0);
        let check = if self.notify.is_some() {
            ReadyCheck::Notify
        } else if let Some(fd) = self.fd {
            ReadyCheck::Fd(fd.0)
        } else if let Some(command) = &self.exec {
            ReadyCheck::Exec { command, interval }
        } else if let Some(t) = self.tcp {
            ReadyCheck::Tcp {
                addr: t.0,
                interval,
            }
        } else if let Some(p) = &self.log {
            ReadyCheck::Log(p)
        } else {
            unreachable!("one check was counted")
        };
        if self.interval.is_some()
            && !matches!(check, ReadyCheck::Exec { .. } | ReadyCheck::Tcp { .. })
        {
            return Err(misfit(
                "interval",
                format!(
                    "interval applies to the probes (exec, tcp), not to {}: leave it out",
                    check.name()
                ),
            ));
        }
        Ok(check)
    }

    /// How long the helper has, from its launch, to become ready.
    pub fn timeout(&self) -> Duration {
        self.timeout.map_or(DEFAULT_READY_TIMEOUT, |d| d.0)
    }
}

/// `health = { ... }` as written: exactly one of `exec`, `tcp`, and when and how often.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthSection {
    /// A probe command: healthy when it exits 0 within `timeout`.
    #[serde(default)]
    pub exec: Option<CommandLine>,
    /// A connect probe: healthy when a connection is accepted within `timeout`.
    #[serde(default)]
    pub tcp: Option<TcpTarget>,
    /// Between the end of one check and the start of the next (and from readiness to the
    /// first).
    #[serde(default)]
    pub interval: Option<PositiveDuration>,
    /// How long one check may take.
    #[serde(default)]
    pub timeout: Option<PositiveDuration>,
    /// Failed checks in a row that fail the helper.
    #[serde(default)]
    pub failures: Option<Failures>,
}

/// What a health check runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe<'a> {
    Exec(&'a CommandLine),
    Tcp(SocketAddr),
}

impl Probe<'_> {
    /// `exec` or `tcp`.
    pub fn name(&self) -> &'static str {
        match self {
            Probe::Exec(_) => "exec",
            Probe::Tcp(_) => "tcp",
        }
    }
}

impl HealthSection {
    /// The probe this section asks for, or why it is not one.
    pub fn probe(&self) -> Result<Probe<'_>, FieldError> {
        let one = "give exactly one of exec = [...], tcp = \"HOST:PORT\"";
        match (&self.exec, self.tcp) {
            (Some(c), None) => Ok(Probe::Exec(c)),
            (None, Some(t)) => Ok(Probe::Tcp(t.0)),
            (None, None) => Err(misfit("", format!("no health check: {one}"))),
            (Some(_), Some(_)) => Err(misfit("", format!("exec and tcp given together: {one}"))),
        }
    }

    /// Between two checks.
    pub fn interval(&self) -> Duration {
        self.interval.map_or(DEFAULT_HEALTH_INTERVAL, |d| d.0)
    }

    /// How long one check may take.
    pub fn timeout(&self) -> Duration {
        self.timeout.map_or(DEFAULT_HEALTH_TIMEOUT, |d| d.0)
    }

    /// Failed checks in a row that fail the helper.
    pub fn failures(&self) -> u32 {
        self.failures.map_or(DEFAULT_FAILURES, |f| f.0)
    }

    /// What is legal but likely not meant, at the field to change (`timeout`, or `interval`
    /// when the timeout is the default): a `timeout` not shorter than the `interval`, where a
    /// slow probe spaces the checks out by up to its timeout rather than the interval.
    pub fn warning(&self) -> Option<(&'static str, String)> {
        let (interval, timeout) = (self.interval(), self.timeout());
        if timeout < interval {
            return None;
        }
        let (field, default) = match self.timeout {
            Some(_) => ("timeout", ""),
            None => ("interval", ", the default"),
        };
        Some((
            field,
            format!(
                "timeout ({}{default}) is not shorter than interval ({}): a probe may run for \
                 longer than the interval (the next check waits for its end, so checks come up \
                 to {} apart); a timeout shorter than the interval is what was likely meant",
                Text(timeout),
                Text(interval),
                Text(interval.saturating_add(timeout))
            ),
        ))
    }
}

/// `notify = true` (`false` is refused: leave `ready` out instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotifyOn;

impl<'de> Deserialize<'de> for NotifyOn {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match bool::deserialize(d) {
            Ok(true) => Ok(NotifyOn),
            Ok(false) => Err(de::Error::custom(
                "notify = false asks for no check: leave `ready` out, or write notify = true",
            )),
            Err(_) => Err(de::Error::custom("expected notify = true")),
        }
    }
}

/// The s6 notification descriptor: a number from 3 to [`MAX_NOTIFY_FD`] (0 to 2 are the
/// standard ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotifyFd(pub i32);

impl<'de> Deserialize<'de> for NotifyFd {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let expected = || format!("expected a descriptor number from 3 to {MAX_NOTIFY_FD}");
        let n = i64::deserialize(d).map_err(|_| de::Error::custom(expected()))?;
        match n {
            0..=2 => Err(de::Error::custom(format!(
                "descriptor {n} is a standard one (stdin, stdout, stderr): {}",
                expected()
            ))),
            3..=255 => Ok(NotifyFd(n as i32)),
            _ => Err(de::Error::custom(format!("descriptor {n}: {}", expected()))),
        }
    }
}

/// What a readiness check's `connect` address or `log` pattern must look like, when it does
/// not; the message says what was expected.
#[derive(Debug, thiserror::Error)]
pub enum CheckValueError {
    #[error("{0:?} has no port number: {TCP_EXPECTED}")]
    NoPort(String),
    #[error("{0:?} is not an address: {TCP_EXPECTED}")]
    NotAnAddress(String),
    #[error("{0:?}: port 0 cannot be connected to: {TCP_EXPECTED}")]
    PortZero(String),
    #[error("{0:?}: port {1} is out of range: a port is a number from 1 to 65535")]
    PortOutOfRange(String, String),
    #[error(
        "the pattern is empty: it would match any line; expected a regular expression such as \
         \"listening on\""
    )]
    EmptyPattern,
    #[error("the pattern is {0} bytes long: at most {MAX_PATTERN}")]
    LongPattern(usize),
    #[error(
        "the pattern compiles to more than {kib} KiB: write a simpler one",
        kib = MAX_PATTERN_COMPILED >> 10
    )]
    PatternTooBig,
    #[error("not a regular expression: {0}")]
    NotARegex(#[source] regex::Error),
}

const TCP_EXPECTED: &str = "expected IP:PORT such as \"127.0.0.1:5432\" or \"[::1]:5432\", or \
                            \"localhost:PORT\" (a host name is not resolved)";

/// A TCP address to connect to: `IP:PORT` (`127.0.0.1:5432`, `[::1]:5432`), or `localhost:PORT`
/// for `127.0.0.1:PORT`. A host name is not resolved (a probe never waits on a name server).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpTarget(pub SocketAddr);

impl TcpTarget {
    /// Reads the forms of the type's documentation; the error says what was expected.
    pub fn parse(text: &str) -> Result<TcpTarget, CheckValueError> {
        // A port of digits past 65535 is said as such, whatever the host.
        let port = text.rsplit_once(':').map_or("", |(_, p)| p);
        if !port.is_empty()
            && port.bytes().all(|b| b.is_ascii_digit())
            && port.parse::<u16>().is_err()
        {
            return Err(CheckValueError::PortOutOfRange(
                text.to_string(),
                port.to_string(),
            ));
        }
        let addr = match text.strip_prefix("localhost:") {
            Some(port) => port
                .parse::<u16>()
                .map(|p| SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), p))
                .map_err(|_| CheckValueError::NoPort(text.to_string()))?,
            None => text
                .parse::<SocketAddr>()
                .map_err(|_| CheckValueError::NotAnAddress(text.to_string()))?,
        };
        if addr.port() == 0 {
            return Err(CheckValueError::PortZero(text.to_string()));
        }
        Ok(TcpTarget(addr))
    }
}

impl<'de> Deserialize<'de> for TcpTarget {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)
            .map_err(|_| de::Error::custom("expected an address such as \"127.0.0.1:5432\""))?;
        TcpTarget::parse(&text).map_err(de::Error::custom)
    }
}

/// A regular expression a line of the helper's output must match (the `regex` crate's syntax,
/// on the line's bytes, newline excluded): at most [`MAX_PATTERN`] bytes, compiled within
/// [`MAX_PATTERN_COMPILED`].
#[derive(Debug, Clone)]
pub struct LogPattern(pub regex::bytes::Regex);

impl LogPattern {
    /// Compiles `text`; the error says why it cannot be used.
    pub fn parse(text: &str) -> Result<LogPattern, CheckValueError> {
        if text.is_empty() {
            return Err(CheckValueError::EmptyPattern);
        }
        if text.len() > MAX_PATTERN {
            return Err(CheckValueError::LongPattern(text.len()));
        }
        regex::bytes::RegexBuilder::new(text)
            .size_limit(MAX_PATTERN_COMPILED)
            .build()
            .map(LogPattern)
            .map_err(|e| match e {
                regex::Error::CompiledTooBig(_) => CheckValueError::PatternTooBig,
                e => CheckValueError::NotARegex(e),
            })
    }

    /// Whether `line` matches.
    pub fn matches(&self, line: &[u8]) -> bool {
        self.0.is_match(line)
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

impl PartialEq for LogPattern {
    fn eq(&self, other: &LogPattern) -> bool {
        self.as_str() == other.as_str()
    }
}
impl Eq for LogPattern {}

impl<'de> Deserialize<'de> for LogPattern {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)
            .map_err(|_| de::Error::custom("expected a regular expression as a string"))?;
        LogPattern::parse(&text).map_err(de::Error::custom)
    }
}

/// Failed checks in a row: from 1 to [`MAX_FAILURES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failures(pub u32);

impl<'de> Deserialize<'de> for Failures {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let expected = format!("expected a count from 1 to {MAX_FAILURES}");
        let n = i64::deserialize(d).map_err(|_| de::Error::custom(&expected))?;
        if (1..=i64::from(MAX_FAILURES)).contains(&n) {
            Ok(Failures(n as u32))
        } else {
            Err(de::Error::custom(format!("failures = {n}: {expected}")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::supervision::config::{Config, ConfigError};
    use std::path::Path;

    const HELPER: &str = "[[helper]]\nname = \"db\"\ncommand = [\"x\"]\n";

    fn parse(extra: &str) -> Result<Config, Vec<ConfigError>> {
        Config::parse(Path::new("f.toml"), &format!("{HELPER}{extra}"))
            .map_err(|e| e.iter().cloned().collect())
    }

    /// The one mistake of `extra`: its key and message.
    fn mistake(extra: &str) -> (String, String) {
        let e = parse(extra).expect_err(extra);
        assert_eq!(e.len(), 1, "{extra}: one mistake, not {e:#?}");
        assert_eq!(e[0].helper.as_deref(), Some("db"), "{}", e[0]);
        (e[0].key.clone().unwrap_or_default(), e[0].message.clone())
    }

    #[test]
    fn each_readiness_check_reads_with_its_defaults() {
        let c = parse("ready = { notify = true }\n").unwrap();
        let r = c.helpers[0].ready.as_ref().unwrap();
        assert_eq!(r.check().unwrap(), ReadyCheck::Notify);
        assert_eq!(r.timeout(), DEFAULT_READY_TIMEOUT);
        let c = parse("ready = { fd = 3, timeout = \"5s\" }\n").unwrap();
        let r = c.helpers[0].ready.as_ref().unwrap();
        assert_eq!(r.check().unwrap(), ReadyCheck::Fd(3));
        assert_eq!(r.timeout(), Duration::from_secs(5));
        let c =
            parse("ready = { exec = [\"pg_isready\", \"-q\"], interval = \"250ms\" }\n").unwrap();
        match c.helpers[0].ready.as_ref().unwrap().check().unwrap() {
            ReadyCheck::Exec { command, interval } => {
                assert_eq!(command.0, ["pg_isready", "-q"]);
                assert_eq!(interval, Duration::from_millis(250));
            }
            other => panic!("{other:?}"),
        }
        for (text, addr) in [
            ("127.0.0.1:5432", "127.0.0.1:5432"),
            ("localhost:80", "127.0.0.1:80"),
            ("[::1]:8080", "[::1]:8080"),
        ] {
            let c = parse(&format!("ready = {{ tcp = \"{text}\" }}\n")).unwrap();
            let check = c.helpers[0].ready.as_ref().unwrap().check().unwrap();
            assert_eq!(
                check,
                ReadyCheck::Tcp {
                    addr: addr.parse().unwrap(),
                    interval: DEFAULT_READY_INTERVAL
                }
            );
        }
        let c = parse("ready = { log = \"listening on port \\\\d+\" }\n").unwrap();
        match c.helpers[0].ready.as_ref().unwrap().check().unwrap() {
            ReadyCheck::Log(p) => {
                assert!(p.matches(b"2024 listening on port 80 \xff"));
                assert!(!p.matches(b"listening on port x"));
            }
            other => panic!("{other:?}"),
        }
        let c = parse("health = { tcp = \"127.0.0.1:1\" }\nwatchdog = \"2s\"\n").unwrap();
        let h = c.helpers[0].health.as_ref().unwrap();
        assert_eq!(
            h.probe().unwrap(),
            Probe::Tcp("127.0.0.1:1".parse().unwrap())
        );
        assert_eq!(
            (h.interval(), h.timeout(), h.failures()),
            (
                DEFAULT_HEALTH_INTERVAL,
                DEFAULT_HEALTH_TIMEOUT,
                DEFAULT_FAILURES
            )
        );
        assert_eq!(c.helpers[0].watchdog.unwrap().0, Duration::from_secs(2));
        let c = parse(
            "health = { exec = [\"true\"], interval = \"1s\", timeout = \"2s\", failures = 5 }\n",
        )
        .unwrap();
        let h = c.helpers[0].health.as_ref().unwrap();
        assert_eq!(
            (h.interval(), h.timeout(), h.failures()),
            (Duration::from_secs(1), Duration::from_secs(2), 5)
        );
        assert!(parse("").unwrap().helpers[0].ready.is_none());
    }

    #[test]
    fn each_mistake_names_the_helper_and_its_key() {
        let cases: &[(&str, &str, &str)] = &[
            ("ready = {}\n", "helper[1].ready", "no readiness check"),
            (
                "ready = { notify = true, fd = 3 }\n",
                "helper[1].ready",
                "notify and fd given together",
            ),
            (
                "ready = { notify = true, interval = \"1s\" }\n",
                "helper[1].ready.interval",
                "interval applies to the probes",
            ),
            (
                "ready = { notify = false }\n",
                "helper[1].ready.notify",
                "leave `ready` out",
            ),
            (
                "ready = { fd = 2 }\n",
                "helper[1].ready.fd",
                "a standard one",
            ),
            (
                "ready = { fd = 300 }\n",
                "helper[1].ready.fd",
                "from 3 to 255",
            ),
            (
                "ready = { fd = \"3\" }\n",
                "helper[1].ready.fd",
                "from 3 to 255",
            ),
            (
                "ready = { tcp = \"db:5432\" }\n",
                "helper[1].ready.tcp",
                "not resolved",
            ),
            (
                "ready = { tcp = \"127.0.0.1:0\" }\n",
                "helper[1].ready.tcp",
                "port 0",
            ),
            (
                "ready = { log = \"(\" }\n",
                "helper[1].ready.log",
                "not a regular expression",
            ),
            (
                "ready = { log = \"\" }\n",
                "helper[1].ready.log",
                "the pattern is empty",
            ),
            (
                "ready = { log = \"a{1000}{1000}\" }\n",
                "helper[1].ready.log",
                "compiles to more than 1024 KiB",
            ),
            (
                "ready = { exec = [] }\n",
                "helper[1].ready.exec",
                "the command is empty",
            ),
            (
                "ready = { notify = true, timeout = \"0s\" }\n",
                "helper[1].ready.timeout",
                "zero duration",
            ),
            (
                "ready = { sd_notify = true }\n",
                "helper[1].ready.sd_notify",
                "unknown field",
            ),
            (
                "ready = { log = \"up\" }\noutput = \"null\"\n",
                "helper[1].ready.log",
                "its output is null",
            ),
            ("health = {}\n", "helper[1].health", "no health check"),
            (
                "health = { exec = [\"true\"], tcp = \"127.0.0.1:1\" }\n",
                "helper[1].health",
                "exec and tcp given together",
            ),
            (
                "health = { exec = [\"true\"], failures = 0 }\n",
                "helper[1].health.failures",
                "from 1 to 1000",
            ),
            (
                "watchdog = \"-1s\"\n",
                "helper[1].watchdog",
                "negative duration",
            ),
        ];
        for (extra, key, message) in cases {
            let (k, m) = mistake(extra);
            assert_eq!(&k, key, "{extra}: {m}");
            assert!(m.contains(message), "{extra}: {m:?} lacks {message:?}");
        }
        let long = format!("ready = {{ log = \"{}\" }}\n", "a".repeat(MAX_PATTERN + 1));
        assert!(mistake(&long).1.contains("at most 4096"));
    }
}
