//! Which HTTP version the dashboard's requests travel over, and when that distorts what it
//! measures: over HTTP/1.1 a browser keeps at most 6 connections per host, so with more
//! contenders the browser's own request queue, not the backoff, decides who goes next.
//! HTTP/2 multiplexes every contender over one connection, and browsers speak it only over
//! TLS.

use serde::{Deserialize, Serialize};

/// Connections a browser keeps per host over HTTP/1.1 (Chromium, Firefox and Safari alike).
pub const BROWSER_HTTP1_CONNECTIONS: u32 = 6;

/// The negotiated protocol, from Resource Timing's `nextHopProtocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Protocol {
    Http1,
    Http2,
    Http3,
    /// Not observed yet, or not exposed (a cross-origin server without `Timing-Allow-Origin`
    /// reports an empty string).
    #[default]
    Unknown,
}

impl Protocol {
    /// From a `nextHopProtocol` value (`http/1.1`, `h2`, `h3`, ALPN ids; `""` when hidden).
    pub fn from_next_hop(value: &str) -> Protocol {
        match value {
            "http/1.0" | "http/1.1" => Protocol::Http1,
            "h2" | "h2c" => Protocol::Http2,
            v if v.starts_with("h3") => Protocol::Http3,
            _ => Protocol::Unknown,
        }
    }

    /// How the dashboard names it.
    pub fn label(self) -> &'static str {
        match self {
            Protocol::Http1 => "HTTP/1.1",
            Protocol::Http2 => "HTTP/2",
            Protocol::Http3 => "HTTP/3",
            Protocol::Unknown => "not known yet",
        }
    }

    /// Whether `contenders` running at once over this protocol queue in the browser.
    pub fn distorts(self, contenders: u32) -> bool {
        self == Protocol::Http1 && contenders > BROWSER_HTTP1_CONNECTIONS
    }
}

/// The warning shown when [`Protocol::distorts`] holds, for `contenders` configured.
pub fn distortion_warning(contenders: u32) -> String {
    format!(
        "These requests go over HTTP/1.1, and up to {contenders} contenders are configured. A \
         browser keeps at most {BROWSER_HTTP1_CONNECTIONS} HTTP/1.1 connections per server, so \
         above {BROWSER_HTTP1_CONNECTIONS} contenders the browser's own queue, not the backoff, \
         decides who goes next: the figures are distorted (full jitter can look no better \
         than no jitter, and L7 samples starve). Run the server over TLS, where the browser \
         speaks HTTP/2 and multiplexes every contender over one connection: \
         LOCK_TLS=self-signed scripts/run.sh"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_hop_values_map_to_protocols() {
        assert_eq!(Protocol::from_next_hop("http/1.1"), Protocol::Http1);
        assert_eq!(Protocol::from_next_hop("h2"), Protocol::Http2);
        assert_eq!(Protocol::from_next_hop("h3"), Protocol::Http3);
        assert_eq!(Protocol::from_next_hop(""), Protocol::Unknown);
    }

    #[test]
    fn only_http1_above_six_contenders_distorts() {
        assert!(!Protocol::Http1.distorts(6));
        assert!(Protocol::Http1.distorts(7));
        assert!(!Protocol::Http2.distorts(200));
        assert!(!Protocol::Unknown.distorts(200));
    }

    #[test]
    fn the_warning_says_why_and_what_to_do() {
        let text = distortion_warning(40);
        for needle in [
            "HTTP/1.1",
            "40 contenders",
            "at most 6",
            "queue",
            "TLS",
            "HTTP/2",
        ] {
            assert!(text.contains(needle), "{needle} missing: {text}");
        }
        assert!(text.contains("LOCK_TLS=self-signed scripts/run.sh"));
    }
}
