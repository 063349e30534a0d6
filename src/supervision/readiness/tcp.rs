//! The connect probe (`ready = { tcp = ... }`, `health = { tcp = ... }`): a TCP connection to an
//! address is accepted within a time.
//!
//! Owns [`connect`]: a non-blocking connect on the supervisor's runtime (tokio's), bounded by
//! a timeout, closed at once when it succeeds. Nothing is sent.

use std::net::SocketAddr;
use std::time::Duration;

/// Why a connect probe failed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The connection was refused or failed.
    #[error("connect to {addr}: {source}")]
    Failed {
        addr: SocketAddr,
        source: std::io::Error,
    },
    /// No answer came within the time.
    #[error("connect to {addr}: no answer within {}", crate::base::duration::Text(*.timeout))]
    TimedOut { addr: SocketAddr, timeout: Duration },
}

/// Connects to `addr` within `timeout`; the error says why not.
pub async fn connect(addr: SocketAddr, timeout: Duration) -> Result<(), ConnectError> {
    match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(addr)).await {
        Ok(Ok(_stream)) => Ok(()),
        Ok(Err(source)) => Err(ConnectError::Failed { addr, source }),
        Err(_) => Err(ConnectError::TimedOut { addr, timeout }),
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
        assert!(rt.block_on(connect(addr, Duration::from_secs(5))).is_ok());
        drop(l);
        let e = rt
            .block_on(connect(addr, Duration::from_secs(5)))
            .unwrap_err()
            .to_string();
        assert!(e.contains("refused"), "{e}");
    }
}
