//! Property tests of the control protocol's request decoding: `parse_request` and the
//! `LineReader` that cuts a client's bytes into request lines. Whatever a client sends (bytes,
//! JSON-like values, requests with a key given twice, lines around the size limit, cut into
//! any chunks) never panics, every failure is an error reply with a kind, and every request
//! taken means what it says. Each property runs a bounded number of cases.

use foster::supervision::control::protocol::{
    ErrorKind, MAX_REQUEST, Request, parse_request, request_line,
};
use foster::supervision::control::server::{Line, LineReader};
use proptest::prelude::*;
use serde_json::Value;

/// The error reply for a refused line is one JSON line with the version and a known kind.
fn check_refusal(line: &[u8]) -> Result<Option<Request>, TestCaseError> {
    match parse_request(line) {
        Ok(r) => Ok(Some(r)),
        Err(e) => {
            prop_assert!(!e.message.is_empty());
            let reply = e.reply().to_line();
            prop_assert_eq!(reply.last(), Some(&b'\n'));
            prop_assert!(!reply[..reply.len() - 1].contains(&b'\n'));
            let v: Value = serde_json::from_slice(&reply).unwrap();
            prop_assert_eq!(&v["version"], 1);
            let kind: ErrorKind = serde_json::from_value(v["error"]["kind"].clone()).unwrap();
            prop_assert_eq!(kind, e.kind);
            // Nothing raw for a terminal in the reply.
            let text = String::from_utf8(reply).unwrap();
            prop_assert!(
                !text
                    .trim_end()
                    .chars()
                    .any(foster::base::sanitize::is_unsafe),
                "{}",
                text
            );
            Ok(None)
        }
    }
}

/// A request taken is the one its own encoding gives back.
fn check_taken(r: &Request) -> Result<(), TestCaseError> {
    let line = request_line(r);
    let back = parse_request(&line[..line.len() - 1]).unwrap();
    prop_assert_eq!(&back, r);
    Ok(())
}

fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("request".to_string()),
        Just("version".to_string()),
        Just("status".to_string()),
        Just("events".to_string()),
        Just("signal".to_string()),
        Just("restart".to_string()),
        Just("stop".to_string()),
        Just("logs".to_string()),
        Just("lines".to_string()),
        Just("target".to_string()),
        Just("helper".to_string()),
        Just("backlog".to_string()),
        Just("follow".to_string()),
        Just("TERM".to_string()),
        Just("SIGKILL".to_string()),
        Just("RTMIN+3".to_string()),
        Just("12:34".to_string()),
        Just("0".to_string()),
        Just("-1".to_string()),
        "\\PC{0,12}",
        ".{0,6}",
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        word().prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((word(), inner), 0..5)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// An object that looks like a request: a known name (mostly), some known fields.
fn request_like() -> impl Strategy<Value = Value> {
    (
        prop_oneof![
            4 => prop::sample::select(vec!["status", "events", "signal", "restart", "stop", "logs"])
                .prop_map(Value::from),
            1 => json_value(),
        ],
        prop::option::of(prop_oneof![Just(Value::from(1)), json_value()]),
        prop::collection::vec(
            (
                prop::sample::select(vec![
                    "target", "signal", "helper", "backlog", "follow", "lines", "extra",
                ]),
                json_value(),
            ),
            0..4,
        ),
    )
        .prop_map(|(name, version, fields)| {
            let mut m = serde_json::Map::new();
            m.insert("request".into(), name);
            if let Some(v) = version {
                m.insert("version".into(), v);
            }
            for (k, v) in fields {
                m.insert(k.to_string(), v);
            }
            Value::Object(m)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        if let Some(r) = check_refusal(&bytes)? {
            check_taken(&r)?;
        }
    }

    #[test]
    fn json_values_never_panic(v in prop_oneof![json_value(), request_like()]) {
        let line = serde_json::to_vec(&v).unwrap();
        if let Some(r) = check_refusal(&line)? {
            prop_assert!(v.is_object());
            check_taken(&r)?;
        }
    }

    #[test]
    fn a_key_given_twice_is_always_refused(v in request_like(), dup in json_value()) {
        // The same object with its "request" key given again, first or last.
        let text = serde_json::to_string(&v).unwrap();
        let dup = serde_json::to_string(&dup).unwrap();
        for line in [
            format!("{{\"request\":{dup},{}", &text[1..]),
            format!("{},\"request\":{dup}}}", &text[..text.len() - 1]),
        ] {
            let e = parse_request(line.as_bytes()).unwrap_err();
            prop_assert_eq!(e.kind, ErrorKind::Malformed, "{}: {}", line, e);
        }
    }
}

/// What a line of `piece` bytes should come out as.
fn expected(piece: &[u8]) -> Line {
    if piece.len() > MAX_REQUEST + 1 {
        Line::Oversized(piece.len())
    } else {
        Line::Text(piece.to_vec())
    }
}

/// Lines: short ones of any bytes, and runs near the size limit.
fn stream() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![
            8 => prop::collection::vec(any::<u8>(), 0..40),
            1 => (MAX_REQUEST - 2..MAX_REQUEST + 4).prop_map(|n| vec![b'x'; n]),
            1 => Just(vec![b'\n']),
        ],
        0..8,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn lines_come_out_whole_or_counted_however_the_bytes_are_cut(
        input in stream(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
    ) {
        let mut at: Vec<usize> = cuts.iter().map(|i| i.index(input.len() + 1)).collect();
        at.push(0);
        at.push(input.len());
        at.sort_unstable();
        let mut r = LineReader::new();
        let mut got = Vec::new();
        for w in at.windows(2) {
            r.feed(&input[w[0]..w[1]]);
            while let Some(l) = r.take() {
                got.push(l);
            }
        }
        r.end();
        while let Some(l) = r.take() {
            got.push(l);
        }
        let mut pieces: Vec<&[u8]> = input.split(|&b| b == b'\n').collect();
        if pieces.last().is_some_and(|p| p.is_empty()) {
            pieces.pop();
        }
        let want: Vec<Line> = pieces.iter().map(|p| expected(p)).collect();
        prop_assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(&want) {
            prop_assert!(g == w, "{:?} != {:?}", short(g), short(w));
            if let Line::Text(t) = g {
                // Every line a client can send decodes without panicking.
                check_refusal(t)?;
            }
        }
    }
}

fn short(l: &Line) -> String {
    match l {
        Line::Text(t) => format!("Text({} bytes)", t.len()),
        other => format!("{other:?}"),
    }
}
