//! Reading a `text/event-stream` body (the server's L8 framing): bytes in, whole records out.
//! Only what L8 sends is kept: `id`, `event` and `data` (several `data` lines joined with
//! newlines); comment lines (`: keep-alive`) and unknown fields are skipped.

/// One SSE record.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Record {
    pub id: Option<String>,
    pub event: Option<String>,
    pub data: String,
}

/// Bytes of a stream so far; records come out as they complete.
#[derive(Debug, Default)]
pub struct Parser {
    pending: Vec<u8>,
}

impl Parser {
    /// Adds a chunk; returns every record it completed, in order.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<Record> {
        self.pending.extend_from_slice(chunk);
        let mut records = Vec::new();
        while let Some((end, skip)) = record_end(&self.pending) {
            let block: Vec<u8> = self.pending.drain(..end + skip).take(end).collect();
            if let Some(record) = parse_block(&String::from_utf8_lossy(&block)) {
                records.push(record);
            }
        }
        records
    }
}

/// Where the first record ends (a blank line, `\n\n` or `\r\n\r\n`): its length and the
/// separator's.
fn record_end(bytes: &[u8]) -> Option<(usize, usize)> {
    let lf = bytes
        .windows(2)
        .position(|w| w == b"\n\n")
        .map(|at| (at, 2));
    let crlf = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|at| (at, 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

/// A record from its lines; `None` for a block of comments only.
fn parse_block(block: &str) -> Option<Record> {
    let mut record = Record::default();
    let mut data: Vec<&str> = Vec::new();
    let mut any = false;
    for line in block.lines() {
        if line.starts_with(':') || line.is_empty() {
            continue;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "id" => record.id = Some(value.to_owned()),
            "event" => record.event = Some(value.to_owned()),
            "data" => data.push(value),
            _ => continue,
        }
        any = true;
    }
    record.data = data.join("\n");
    any.then_some(record)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_complete_across_chunks_and_comments_are_skipped() {
        let mut parser = Parser::default();
        assert!(parser
            .push(b": keep-alive\n\nid: e.1.0\nevent: gra")
            .is_empty());
        let records = parser.push(b"nted\ndata: {\"a\":1}\n\nid: e.2.0\r\ndata: x\r\n\r\n");
        assert_eq!(
            records,
            vec![
                Record {
                    id: Some("e.1.0".into()),
                    event: Some("granted".into()),
                    data: "{\"a\":1}".into()
                },
                Record {
                    id: Some("e.2.0".into()),
                    event: None,
                    data: "x".into()
                },
            ]
        );
    }

    #[test]
    fn several_data_lines_are_one_value() {
        let mut parser = Parser::default();
        let records = parser.push(b"data: a\ndata:b\nretry: 5\n\n");
        assert_eq!(records[0].data, "a\nb");
    }
}
