//! The configuration of `foster run`: a TOML file declaring the helpers to supervise
//! (`docs/run.md` has every key). Parsing and validation only; no input panics.
//!
//! - [`schema`]: the serde types, [`Config`] and its helpers, each field read alone.
//! - [`value`]: single values: durations, commands, user and group ids.
//! - [`checks`]: the `ready` and `health` sections.
//! - [`collect`]: reading to the end, every mistake at once, each where it was written.
//! - [`error`]: [`ConfigError`], [`ConfigErrors`], and positions in the text.
//! - [`validate`]: the checks across fields; [`depends`]: those of `depends_on`.
//! - [`system`]: `--check`'s checks against the system the helpers would run on.
//! - [`envfile`]: a helper's `env_file`, read at each launch.
//! - [`locate`]: where the text comes from ([`Config::load`], [`Config::read`]), its bounds.
//!
//! What is legal but likely not meant is kept as [`Config::warnings`]. Unknown keys are
//! errors, so a misspelt key never silently falls back to a default.

pub mod checks;
mod collect;
mod depends;
pub mod envfile;
mod error;
mod locate;
mod schema;
mod system;
mod validate;
mod value;

pub use error::{ConfigError, ConfigErrors};
pub use locate::Scope;
pub use schema::{Backoff, Config, GenerationPolicy, Helper, RestartMode, SupervisorSection};
pub(crate) use system::helper_reaches;
pub use value::{CommandLine, MIN_DURATION, PositiveDuration, parse_id};

/// A generation's reaction to its parent's death (`exit`, `notify`, `kill`).
pub use crate::gate::policy::Reaction;
pub use crate::process::state::Condition;

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use super::error::{MAX_MISTAKES, key_at, line_col, table_at};
    use super::*;
    use crate::gate::policy::MAX_GENERATIONS;
    use crate::process::signal::Sig;

    /// The first mistake of `text`.
    fn err(text: &str) -> ConfigError {
        Config::parse(Path::new("f.toml"), text)
            .unwrap_err()
            .first()
            .clone()
    }

    const HELPER: &str = "[[helper]]\nname = \"a\"\ncommand = [\"x\"]\n";

    fn ok(text: &str) -> Config {
        Config::parse(Path::new("f.toml"), text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    /// The error of `HELPER` followed by `extra`.
    fn helper_err(extra: &str) -> ConfigError {
        err(&format!("{HELPER}{extra}"))
    }

    /// `supervisor.rescan`: off by default, a duration of the one grammar, a bad one named.
    #[test]
    fn rescan_is_off_by_default_and_a_duration() {
        assert_eq!(ok(HELPER).supervisor.rescan, None);
        let c = ok(&format!("[supervisor]\nrescan = \"1.5s\"\n{HELPER}"));
        assert_eq!(
            c.supervisor.rescan,
            Some(PositiveDuration(Duration::from_millis(1500)))
        );
        for bad in ["\"0s\"", "\"often\"", "1"] {
            let e = err(&format!("[supervisor]\nrescan = {bad}\n{HELPER}"));
            assert_eq!(e.key.as_deref(), Some("supervisor.rescan"), "{bad}: {e}");
            assert_eq!(e.line, Some(2), "{bad}: {e}");
        }
    }

    #[test]
    fn backoff_limit_is_a_count_or_unlimited_said_in_words() {
        let c = ok(&format!("{HELPER}backoff = {{ limit = \"unlimited\" }}\n"));
        assert_eq!(c.helpers[0].backoff.limit, Backoff::UNLIMITED);
        assert_eq!(
            ok(&format!("{HELPER}backoff = {{ limit = 0 }}\n")).helpers[0]
                .backoff
                .limit,
            0
        );
        for bad in ["-1", "4294967295", "\"forever\"", "1.5"] {
            let e = helper_err(&format!("backoff = {{ limit = {bad} }}\n"));
            assert_eq!(
                e.key.as_deref(),
                Some("helper[1].backoff.limit"),
                "{bad}: {e}"
            );
            assert!(e.message.contains("a whole number from 0"), "{bad}: {e}");
            assert!(e.message.contains("or \"unlimited\""), "{bad}: {e}");
            assert!(!e.message.contains("u32"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_command_is_a_list_a_program_or_a_shell_line() {
        let c = ok("[[helper]]\nname = \"a\"\ncommand = { shell = \"echo $HOME | tr a b\" }\n");
        assert_eq!(
            c.helpers[0].command.0,
            ["/bin/sh", "-c", "echo $HOME | tr a b"]
        );
        let e = err("[[helper]]\nname = \"a\"\ncommand = \"python3 -m http.server\"\n");
        assert_eq!(e.key.as_deref(), Some("helper[1].command"), "{e}");
        assert_eq!((e.line, e.column), (Some(3), Some(11)), "{e}");
        assert!(
            e.message.contains(
                "write a list, command = [\"python3\", \"-m\", \"http.server\"], or use the \
                 shell, command = { shell = \"python3 -m http.server\" } (run by /bin/sh -c)"
            ),
            "{e}"
        );
        for bad in [
            "{ shell = \"\" }",
            "{ shell = \"x\", y = 1 }",
            "{ sh = \"x\" }",
        ] {
            let e = err(&format!("[[helper]]\nname = \"a\"\ncommand = {bad}\n"));
            assert_eq!(e.key.as_deref(), Some("helper[1].command"), "{bad}: {e}");
        }
    }

    #[test]
    fn autostart_is_true_unless_said_false() {
        assert!(ok(HELPER).helpers[0].autostart);
        assert!(!ok(&format!("{HELPER}autostart = false\n")).helpers[0].autostart);
        let e = helper_err("autostart = \"no\"\n");
        assert_eq!(e.key.as_deref(), Some("helper[1].autostart"), "{e}");
        assert_eq!(e.line, Some(4), "{e}");
    }

    #[test]
    fn helpers_compare_by_definition_not_by_place() {
        let one = ok("[[helper]]\nname = \"a\"\ncommand = [\"sleep\", \"1\"]\n");
        let moved = ok("\n\n[[helper]]\nname = \"a\"\ncommand = [\"sleep\", \"1\"]\n");
        assert_eq!(
            one.helpers[0], moved.helpers[0],
            "the same definition elsewhere"
        );
        for other in [
            "command = [\"sleep\", \"2\"]",
            "command = [\"sleep\", \"1\"]\nstop_grace = \"1s\"",
            "command = [\"sleep\", \"1\"]\nenv = { X = \"1\" }",
            "command = [\"sleep\", \"1\"]\noutput = \"null\"",
        ] {
            let c = ok(&format!("[[helper]]\nname = \"a\"\n{other}\n"));
            assert_ne!(one.helpers[0], c.helpers[0], "{other}");
        }
    }

    #[test]
    fn kill_and_reaction_agree_or_the_error_names_helper_generation_and_field() {
        // KILL alone: reaction kill, as in the policy's text form and `foster exec --signal`.
        let c = ok(&format!(
            "{HELPER}[[helper.generation]]\nsignal = \"KILL\"\n"
        ));
        assert_eq!(c.helpers[0].generation(1).reaction(), Reaction::Kill);
        assert_eq!(c.helpers[0].policy_chain().to_string(), "SIGKILL:kill:5s");
        let c = ok(&format!(
            "{HELPER}[[helper.generation]]\nreaction = \"kill\"\n"
        ));
        assert_eq!(c.helpers[0].generation(1).signal(), libc::SIGKILL);

        for reaction in ["exit", "notify"] {
            let e = helper_err(&format!(
                "[[helper.generation]]\nsignal = \"TERM\"\n\
                 [[helper.generation]]\nsignal = \"KILL\"\nreaction = \"{reaction}\"\n"
            ));
            assert_eq!(
                e.key.as_deref(),
                Some("helper[1].generation[2].reaction"),
                "{e}"
            );
            assert_eq!((e.line, e.column), (Some(8), Some(12)), "{e}");
            assert_eq!(e.helper.as_deref(), Some("a"), "{e}");
            assert!(
                e.to_string().contains(&format!(
                    "f.toml:8:12: helper \"a\": key `helper[1].generation[2].reaction`: \
                     SIGKILL cannot be handled, so reaction {reaction} cannot run"
                )),
                "{e}"
            );
            assert!(e.message.contains("SIGKILL cannot be handled"), "{e}");
            assert!(
                e.message
                    .contains(&format!("reaction {reaction} cannot run")),
                "{e}"
            );
        }
        let e = helper_err("[[helper.generation]]\nsignal = \"TERM\"\nreaction = \"kill\"\n");
        assert_eq!(
            e.key.as_deref(),
            Some("helper[1].generation[1].signal"),
            "{e}"
        );
        assert_eq!(e.line, Some(5), "{e}");
        assert!(
            e.message.contains("reaction kill is delivered as SIGKILL"),
            "{e}"
        );

        // The inline form and the orphan policy get the same checks.
        let e = helper_err("generation = [{ signal = \"KILL\", reaction = \"exit\" }]\n");
        assert_eq!(
            e.key.as_deref(),
            Some("helper[1].generation[1].reaction"),
            "{e}"
        );
        assert_eq!(e.line, Some(4), "{e}");
        let e = err(&format!(
            "[supervisor]\norphan_policy = {{ signal = \"KILL\", reaction = \"notify\" }}\n{HELPER}"
        ));
        assert_eq!(
            e.key.as_deref(),
            Some("supervisor.orphan_policy.reaction"),
            "{e}"
        );
        assert!(e.message.contains("SIGKILL cannot be handled"), "{e}");
        let c = ok(&format!(
            "[supervisor]\norphan_policy = {{ signal = \"KILL\" }}\n{HELPER}"
        ));
        assert_eq!(c.supervisor.orphan_policy.signal(), libc::SIGKILL);
    }

    #[test]
    fn parent_death_and_orphan_signals_must_end_a_process() {
        for sig in [
            "STOP", "TSTP", "TTIN", "TTOU", "CHLD", "CONT", "URG", "WINCH", "20",
        ] {
            let e = helper_err(&format!("[[helper.generation]]\nsignal = \"{sig}\"\n"));
            assert_eq!(
                e.key.as_deref(),
                Some("helper[1].generation[1].signal"),
                "{e}"
            );
            assert!(
                e.message
                    .contains("cannot be a parent-death or orphan signal"),
                "{sig}: {e}"
            );
            let e = err(&format!(
                "[supervisor]\norphan_policy = {{ signal = \"{sig}\" }}\n{HELPER}"
            ));
            assert_eq!(
                e.key.as_deref(),
                Some("supervisor.orphan_policy.signal"),
                "{e}"
            );
            assert!(e.message.contains("cannot be a parent-death"), "{sig}: {e}");
        }
        assert!(
            helper_err("generation = [{ signal = \"CHLD\" }]\n")
                .message
                .contains("ignored")
        );
        assert!(
            helper_err("generation = [{ signal = \"STOP\" }]\n")
                .message
                .contains("stops")
        );
        for sig in [
            "KILL", "TERM", "HUP", "INT", "QUIT", "USR1", "USR2", "RTMIN+3", "RTMAX",
        ] {
            ok(&format!(
                "{HELPER}generation = [{{ signal = \"{sig}\" }}]\n"
            ));
        }
        // A stop signal may be one a helper handles, but not one that stops it.
        for sig in ["STOP", "TSTP", "TTIN", "TTOU"] {
            let e = helper_err(&format!("stop_signal = \"{sig}\"\n"));
            assert_eq!(e.key.as_deref(), Some("helper[1].stop_signal"), "{e}");
            assert!(e.message.contains("stops the helper"), "{e}");
        }
        ok(&format!("{HELPER}stop_signal = \"WINCH\"\n"));
        // Out-of-range real-time forms are errors, not an overflow or another signal.
        for sig in [
            "RTMIN+2147483647",
            "RTMIN+-5",
            "RTMIN+99",
            "RTMAX-99",
            "2147483648",
        ] {
            let e = helper_err(&format!("stop_signal = \"{sig}\"\n"));
            assert!(
                e.message.contains(&format!("signal {sig:?}: "))
                    && (e
                        .message
                        .contains("expected RTMIN+N or RTMAX-N with N from 0 to")
                        || e.message.contains("not a signal number (1 to")),
                "{sig}: {e}"
            );
        }
        let e = helper_err("stop_signal = 9223372036854775807\n");
        assert!(e.message.contains("not a signal number"), "{e}");
    }

    #[test]
    fn durations_are_at_least_one_millisecond() {
        for text in ["0.0000000001s", "0.5ms", "0.0009s", "0.000001m"] {
            let e = helper_err(&format!("stop_grace = \"{text}\"\n"));
            assert!(e.message.contains("shorter than 1ms"), "{text}: {e}");
            assert_eq!(e.key.as_deref(), Some("helper[1].stop_grace"), "{e}");
        }
        for text in ["1ms", "0.001s", "1.0ms"] {
            let c = ok(&format!("{HELPER}stop_grace = \"{text}\"\n"));
            assert_eq!(c.helpers[0].stop_grace.0, MIN_DURATION, "{text}");
        }
        let e = helper_err("[[helper.generation]]\ngrace = \"0.1ms\"\n");
        assert!(e.message.contains("shorter than 1ms"), "{e}");
        for text in ["nan", "inf", "-inf"] {
            let e = helper_err(&format!("stop_grace = {text}\n"));
            assert!(e.message.contains("is not a duration"), "{text}: {e}");
        }
    }

    #[test]
    fn environment_names_and_values_must_reach_the_environment_intact() {
        for (env, why) in [
            ("{ \"A=B\" = \"x\" }", "name \"A=B\" contains '='"),
            ("{ \"\" = \"y\" }", "name \"\" is empty"),
            ("{ \"=\" = \"y\" }", "contains '='"),
            ("{ \"A\\u0000\" = \"x\" }", "contains a NUL byte"),
            (
                "{ A = \"x\\u0000y\" }",
                "value of the environment variable \"A\"",
            ),
        ] {
            let e = helper_err(&format!("env = {env}\n"));
            assert!(e.message.contains(why), "{env}: {e}");
            assert_eq!(e.key.as_deref(), Some("helper[1].env"), "{e}");
        }
        let c = ok(&format!(
            "{HELPER}env = {{ A_1 = \"x=y\", \"lower.dot\" = \"\" }}\n"
        ));
        assert_eq!(c.helpers[0].env["A_1"], "x=y");
    }

    #[test]
    fn user_and_group_are_names_or_numbers() {
        for (value, want) in [
            ("0", "0"),
            ("\"0\"", "0"),
            ("65534", "65534"),
            ("\"007\"", "7"),
            ("4294967294", "4294967294"),
            ("\"nobody\"", "nobody"),
            ("\"_apt\"", "_apt"),
        ] {
            let c = ok(&format!("{HELPER}user = {value}\ngroup = {value}\n"));
            assert_eq!(c.helpers[0].user.as_deref(), Some(want), "{value}");
            assert_eq!(c.helpers[0].group.as_deref(), Some(want), "{value}");
        }
        for (value, why) in [
            ("-1", "is negative"),
            ("\"-1\"", "is negative"),
            ("4294967295", "(uid_t)-1"),
            ("\"4294967295\"", "\"no change\""),
            ("4294967296", "out of range"),
            ("\"99999999999999999999999\"", "out of range"),
            ("\"+0\"", "without a sign"),
            ("\"\"", "is empty"),
            ("\" 0\"", "white space"),
            ("\"a:b\"", "contains ':'"),
            ("\"a\\u0000\"", "control character"),
            ("1.5", "expected a user name or number"),
            ("true", "expected a user name or number"),
        ] {
            let e = helper_err(&format!("user = {value}\n"));
            assert!(e.message.contains(why), "{value}: {e}");
            assert_eq!(e.key.as_deref(), Some("helper[1].user"), "{e}");
        }
        let e = helper_err("group = 4294967295\n");
        assert!(e.message.contains("(gid_t)-1"), "{e}");
        assert_eq!(e.key.as_deref(), Some("helper[1].group"), "{e}");
    }

    #[test]
    fn output_is_capture_inherit_or_null() {
        use crate::supervision::output::Mode;
        assert_eq!(ok(HELPER).helpers[0].output, Mode::Capture);
        for (text, mode) in [
            ("capture", Mode::Capture),
            ("inherit", Mode::Inherit),
            ("null", Mode::Null),
        ] {
            let c = ok(&format!("{HELPER}output = \"{text}\"\n"));
            assert_eq!(c.helpers[0].output, mode);
        }
        let e = helper_err("output = \"file\"\n");
        assert_eq!(e.key.as_deref(), Some("helper[1].output"), "{e}");
        assert!(e.message.contains("`capture`, `inherit`, `null`"), "{e}");
    }

    #[test]
    fn a_ring_is_bounded_in_lines_and_bytes() {
        let c = ok(HELPER);
        assert_eq!(
            c.helpers[0].ring.bounds(),
            crate::supervision::output::ring::Bounds::default()
        );
        let c = ok(&format!(
            "{HELPER}ring = {{ lines = 5, bytes = \"64KiB\" }}\n"
        ));
        assert_eq!(
            (c.helpers[0].ring.lines, c.helpers[0].ring.bytes),
            (5, 65536)
        );
        let c = ok(&format!("{HELPER}ring = {{ lines = 0 }}\n"));
        assert_eq!(
            (c.helpers[0].ring.lines, c.helpers[0].ring.bytes),
            (0, 1 << 20)
        );
        for (ring, key, why) in [
            (
                "{ lines = 1000001 }",
                "helper[1].ring.lines",
                "from 0 to 1000000",
            ),
            (
                "{ lines = -1 }",
                "helper[1].ring.lines",
                "from 0 to 1000000",
            ),
            (
                "{ lines = \"many\" }",
                "helper[1].ring.lines",
                "from 0 to 1000000",
            ),
            (
                "{ bytes = \"1GiB\" }",
                "helper[1].ring.bytes",
                "at most 268435456 bytes",
            ),
            ("{ bytes = -5 }", "helper[1].ring.bytes", "negative size"),
            (
                "{ size = 3 }",
                "helper[1].ring.size",
                "unknown field `size`",
            ),
        ] {
            let e = helper_err(&format!("ring = {ring}\n"));
            assert_eq!(e.key.as_deref(), Some(key), "{ring}: {e}");
            assert!(e.message.contains(why), "{ring}: {e}");
        }
    }

    #[test]
    fn a_log_is_a_file_a_size_and_a_count() {
        let c = ok(&format!("{HELPER}log = {{ file = \"a.log\" }}\n"));
        let log = c.helpers[0].log.as_ref().unwrap();
        assert_eq!(log.file, Path::new("a.log"));
        assert_eq!(log.rotation(), crate::base::logfile::Rotation::default());
        let c = ok(&format!(
            "{HELPER}log = {{ file = \"/l/a.log\", max_size = \"10MB\", keep = 0 }}\n"
        ));
        let log = c.helpers[0].log.as_ref().unwrap();
        assert_eq!((log.max_size, log.keep), (10_000_000, 0));
        let c = ok(&format!(
            "{HELPER}log = {{ file = \"a\", max_size = 4096 }}\n"
        ));
        assert_eq!(c.helpers[0].log.as_ref().unwrap().max_size, 4096);
        for (log, key, why) in [
            ("{ file = \"\" }", "helper[1].log.file", "path is empty"),
            (
                "{ file = \"a\", max_size = \"10 parsecs\" }",
                "helper[1].log.max_size",
                "unknown unit",
            ),
            (
                "{ file = \"a\", max_size = -1 }",
                "helper[1].log.max_size",
                "negative size",
            ),
            (
                "{ file = \"a\", keep = 1001 }",
                "helper[1].log.keep",
                "from 0 to 1000",
            ),
            (
                "{ file = \"a\", keep = -1 }",
                "helper[1].log.keep",
                "from 0 to 1000",
            ),
            (
                "{ file = \"a\", rotate = 3 }",
                "helper[1].log.rotate",
                "unknown field `rotate`",
            ),
            (
                "{ max_size = \"1M\" }",
                "helper[1].log.file",
                "missing field `file`",
            ),
        ] {
            let e = helper_err(&format!("log = {log}\n"));
            assert_eq!(e.key.as_deref(), Some(key), "{log}: {e}");
            assert!(e.message.contains(why), "{log}: {e}");
        }
        let e = helper_err("output = \"inherit\"\nlog = { file = \"a\" }\n");
        assert_eq!(e.key.as_deref(), Some("helper[1].log"), "{e}");
        assert!(e.message.contains("output is \"inherit\""), "{e}");
        let e = err(&format!(
            "{HELPER}log = {{ file = \"same\" }}\n[[helper]]\nname = \"b\"\ncommand = [\"x\"]\n\
             log = {{ file = \"same\" }}\n"
        ));
        assert_eq!(e.key.as_deref(), Some("helper[2].log.file"), "{e}");
        assert!(e.message.contains("helper[1]'s log file already"), "{e}");
    }

    #[test]
    fn cwd_is_a_usable_path() {
        let e = helper_err("cwd = \"\"\n");
        assert!(e.message.contains("working directory is empty"), "{e}");
        let e = helper_err("cwd = \"/a\\u0000b\"\n");
        assert!(e.message.contains("NUL"), "{e}");
    }

    #[test]
    fn a_chain_has_at_most_max_generations() {
        let gens = |n: usize| "[[helper.generation]]\n".repeat(n);
        let c = ok(&format!("{HELPER}{}", gens(MAX_GENERATIONS)));
        assert_eq!(c.helpers[0].policy_chain().depth(), MAX_GENERATIONS);
        let e = helper_err(&gens(MAX_GENERATIONS + 1));
        assert!(e.message.contains("at most 32"), "{e}");
        assert_eq!(e.key.as_deref(), Some("helper[1].generation"), "{e}");
    }

    #[test]
    fn reading_is_bounded_and_wants_utf8() {
        let e = Config::read(Path::new("-"), std::io::repeat(b'#'))
            .unwrap_err()
            .first()
            .clone();
        assert!(e.message.contains("larger than 16 MiB"), "{e}");
        let fits = format!("{HELPER}{}", "#".repeat(1000));
        assert!(Config::read(Path::new("-"), fits.as_bytes()).is_ok());
        let mut bytes = HELPER.as_bytes().to_vec();
        bytes.extend_from_slice(b"# caf\xc3\xa9 \xff\n");
        let e = Config::read(Path::new("-"), &bytes[..])
            .unwrap_err()
            .first()
            .clone();
        assert!(e.message.contains("not UTF-8"), "{e}");
        assert!(e.message.contains("0xff"), "{e}");
        assert_eq!((e.line, e.column), (Some(4), Some(8)), "{e}");
    }

    #[test]
    fn errors_are_escaped_and_positions_never_split_a_character() {
        let e = helper_err("\"\\u001b]0;owned\\u0007\" = 1\n");
        let shown = e.to_string();
        assert!(
            !shown.contains('\x1b') && !shown.contains('\x07'),
            "{shown:?}"
        );
        assert!(shown.contains("\\e]0;owned"), "{shown:?}");
        let text = "é\n[[helper]]\nnamé = 1\n";
        for offset in 0..=text.len() + 2 {
            let _ = line_col(text, offset);
            let _ = key_at(text, offset);
            let _ = table_at(text, offset);
        }
        assert_eq!(line_col("é", 1), Some((1, 1)));
    }

    #[test]
    fn durations_and_signals() {
        assert_eq!(
            PositiveDuration::parse("250ms").unwrap().0,
            Duration::from_millis(250)
        );
        assert_eq!(
            PositiveDuration::parse("1.5s").unwrap().0,
            Duration::from_millis(1500)
        );
        assert_eq!(
            PositiveDuration::parse("2m").unwrap().0,
            Duration::from_secs(120)
        );
        let e = |text: &str| PositiveDuration::parse(text).unwrap_err().to_string();
        assert!(e("0s").contains("zero"));
        assert!(e("-1s").contains("negative"));
        assert_eq!(
            PositiveDuration::parse("5").unwrap().0,
            Duration::from_secs(5)
        );
        assert!(e("5 weeks").contains("unknown unit"));
    }

    #[test]
    fn a_full_config_parses() {
        let c = Config::parse(
            Path::new("f.toml"),
            r#"
[supervisor]
orphan_policy = { signal = "HUP", grace = "2s" }

[[helper]]
name = "a"
command = ["/bin/sleep", "60"]
env = { X = "1" }
restart = "on-failure"
backoff = { initial = "100ms", max = "1s", limit = 3 }
stop_signal = "INT"
stop_grace = "3s"

[[helper.generation]]
signal = "TERM"
grace = "1s"

[[helper.generation]]
signal = "KILL"
reaction = "kill"
grace = "500ms"

[[helper]]
name = "b"
command = "/bin/true"
"#,
        )
        .unwrap();
        assert_eq!(c.helpers.len(), 2);
        let a = &c.helpers[0];
        assert_eq!(a.command.program(), "/bin/sleep");
        assert_eq!(a.restart, RestartMode::OnFailure);
        assert_eq!(a.backoff.limit, 3);
        assert_eq!(a.stop_signal, Sig::INT);
        assert_eq!(a.generation(1).signal(), libc::SIGTERM);
        assert_eq!(a.generation(2).reaction(), Reaction::Kill);
        assert_eq!(a.generation(7).reaction(), Reaction::Kill);
        assert_eq!(c.helpers[1].generation(1), GenerationPolicy::default());
        assert_eq!(c.supervisor.orphan_policy.signal(), libc::SIGHUP);
    }

    #[test]
    fn every_mistake_of_a_file_is_reported_at_once_in_its_order() {
        let text = "[[helper]]\nname = \"web\"\ncommand = [\"x\"]\nstop_grace = \"0s\"\n\
                    restart = \"often\"\nbackoff = { initial = \"1h\", max = \"0ms\" }\n\
                    [[helper]]\nname = \"web\"\ncommand = []\nuser = -1\ncolour = 1\n\
                    [[helper.generation]]\nsignal = \"KILL\"\nreaction = \"exit\"\n\
                    [[helper]]\ncommand = 5\n";
        let all = Config::parse(Path::new("f.toml"), text).unwrap_err();
        let got: Vec<(Option<usize>, Option<&str>, Option<&str>)> = all
            .iter()
            .map(|e| (e.line, e.helper.as_deref(), e.key.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                (Some(4), Some("web"), Some("helper[1].stop_grace")),
                (Some(5), Some("web"), Some("helper[1].restart")),
                (Some(6), Some("web"), Some("helper[1].backoff.max")),
                (Some(8), Some("web"), Some("helper[2].name")),
                (Some(9), Some("web"), Some("helper[2].command")),
                (Some(10), Some("web"), Some("helper[2].user")),
                (Some(11), Some("web"), Some("helper[2].colour")),
                (
                    Some(14),
                    Some("web"),
                    Some("helper[2].generation[1].reaction")
                ),
                (Some(15), None, Some("helper[3].name")),
                (Some(16), None, Some("helper[3].command")),
            ],
            "{all}"
        );
        let shown = all.to_string();
        assert_eq!(shown.lines().count(), 10, "{shown}");
        assert!(
            shown.starts_with("f.toml:4:14: helper \"web\": key `helper[1].stop_grace`: zero"),
            "{shown}"
        );
        // A field taken out for its own mistake is not checked again against the others: the
        // zero max is one mistake, not also "shorter than the initial delay".
        assert!(!shown.contains("shorter than backoff.initial"), "{shown}");
        assert!(
            shown.contains("duplicate helper name \"web\": helper[1] has it"),
            "{shown}"
        );
        // A helper whose name is missing is not a duplicate of another without one.
        let e = Config::parse(
            Path::new("f.toml"),
            "[[helper]]\ncommand = \"x\"\n[[helper]]\ncommand = \"y\"\n",
        )
        .unwrap_err();
        assert_eq!(e.len(), 2, "{e}");
        assert!(e.iter().all(|e| e.message == "missing field `name`"), "{e}");
    }

    #[test]
    fn helpers_that_are_not_tables_are_one_mistake_each() {
        let e = Config::parse(Path::new("f.toml"), "helper = 5\n").unwrap_err();
        assert_eq!(e.len(), 1, "not also \"no helper declared\": {e}");
        assert_eq!(e.first().key.as_deref(), Some("helper"), "{e}");
        assert!(e.first().message.contains("expected a sequence"), "{e}");
        let e = Config::parse(
            Path::new("f.toml"),
            "helper = [1, { name = \"a\", command = \"x\", stop_grace = \"0s\" }, \"b\"]\n",
        )
        .unwrap_err();
        let keys: Vec<_> = e.iter().map(|e| e.key.as_deref().unwrap_or("")).collect();
        assert_eq!(
            keys,
            ["helper[1]", "helper[2].stop_grace", "helper[3]"],
            "{e}"
        );
        assert!(e.first().message.contains("expected struct Helper"), "{e}");
        assert_eq!(e.iter().nth(1).unwrap().helper.as_deref(), Some("a"), "{e}");
    }

    #[test]
    fn cross_field_checks_run_when_their_fields_were_read() {
        let e = helper_err("backoff = { initial = \"2s\", max = \"1s\" }\n");
        assert_eq!(e.key.as_deref(), Some("helper[1].backoff.max"), "{e}");
        assert_eq!((e.line, e.column), (Some(4), Some(35)), "{e}");
        assert!(
            e.message
                .contains("backoff.max (1s) is shorter than backoff.initial (2s)"),
            "{e}"
        );
        let e = Config::parse(
            Path::new("f.toml"),
            &format!("{HELPER}backoff = {{ initial = \"2x\", max = \"500ms\" }}\n"),
        )
        .unwrap_err();
        // Not also "max shorter than initial": the default initial (1s) stands in for the one
        // written wrong, and is not compared.
        assert_eq!(e.len(), 1, "{e}");
        assert_eq!(
            e.first().key.as_deref(),
            Some("helper[1].backoff.initial"),
            "{e}"
        );
    }

    #[test]
    fn a_file_of_many_mistakes_stops_at_the_bound_and_says_so() {
        let one = "[[helper]]\nname = \"h\"\ncommand = [\"x\"]\nstop_grace = \"0s\"\n";
        let text: String = (0..MAX_MISTAKES + 20)
            .map(|i| one.replace("\"h\"", &format!("\"h{i}\"")))
            .collect();
        let e = Config::parse(Path::new("f.toml"), &text).unwrap_err();
        assert_eq!(e.len(), MAX_MISTAKES);
        assert!(e.more());
        let lines = e.lines();
        assert_eq!(lines.len(), MAX_MISTAKES + 1);
        assert_eq!(
            lines.last().unwrap(),
            "f.toml: more mistakes may follow: the first 100 are shown"
        );
        // The checks across fields are bounded too: 119 duplicates of one name.
        let one = "[[helper]]\nname = \"h\"\ncommand = [\"x\"]\n";
        let e = Config::parse(Path::new("f.toml"), &one.repeat(MAX_MISTAKES + 20)).unwrap_err();
        assert_eq!((e.len(), e.more()), (MAX_MISTAKES, true));
        assert_eq!(e.first().key.as_deref(), Some("helper[2].name"));
    }

    #[test]
    fn each_mistake_has_its_own_message() {
        let all = Config::parse(
            Path::new("f.toml"),
            "[[helper]]\nname = \"a\"\ncomand = [\"x\"]\n",
        )
        .unwrap_err();
        assert_eq!(all.len(), 2, "{all}");
        // In the order of the file: the table that lacks its command, then the misspelt key.
        let e = all.first();
        assert_eq!((e.line, e.column), (Some(1), Some(1)), "{e}");
        assert!(e.message.contains("missing field `command`"), "{e}");
        assert_eq!(e.key.as_deref(), Some("helper[1].command"), "{e}");
        let e = all.iter().nth(1).unwrap();
        assert_eq!(e.line, Some(3));
        assert!(e.message.contains("unknown field `comand`"), "{e}");
        assert_eq!(e.key.as_deref(), Some("helper[1].comand"), "{e}");

        let e = err("[[helper]]\nname = \"a\"\ncommand = []\n");
        assert!(e.message.contains("command is empty"), "{e}");
        assert_eq!(e.key.as_deref(), Some("helper[1].command"));

        let e = err(
            "[[helper]]\nname = \"a\"\ncommand = [\"x\"]\n[[helper]]\nname = \"a\"\ncommand = [\"y\"]\n",
        );
        assert!(e.message.contains("duplicate helper name \"a\""), "{e}");
        assert_eq!(e.line, Some(5));
        assert_eq!(e.key.as_deref(), Some("helper[2].name"));

        let e = err("[[helper]]\nname = \"a\"\ncommand = [\"x\"]\nstop_signal = \"TREM\"\n");
        assert!(e.message.contains("unknown signal \"TREM\""), "{e}");
        assert_eq!(e.line, Some(4));

        let e = err("[[helper]]\nname = \"a\"\ncommand = [\"x\"]\nstop_grace = \"0s\"\n");
        assert!(e.message.contains("zero duration"), "{e}");
        let e = err("[[helper]]\nname = \"a\"\ncommand = [\"x\"]\nstop_grace = \"-2s\"\n");
        assert!(e.message.contains("negative duration"), "{e}");
        let e = err("[[helper]]\nname = \"a\"\ncommand = [\"x\"]\nstop_grace = -2\n");
        assert!(e.message.contains("negative duration"), "{e}");

        let e = err(
            "[[helper]]\nname = \"a\"\ncommand = [\"x\"]\nbackoff = { initial = \"1s\", max = \"0ms\" }\n",
        );
        assert!(e.message.contains("zero duration"), "{e}");
        assert_eq!(e.key.as_deref(), Some("helper[1].backoff.max"), "{e}");

        let e = err("[[helper]]\nname = \"a\"\ncommand = [\"x\"]\nrestart = \"sometimes\"\n");
        assert!(e.message.contains("sometimes"), "{e}");
        assert!(e.message.contains("on-failure"), "{e}");

        let e = err("[[helper]]\ncommand = [\"x\"]\n");
        assert!(e.message.contains("missing field `name`"), "{e}");

        let e = err("");
        assert!(e.message.contains("no helper declared"), "{e}");

        let e = err(
            "[[helper]]\nname = \"a\"\ncommand = [\"x\"]\n[[helper.generation]]\nsignal = \"TERM\"\n[[helper.generation]]\ngrace = \"0s\"\n",
        );
        assert_eq!(
            e.key.as_deref(),
            Some("helper[1].generation[2].grace"),
            "{e}"
        );

        let e = err("[[helper]]\nname = \"a\"\ncommand = [\"x\"\n");
        assert!(e.line.is_some(), "{e}");
        let shown = e.to_string();
        assert!(shown.starts_with("f.toml:"), "{shown}");
    }
}
