//! The lines of a stream (a child's output, a connection) read on a thread into a channel, as
//! text or as JSON: a test waits on the channel with a bound of its own, never on the stream.
//! The channel ends with the stream, or once nobody listens.

use std::io::{BufRead, BufReader, Read};
use std::sync::mpsc;

use serde_json::Value;

/// The lines of `r` (without their newline), as they come.
pub fn lines(r: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(r).lines() {
            let Ok(l) = l else { break };
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

/// The lines of `r`, each a JSON value (a line that is not fails the test, on the reading
/// thread: the channel then ends).
pub fn json_lines(r: impl Read + Send + 'static) -> mpsc::Receiver<Value> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(r).lines() {
            let Ok(l) = l else { break };
            let v: Value = serde_json::from_str(&l).expect("a JSON line");
            if tx.send(v).is_err() {
                break;
            }
        }
    });
    rx
}
