//! Live control of a running software NIC: a Unix stream socket speaking one JSON request
//! line and one JSON answer line (`{"cmd":"stats"}`, `{"cmd":"reload","policy":PATH}`), and
//! an optional Prometheus text endpoint on a localhost TCP port.
//!
//! The dataplane never blocks on control: both listeners are non-blocking and polled from
//! the busy loop about once a millisecond; an accepted connection is served at once with a
//! short read timeout (a stalled client costs the loop at most that timeout).

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

/// The server side: the dataplane polls it.
pub struct Server {
    unix: Option<(UnixListener, PathBuf)>,
    metrics: Option<TcpListener>,
}

impl Server {
    /// Binds the control socket at `path` (replacing a stale one) and, if given, the metrics
    /// endpoint (must be a loopback address).
    pub fn bind(path: Option<&Path>, metrics: Option<&str>) -> io::Result<Server> {
        let unix = match path {
            Some(p) => {
                if let Some(dir) = p.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                let _ = std::fs::remove_file(p);
                let l = UnixListener::bind(p)?;
                l.set_nonblocking(true)?;
                Some((l, p.to_path_buf()))
            }
            None => None,
        };
        let metrics = match metrics {
            Some(a) => {
                let l = TcpListener::bind(a)?;
                if !l.local_addr()?.ip().is_loopback() {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "the metrics endpoint must listen on a loopback address",
                    ));
                }
                l.set_nonblocking(true)?;
                Some(l)
            }
            None => None,
        };
        Ok(Server { unix, metrics })
    }

    /// Serves pending connections: `handle` answers a request (a JSON object); `stats` gives
    /// the current stats for the metrics endpoint.
    pub fn poll(&self, mut handle: impl FnMut(&Value) -> Value) {
        if let Some((l, _)) = &self.unix {
            while let Ok((s, _)) = l.accept() {
                let _ = serve_unix(s, &mut handle);
            }
        }
        if let Some(l) = &self.metrics {
            while let Ok((s, _)) = l.accept() {
                let stats = handle(&json!({"cmd": "stats"}));
                let _ = serve_metrics(s, &stats);
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some((_, p)) = &self.unix {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn serve_unix(s: UnixStream, handle: &mut impl FnMut(&Value) -> Value) -> io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(Duration::from_millis(200)))?;
    let mut line = String::new();
    BufReader::new(&s).take(1 << 20).read_line(&mut line)?;
    let answer = match serde_json::from_str::<Value>(&line) {
        Ok(req) => handle(&req),
        Err(e) => json!({"ok": false, "error": format!("bad request: {e}")}),
    };
    let mut w = &s;
    writeln!(w, "{answer}")
}

fn serve_metrics(s: TcpStream, stats: &Value) -> io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(Duration::from_millis(200)))?;
    let mut buf = [0u8; 2048];
    let _ = (&s).read(&mut buf);
    let body = prometheus(stats);
    let mut w = &s;
    write!(
        w,
        "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

fn label(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// The stats answer in Prometheus text format.
pub fn prometheus(stats: &Value) -> String {
    let mut o = String::new();
    o += "# TYPE weft_node_packets_total counter\n# TYPE weft_node_bytes_total counter\n";
    o += "# TYPE weft_node_drops_total counter\n# TYPE weft_node_rate_bps gauge\n";
    for n in stats["nodes"].as_array().into_iter().flatten() {
        let name = label(n["name"].as_str().unwrap_or(""));
        let l = format!("node=\"{name}\"");
        o += &format!("weft_node_packets_total{{{l}}} {}\n", n["packets"]);
        o += &format!("weft_node_bytes_total{{{l}}} {}\n", n["bytes"]);
        o += &format!("weft_node_rate_bps{{{l}}} {}\n", n["rate_bps"]);
        for (r, v) in n["drops"].as_object().into_iter().flatten() {
            o += &format!("weft_node_drops_total{{{l},reason=\"{r}\"}} {v}\n");
        }
    }
    o += "# TYPE weft_shaper_packets_total counter\n# TYPE weft_shaper_bytes_total counter\n";
    o += "# TYPE weft_shaper_rate_bps gauge\n# TYPE weft_shaper_limit_bps gauge\n";
    for c in stats["shapers"].as_array().into_iter().flatten() {
        let l = format!("shaper=\"{}\"", label(c["name"].as_str().unwrap_or("")));
        o += &format!("weft_shaper_packets_total{{{l}}} {}\n", c["packets"]);
        o += &format!("weft_shaper_bytes_total{{{l}}} {}\n", c["bytes"]);
        o += &format!("weft_shaper_rate_bps{{{l}}} {}\n", c["rate_bps"]);
        o += &format!("weft_shaper_limit_bps{{{l}}} {}\n", c["limit_bps"]);
    }
    for (k, v) in stats["dataplane"].as_object().into_iter().flatten() {
        if v.is_number() {
            o += &format!("weft_dataplane_{k} {v}\n");
        }
    }
    for (k, v) in stats["iface"].as_object().into_iter().flatten() {
        if v.is_number() {
            o += &format!("weft_iface_{k} {v}\n");
        }
    }
    o
}

/// The client side: sends one request and returns the answer.
pub fn request(path: &Path, req: &Value) -> io::Result<Value> {
    let mut s = UnixStream::connect(path).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "cannot connect to {}: {e} (is `weft run` running?)",
                path.display()
            ),
        )
    })?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    writeln!(s, "{req}")?;
    let mut line = String::new();
    BufReader::new(&s).read_line(&mut line)?;
    serde_json::from_str(&line).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// The default control socket path.
pub const DEFAULT_SOCKET: &str = "/run/weft/weft.sock";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_has_a_series_per_shaping_class() {
        let stats = json!({
            "nodes": [],
            "shapers": [{"id": 0, "name": "dst\"2", "limit_bps": 10_000_000_000u64,
                         "burst_bytes": 65536, "packets": 7, "bytes": 700, "rate_bps": 5.0}],
        });
        let text = prometheus(&stats);
        for line in [
            r#"weft_shaper_packets_total{shaper="dst\"2"} 7"#,
            r#"weft_shaper_bytes_total{shaper="dst\"2"} 700"#,
            r#"weft_shaper_rate_bps{shaper="dst\"2"} 5.0"#,
            r#"weft_shaper_limit_bps{shaper="dst\"2"} 10000000000"#,
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{line} missing from:\n{text}"
            );
        }
    }
}
