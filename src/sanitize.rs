//! Making process names safe to print.
//!
//! Owns [`escape`]: process names and command lines are bytes chosen by whoever started the
//! process. They may hold terminal escape sequences (a process named `\x1b]0;owned\x07` would
//! retitle the terminal), newlines, bidirectional overrides or bytes that are not UTF-8. Nothing
//! foster prints for people shows them raw; JSON output carries the exact bytes instead.

use std::fmt::Write;

/// True for characters that change how text around them is shown: Unicode bidirectional
/// controls and zero-width formatting, which `char::is_control` does not cover.
fn is_format_char(c: char) -> bool {
    matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2069}' | '\u{FEFF}')
}

/// Escapes `bytes` for a terminal: printable text stays, `\` becomes `\\`, `\n` `\t` `\r` `\e`
/// are shown by name, other control and format characters as `\u{..}` or `\xNN`, and bytes that
/// are not UTF-8 as `\xNN`.
pub fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
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
    out
}

/// Like [`escape`], for a command line: arguments joined by spaces, each escaped.
pub fn escape_args<A: AsRef<[u8]>>(args: &[A]) -> String {
    let mut out = String::new();
    for (i, a) in args.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(&escape(a.as_ref()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::escape;

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
}
