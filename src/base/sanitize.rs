//! Making process names safe to print.
//!
//! Owns [`escape`]: process names and command lines are bytes chosen by whoever started the
//! process. They may hold terminal escape sequences (a process named `\x1b]0;owned\x07` would
//! retitle the terminal), newlines, bidirectional overrides or bytes that are not UTF-8. Nothing
//! foster prints for people shows them raw. JSON output carries the exact text instead, written
//! by [`to_json`] so that it is safe on a terminal too: every character [`is_unsafe`] holds
//! (C0 and C1 controls, DEL, bidirectional and zero-width formatting) becomes a `\uXXXX` escape,
//! which any JSON reader turns back into the same character. Also [`fit`]: text cut to a
//! number of terminal columns.

use std::fmt::Write;
use std::io;

/// True for characters that change how text around them is shown: Unicode bidirectional
/// controls and zero-width formatting, which `char::is_control` does not cover.
fn is_format_char(c: char) -> bool {
    matches!(
        c,
        '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2069}' | '\u{FEFF}'
    )
}

/// True for the characters no terminal may receive raw: controls (C0, DEL, and C1, among them
/// U+009B, a one-character CSI) and the formatting characters of [`is_format_char`].
pub fn is_unsafe(c: char) -> bool {
    c.is_control() || is_format_char(c)
}

/// A `serde_json` formatter (compact, as `serde_json::to_string`) that writes every character
/// [`is_unsafe`] holds as `\uXXXX` (serde_json itself escapes only those below U+0020).
#[derive(Debug, Default, Clone, Copy)]
pub struct TerminalSafeJson;

impl serde_json::ser::Formatter for TerminalSafeJson {
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            if !is_unsafe(c) {
                continue;
            }
            writer.write_all(&fragment.as_bytes()[start..i])?;
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                write!(writer, "\\u{u:04x}")?;
            }
            start = i + c.len_utf8();
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }
}

/// `value` as one line of compact JSON, every [`is_unsafe`] character escaped as `\uXXXX`: the
/// same document `serde_json::to_string` gives, safe to print on a terminal.
pub fn to_json<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    let mut out = Vec::with_capacity(128);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, TerminalSafeJson);
    value.serialize(&mut ser)?;
    // Only valid UTF-8 was written: serde_json's output and ASCII escapes.
    Ok(String::from_utf8(out).expect("JSON output is UTF-8"))
}

/// Escapes `bytes` for a terminal: printable text stays, `\` becomes `\\`, `\n` `\t` `\r` `\e`
/// are shown by name, other control and format characters as `\u{..}` or `\xNN`, and bytes that
/// are not UTF-8 as `\xNN`.
pub fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    push_escaped(bytes, &mut out);
    out
}

/// [`escape`], appended to `out`: plain bytes ([`is_plain`]) copied as they are.
fn push_escaped(bytes: &[u8], out: &mut String) {
    if is_plain(bytes)
        && let Ok(plain) = std::str::from_utf8(bytes)
    {
        out.push_str(plain);
    } else {
        escape_to(bytes, out);
    }
}

/// [`escape`], appended to `out` (a line being built): printable ASCII other than `\` is
/// copied as it is, without going through characters.
pub fn escape_into(bytes: &[u8], out: &mut Vec<u8>) {
    if is_plain(bytes) {
        out.extend_from_slice(bytes);
    } else {
        out.extend_from_slice(escape(bytes).as_bytes());
    }
}

/// Whether [`escape`] leaves `bytes` as they are because every byte is printable ASCII other
/// than `\` (a caller with many lines may ask once for all of them): tested 64 bytes at a time
/// without a branch inside, which the compiler turns into vector instructions.
pub fn is_plain(bytes: &[u8]) -> bool {
    bytes.chunks(64).all(|chunk| {
        !chunk.iter().fold(false, |bad, &b| {
            bad | !(0x20..0x7f).contains(&b) | (b == b'\\')
        })
    })
}

fn escape_to(bytes: &[u8], out: &mut String) {
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\t' => out.push_str("\\t"),
                '\r' => out.push_str("\\r"),
                '\x1b' => out.push_str("\\e"),
                c if (c as u32) < 0x80 && c.is_control() => {
                    let _ = write!(out, "\\x{:02x}", c as u32);
                }
                c if c.is_control() || is_format_char(c) => {
                    let _ = write!(out, "\\u{{{:04x}}}", c as u32);
                }
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
}

/// Like [`escape`], for a command line: arguments joined by spaces, each escaped.
pub fn escape_args<A: AsRef<[u8]>>(args: &[A]) -> String {
    let len = args.iter().map(|a| a.as_ref().len() + 1).sum();
    let mut out = String::with_capacity(len);
    for (i, a) in args.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        push_escaped(a.as_ref(), &mut out);
    }
    out
}

/// Cuts `s` (text already escaped) to at most `width` terminal columns, ending in `…` when cut.
pub fn fit(s: &str, width: usize) -> String {
    use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};
    if s.width() <= width {
        return s.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut out = String::new();
    let mut w = 0;
    for c in s.chars() {
        let cw = c.width().unwrap_or(0);
        if w + cw + 1 > width {
            break;
        }
        w += cw;
        out.push(c);
    }
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::{escape, to_json};

    proptest::proptest! {
        /// The fast path of escape_into writes exactly what escape does.
        #[test]
        fn escape_into_is_escape(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)
        ) {
            let mut v = b"x".to_vec();
            super::escape_into(&bytes, &mut v);
            let want = escape(&bytes);
            proptest::prop_assert_eq!(&v[1..], want.as_bytes());
        }

        /// The plain bytes' shortcut gives what escaping every character gives, for a word
        /// and for arguments joined.
        #[test]
        fn the_plain_shortcut_escapes_as_every_character_does(
            args in proptest::collection::vec(
                proptest::collection::vec(proptest::prop_oneof![
                    0x20..0x7fu8,
                    proptest::prelude::any::<u8>(),
                ], 0..40),
                0..5,
            )
        ) {
            let slow = |b: &[u8]| {
                let mut s = String::new();
                super::escape_to(b, &mut s);
                s
            };
            for a in &args {
                proptest::prop_assert_eq!(escape(a), slow(a));
            }
            let joined: Vec<String> = args.iter().map(|a| slow(a)).collect();
            proptest::prop_assert_eq!(super::escape_args(&args), joined.join(" "));
        }
    }

    #[test]
    fn plain_text_is_unchanged() {
        assert_eq!(escape(b"sleep"), "sleep");
        assert_eq!(escape("café ✓".as_bytes()), "café ✓");
        assert_eq!(escape(b"a b (c)"), "a b (c)");
    }

    #[test]
    fn terminal_escapes_never_pass() {
        let s = escape(b"\x1b]0;owned\x07");
        assert_eq!(s, "\\e]0;owned\\x07");
        assert!(!s.bytes().any(|b| b.is_ascii_control()));
        assert_eq!(escape(b"a\nb\tc\rd\0"), "a\\nb\\tc\\rd\\x00");
        assert_eq!(escape(b"\x7f"), "\\x7f");
        assert_eq!(escape("\u{9b}2J".as_bytes()), "\\u{009b}2J");
    }

    #[test]
    fn bidi_and_invalid_bytes() {
        assert_eq!(escape("a\u{202e}b".as_bytes()), "a\\u{202e}b");
        assert_eq!(escape(b"\xff\xfeok"), "\\xff\\xfeok");
        assert_eq!(escape(b"back\\slash"), "back\\\\slash");
    }

    #[test]
    fn json_escapes_what_a_terminal_must_not_see_and_stays_exact() {
        let name = "a\u{9b}2J\u{1b}]0;x\u{7}\u{7f}\u{85}\u{202e}\u{feff}é✓\"\\";
        let j = to_json(&[name]).unwrap();
        assert_eq!(
            j,
            r#"["a\u009b2J\u001b]0;x\u0007\u007f\u0085\u202e\ufeffé✓\"\\"]"#
        );
        assert!(!j.chars().any(super::is_unsafe), "{j:?}");
        let back: Vec<String> = serde_json::from_str(&j).unwrap();
        assert_eq!(back, [name]);
        // Plain values are exactly serde_json's compact output.
        let v = serde_json::json!({"a": [1, "x y", null, true], "b": {"c": -2.5}});
        assert_eq!(to_json(&v).unwrap(), serde_json::to_string(&v).unwrap());
    }
}
