//! Durations as people write them: the one grammar of every grace, delay and interval.
//!
//! Owns [`parse`] and [`Text`] (the one way a duration is written back). A duration is a decimal
//! number, a fraction allowed, then a unit: `ms`, `s` (`sec`), `m` (`min`) or `h`; a number
//! alone is seconds. `250ms`, `5s`, `1.5s`, `2m`, `1h`, `5`. It is read exactly (to the
//! nanosecond, no floating point) and must be from [`MIN`] (1 ms: a shorter grace or delay would
//! be no time at all) to [`MAX`]. The same text is accepted by the configuration, the policy text
//! (`FOSTER_POLICY`), `foster exec --grace`, `foster init --grace`, `foster top --interval`;
//! a caller with a narrower range (the dashboard's interval) checks it after.
//!
//! Humantime was considered: it reads no fractions (`1.5s`), which the configuration already
//! accepted, and writes `1s 500ms`, which the policy text cannot carry; one function of our own
//! is smaller than the adapter.

use std::fmt;
use std::time::Duration;

/// The shortest duration foster accepts: 1 ms.
pub const MIN: Duration = Duration::from_millis(1);

/// The longest duration foster accepts: 10⁹ seconds (about 31 years; far beyond any grace, and
/// still a deadline `Instant` can hold).
pub const MAX: Duration = Duration::from_secs(1_000_000_000);

/// The forms, for error messages.
const EXPECTED: &str =
    "expected a positive duration: \"250ms\", \"5s\", \"1.5s\", \"2m\", \"1h\", or seconds alone";

/// A duration that could not be read; the text says what was wrong and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("duration {0:?} has no number: {EXPECTED}")]
    NoNumber(String),
    #[error("duration {0:?} has an unknown unit {1:?}: {EXPECTED}")]
    UnknownUnit(String, String),
    #[error("negative duration {0:?}: {EXPECTED}")]
    Negative(String),
    #[error("zero duration {0:?}: {EXPECTED}")]
    Zero(String),
    #[error("duration {0:?} is shorter than 1ms, the shortest foster accepts: {EXPECTED}")]
    TooShort(String),
    #[error("duration {0:?} is too long (at most {max}): {EXPECTED}", max = Text(MAX))]
    TooLong(String),
}

/// Reads a duration (the grammar of the module docs), from [`MIN`] to [`MAX`].
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    let shown = || shown(text);
    let t = text.trim();
    if t.starts_with('-') {
        return Err(DurationError::Negative(shown()));
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit_ns: u128 = match unit.trim() {
        "ms" => 1_000_000,
        "" | "s" | "sec" => 1_000_000_000,
        "m" | "min" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        u => return Err(DurationError::UnknownUnit(shown(), self::shown(u))),
    };
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (int.is_empty() && frac.is_empty()) || !digits(int) || !digits(frac) {
        return Err(DurationError::NoNumber(shown()));
    }
    if int.bytes().chain(frac.bytes()).all(|b| b == b'0') {
        return Err(DurationError::Zero(shown()));
    }
    // Fifteen digits of a fraction reach below a nanosecond even for hours; more are dropped.
    let frac = &frac[..frac.len().min(15)];
    let int: u128 = if int.is_empty() {
        0
    } else if int.len() > 20 {
        return Err(DurationError::TooLong(shown()));
    } else {
        int.parse().map_err(|_| DurationError::TooLong(shown()))?
    };
    let frac_ns = if frac.is_empty() {
        0
    } else {
        let f: u128 = frac.parse().map_err(|_| DurationError::NoNumber(shown()))?;
        f * unit_ns / 10u128.pow(frac.len() as u32)
    };
    let ns = int
        .checked_mul(unit_ns)
        .and_then(|n| n.checked_add(frac_ns))
        .ok_or_else(|| DurationError::TooLong(shown()))?;
    if ns < MIN.as_nanos() {
        return Err(DurationError::TooShort(shown()));
    }
    if ns > MAX.as_nanos() {
        return Err(DurationError::TooLong(shown()));
    }
    Ok(Duration::new(
        (ns / 1_000_000_000) as u64,
        (ns % 1_000_000_000) as u32,
    ))
}

/// `text` as an error quotes it: at most 32 characters.
fn shown(text: &str) -> String {
    match text.char_indices().nth(32) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// A duration written the one way foster writes them, which [`parse`] reads back exactly:
/// `5s`, `1.5s`, `250ms`, `0.5ms` (whole seconds, else seconds with a fraction from 1 s up, else
/// milliseconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Text(pub Duration);

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        let (secs, nanos) = (d.as_secs(), d.subsec_nanos());
        if nanos == 0 {
            return write!(f, "{secs}s");
        }
        // The fraction without its trailing zeros.
        let fraction = |whole: u128, part: u32, width: usize, unit: &str| {
            let digits = format!("{part:0width$}");
            format!("{whole}.{}{unit}", digits.trim_end_matches('0'))
        };
        if secs > 0 {
            f.write_str(&fraction(secs.into(), nanos, 9, "s"))
        } else if nanos % 1_000_000 == 0 {
            write!(f, "{}ms", nanos / 1_000_000)
        } else {
            f.write_str(&fraction(
                (nanos / 1_000_000).into(),
                nanos % 1_000_000,
                6,
                "ms",
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn every_form_reads() {
        for (text, want) in [
            ("250ms", Duration::from_millis(250)),
            ("5s", Duration::from_secs(5)),
            ("1.5s", Duration::from_millis(1500)),
            (" 1.5s ", Duration::from_millis(1500)),
            ("2m", Duration::from_secs(120)),
            ("2min", Duration::from_secs(120)),
            ("1h", Duration::from_secs(3600)),
            ("5", Duration::from_secs(5)),
            ("0.25", Duration::from_millis(250)),
            (".5s", Duration::from_millis(500)),
            ("1.", Duration::from_secs(1)),
            ("1ms", MIN),
            ("0.1s", Duration::from_millis(100)),
            ("1.000000001s", Duration::new(1, 1)),
            ("1000000000s", MAX),
        ] {
            assert_eq!(parse(text), Ok(want), "{text:?}");
        }
    }

    #[test]
    fn errors_name_what_is_wrong() {
        for (text, why) in [
            ("", "has no number"),
            ("s", "has no number"),
            (".", "has no number"),
            ("1.2.3s", "has no number"),
            ("-1s", "negative duration"),
            ("0s", "zero duration"),
            ("0", "zero duration"),
            ("0.0ms", "zero duration"),
            ("0.5ms", "shorter than 1ms"),
            ("0.0000000001s", "shorter than 1ms"),
            ("5 weeks", "unknown unit \"weeks\""),
            ("5h30m", "unknown unit"),
            ("1000000001s", "too long"),
            ("99999999999999999999999999h", "too long"),
            ("1e9s", "unknown unit"),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(why), "{text:?} gave {e:?}, wanted {why:?}");
        }
    }

    #[test]
    fn written_one_way() {
        for (d, text) in [
            (Duration::from_secs(5), "5s"),
            (Duration::from_secs(120), "120s"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_millis(250), "250ms"),
            (Duration::from_micros(1500), "1.5ms"),
            (Duration::new(1, 1), "1.000000001s"),
            (Duration::ZERO, "0s"),
        ] {
            assert_eq!(Text(d).to_string(), text);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn what_is_written_reads_back_exactly(ns in MIN.as_nanos() as u64..=MAX.as_nanos() as u64) {
            let d = Duration::from_nanos(ns);
            prop_assert_eq!(parse(&Text(d).to_string()), Ok(d));
        }

        #[test]
        fn no_text_panics(text in "\\PC{0,40}") {
            let _ = parse(&text);
        }
    }
}
