//! HTTP/2 by hand (RFC 9113 frames, HPACK literals only), for clients that break rules a
//! well-behaved HTTP/2 library keeps: opening more streams than the server allows, never
//! answering a ping, never finishing a header block, never sending a request at all.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use crate::tls::RawConn;

/// The client connection preface.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Frame types used here.
pub const HEADERS: u8 = 0x1;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;

/// Flags.
pub const ACK: u8 = 0x1;
pub const END_STREAM: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;

/// SETTINGS_MAX_CONCURRENT_STREAMS and SETTINGS_MAX_HEADER_LIST_SIZE.
pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;

/// Error code REFUSED_STREAM.
pub const REFUSED_STREAM: u32 = 0x7;

/// One frame.
#[derive(Debug, Clone)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

impl Frame {
    /// The error code of a RST_STREAM frame.
    pub fn error_code(&self) -> Option<u32> {
        (self.kind == RST_STREAM && self.payload.len() == 4)
            .then(|| u32::from_be_bytes(self.payload[..4].try_into().expect("4 bytes")))
    }

    /// A parameter of a SETTINGS frame.
    pub fn setting(&self, id: u16) -> Option<u32> {
        if self.kind != SETTINGS {
            return None;
        }
        self.payload.chunks_exact(6).find_map(|p| {
            (u16::from_be_bytes([p[0], p[1]]) == id)
                .then(|| u32::from_be_bytes([p[2], p[3], p[4], p[5]]))
        })
    }
}

/// What reading brought.
#[derive(Debug)]
pub enum Next {
    Frame(Frame),
    /// The server closed the connection.
    Closed,
    /// Nothing complete arrived before the deadline.
    Timeout,
}

/// An HTTP/2 client connection written by hand over a [`RawConn`].
pub struct RawH2 {
    conn: RawConn,
    authority: String,
    scheme: &'static str,
    buffer: Vec<u8>,
}

impl RawH2 {
    /// Wraps `conn` (TLS with ALPN `h2`, or plain TCP for prior-knowledge h2c) without
    /// sending anything yet.
    pub fn new(conn: RawConn, authority: &str) -> RawH2 {
        let scheme = if conn.alpn().is_some() {
            "https"
        } else {
            "http"
        };
        conn.set_read_timeout(Some(Duration::from_millis(50)))
            .expect("read timeout");
        RawH2 {
            conn,
            authority: authority.to_owned(),
            scheme,
            buffer: Vec::new(),
        }
    }

    /// Sends the preface and an empty SETTINGS frame.
    pub fn start(&mut self) -> std::io::Result<()> {
        self.conn.write_all(PREFACE)?;
        self.send(SETTINGS, 0, 0, &[])
    }

    /// Sends one frame.
    pub fn send(
        &mut self,
        kind: u8,
        flags: u8,
        stream: u32,
        payload: &[u8],
    ) -> std::io::Result<()> {
        let len = u32::try_from(payload.len()).expect("frame length");
        let mut frame = len.to_be_bytes()[1..].to_vec();
        frame.extend([kind, flags]);
        frame.extend((stream & 0x7fff_ffff).to_be_bytes());
        frame.extend_from_slice(payload);
        self.conn.write_all(&frame)?;
        self.conn.flush()
    }

    /// Opens stream `stream` with `POST path` and leaves it open (no END_STREAM, no body):
    /// a request in flight until the stream is reset or the connection ends.
    pub fn open_post(&mut self, stream: u32, path: &str) -> std::io::Result<()> {
        let block = self.request_block("POST", path);
        self.send(HEADERS, END_HEADERS, stream, &block)
    }

    /// Sends `GET path` on `stream` as a whole request (END_STREAM, END_HEADERS).
    pub fn get(&mut self, stream: u32, path: &str) -> std::io::Result<()> {
        let block = self.request_block("GET", path);
        self.send(HEADERS, END_HEADERS | END_STREAM, stream, &block)
    }

    /// Starts `GET path` on `stream` but never ends its header block (no END_HEADERS).
    pub fn unfinished_get(&mut self, stream: u32, path: &str) -> std::io::Result<()> {
        let block = self.request_block("GET", path);
        self.send(HEADERS, END_STREAM, stream, &block)
    }

    /// An HPACK header block of literals without indexing (no dynamic table state).
    fn request_block(&self, method: &str, path: &str) -> Vec<u8> {
        let mut block = Vec::new();
        for (name, value) in [
            (":method", method),
            (":scheme", self.scheme),
            (":path", path),
            (":authority", self.authority.as_str()),
        ] {
            block.push(0x00);
            push_string(&mut block, name);
            push_string(&mut block, value);
        }
        block
    }

    /// The next frame, reading until `deadline`. SETTINGS from the server are acknowledged
    /// (and still returned); pings are not answered unless `answer_pings`.
    pub fn next(&mut self, deadline: Instant, answer_pings: bool) -> Next {
        loop {
            if let Some(frame) = self.take_frame() {
                if frame.kind == SETTINGS && frame.flags & ACK == 0 {
                    let _ = self.send(SETTINGS, ACK, 0, &[]);
                }
                if answer_pings && frame.kind == PING && frame.flags & ACK == 0 {
                    let _ = self.send(PING, ACK, 0, &frame.payload);
                }
                return Next::Frame(frame);
            }
            if Instant::now() >= deadline {
                return Next::Timeout;
            }
            let mut chunk = [0u8; 16 * 1024];
            match self.conn.read(&mut chunk) {
                Ok(0) => return Next::Closed,
                Ok(n) => self.buffer.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => return Next::Closed,
            }
        }
    }

    /// Reads frames until the server closes the connection (`true`) or `deadline` passes
    /// (`false`).
    pub fn closed_by(&mut self, deadline: Instant, answer_pings: bool) -> bool {
        loop {
            match self.next(deadline, answer_pings) {
                Next::Frame(_) => {}
                Next::Closed => return true,
                Next::Timeout => return false,
            }
        }
    }

    fn take_frame(&mut self) -> Option<Frame> {
        if self.buffer.len() < 9 {
            return None;
        }
        let len = u32::from_be_bytes([0, self.buffer[0], self.buffer[1], self.buffer[2]]) as usize;
        if self.buffer.len() < 9 + len {
            return None;
        }
        let head: Vec<u8> = self.buffer.drain(..9).collect();
        let payload = self.buffer.drain(..len).collect();
        Some(Frame {
            kind: head[3],
            flags: head[4],
            stream: u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff,
            payload,
        })
    }
}

/// An HPACK string literal (no Huffman), length with a 7-bit prefix.
fn push_string(block: &mut Vec<u8>, s: &str) {
    let mut len = s.len();
    if len < 0x7f {
        block.push(len as u8);
    } else {
        block.push(0x7f);
        len -= 0x7f;
        while len >= 0x80 {
            block.push((len % 0x80) as u8 | 0x80);
            len /= 0x80;
        }
        block.push(len as u8);
    }
    block.extend_from_slice(s.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_strings_use_the_prefix_continuation() {
        let mut block = Vec::new();
        push_string(&mut block, &"a".repeat(200));
        // 200 = 127 + 73: 0x7f, then 73.
        assert_eq!(&block[..2], &[0x7f, 73]);
        assert_eq!(block.len(), 202);
    }
}
