//! Sizes in bytes as people write them: `10MiB`, `512KiB`, `1G`, `10MB`, `4096`.
//!
//! Owns [`parse_size`], the one parser of sizes (the events log's rotation size, and any later
//! log size). The units are those of GNU coreutils and logrotate: a bare `K`, `M`, `G`, `T` and
//! the `KiB` … `TiB` forms are powers of 1024; `KB` … `TB` powers of 1000; `B` or no unit is
//! bytes. Units are case-insensitive, a space may stand between number and unit, and a decimal
//! fraction (`1.5G`) is rounded down to a whole byte.

/// The longest text [`parse_size`] looks at.
pub const MAX_TEXT: usize = 64;

const UNITS: [(&str, u64); 13] = [
    ("b", 1),
    ("k", 1 << 10),
    ("kib", 1 << 10),
    ("kb", 1_000),
    ("m", 1 << 20),
    ("mib", 1 << 20),
    ("mb", 1_000_000),
    ("g", 1 << 30),
    ("gib", 1 << 30),
    ("gb", 1_000_000_000),
    ("t", 1 << 40),
    ("tib", 1 << 40),
    ("tb", 1_000_000_000_000),
];

/// A text that is not a size: the text (escaped, at most [`MAX_TEXT`] characters) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid size \"{text}\": {why}: expected a number and a unit such as 4096, 512KiB, 10MiB, \
     10MB or 1G"
)]
pub struct SizeError {
    text: String,
    why: String,
}

/// Parses a size in bytes (see the module docs); the error names what was wrong.
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let bad = |why: &str| {
        let shown: String = text.chars().take(MAX_TEXT).collect();
        Err(SizeError {
            text: crate::base::sanitize::escape(shown.as_bytes()).to_string(),
            why: why.to_string(),
        })
    };
    if text.len() > MAX_TEXT {
        return bad(&format!("longer than {MAX_TEXT} bytes"));
    }
    let t = text.trim();
    if t.is_empty() {
        return bad("empty");
    }
    if t.starts_with('-') {
        return bad("negative");
    }
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = (&t[..end], t[end..].trim_start());
    let (whole, fraction) = match number.split_once('.') {
        Some((w, f)) => (w, f),
        None => (number, ""),
    };
    if whole.is_empty() || fraction.contains('.') || (number.contains('.') && fraction.is_empty()) {
        return bad("not a number");
    }
    let Some(&(_, mult)) = UNITS.iter().find(|(u, _)| unit.eq_ignore_ascii_case(u)) else {
        return if unit.is_empty() {
            // No unit: bytes.
            whole_bytes(whole, fraction, 1).map_or_else(|| bad("too large"), Ok)
        } else {
            bad(&format!(
                "unknown unit \"{}\" (B, K, KiB, KB, M, MiB, MB, G, GiB, GB, T, TiB or TB)",
                crate::base::sanitize::escape(unit.as_bytes())
            ))
        };
    };
    whole_bytes(whole, fraction, mult).map_or_else(|| bad("too large"), Ok)
}

/// `whole.fraction × mult`, rounded down; `None` when it does not fit in a `u64`.
fn whole_bytes(whole: &str, fraction: &str, mult: u64) -> Option<u64> {
    let w: u64 = whole.parse().ok()?;
    let mut bytes = w.checked_mul(mult)?;
    // The fraction digit by digit: each adds digit × mult / 10^k, exactly, in u128.
    let mut scale: u128 = 1;
    let mut acc: u128 = 0;
    // 20 digits are finer than a byte of any unit, and keep acc × mult within a u128.
    for d in fraction.bytes().take(20) {
        scale *= 10;
        acc = acc * 10 + u128::from(d - b'0');
    }
    if scale > 1 {
        let part = u64::try_from(acc * u128::from(mult) / scale).ok()?;
        bytes = bytes.checked_add(part)?;
    }
    Some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn fixtures() {
        for (text, want) in [
            ("0", 0),
            ("4096", 4096),
            ("1B", 1),
            ("1K", 1024),
            ("1k", 1024),
            ("512KiB", 512 * 1024),
            ("512kib", 512 * 1024),
            ("10KB", 10_000),
            ("10MB", 10_000_000),
            ("10MiB", 10 * 1024 * 1024),
            ("10M", 10 * 1024 * 1024),
            ("1G", 1 << 30),
            ("1GB", 1_000_000_000),
            ("2TiB", 2 << 40),
            ("1.5G", 3 << 29),
            ("1.5K", 1536),
            ("0.5KB", 500),
            ("1.0001K", 1024),
            (" 10 MiB ", 10 << 20),
            ("16TiB", 16 << 40),
            ("18446744073709551615", u64::MAX),
        ] {
            assert_eq!(parse_size(text), Ok(want), "{text:?}");
        }
    }

    #[test]
    fn mistakes_say_what_was_wrong() {
        for (text, want) in [
            ("", "empty"),
            ("  ", "empty"),
            ("-1K", "negative"),
            ("MiB", "not a number"),
            ("1.2.3K", "not a number"),
            ("1.K", "not a number"),
            (".5K", "not a number"),
            ("10XB", "unknown unit \"XB\""),
            ("10 M B", "unknown unit"),
            ("1e6", "unknown unit \"e6\""),
            ("18446744073709551616", "too large"),
            ("17179869184G", "too large"),
            ("99999999999999999999999999TB", "too large"),
        ] {
            let e = parse_size(text).expect_err(text).to_string();
            assert!(e.contains(want), "{text:?}: {e}");
            assert!(e.starts_with("invalid size"), "{e}");
        }
        let long = "1".repeat(MAX_TEXT + 1);
        assert!(
            parse_size(&long)
                .unwrap_err()
                .to_string()
                .contains("longer than")
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Any whole number with any unit parses to number × unit, or says "too large".
        #[test]
        fn number_times_unit(n in 0u64..=u64::MAX, i in 0usize..UNITS.len(), upper: bool) {
            let (unit, mult) = UNITS[i];
            let unit = if upper { unit.to_ascii_uppercase() } else { unit.to_string() };
            let got = parse_size(&format!("{n}{unit}"));
            match n.checked_mul(mult) {
                Some(v) => prop_assert_eq!(got, Ok(v)),
                None => prop_assert!(got.unwrap_err().to_string().contains("too large")),
            }
        }

        /// No text panics, and every answer is a size or a message naming the text.
        #[test]
        fn no_text_panics(text in "\\PC{0,80}") {
            if let Err(e) = parse_size(&text) {
                prop_assert!(e.to_string().starts_with("invalid size"));
            }
        }
    }
}
