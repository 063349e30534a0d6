//! The connect probe (`ready = { tcp = ... }`, `health = { tcp = ... }`): a TCP connection to an
//! address is accepted within a time.
//!
//! Owns [`connect`]: a non-blocking connect on the supervisor's runtime (tokio's), bounded by
//! a timeout, closed at once when it succeeds. Nothing is sent.

use std::net::SocketAddr;
use std::time::Duration;

/// Connects to `addr` within `timeout`; the error says why not.
pub async fn connect(addr: SocketAddr, timeout: Duration) -> Result<(), String> {
    match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(addr)).await {
        Ok(Ok(_stream)) => Ok(()),
        Ok(Err(e)) => Err(format!("connect to {addr}: {e}")),
        Err(_) => Err(format!(
            "connect to {addr}: no answer within {}",
            crate::base::duration::Text(timeout)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_accepts_and_a_closed_port_refuses() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        assert_eq!(rt.block_on(connect(addr, Duration::from_secs(5))), Ok(()));
        drop(l);
        let e = rt
            .block_on(connect(addr, Duration::from_secs(5)))
            .unwrap_err();
        assert!(e.contains("refused"), "{e}");
    }
}
