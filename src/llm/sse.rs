//! SSE framing: bytes to events, with an idle read timeout on the bytes and a cap on the
//! size of one line and of one event.
//!
//! Written here rather than taken from a crate because the parser must be linear in the
//! length of a line: eventsource-stream re-parsed its whole buffer on every chunk and
//! copied the rest after every line, so one 8 MB line split over the network's small
//! chunks took seconds of CPU (50 MB: minutes). Here each byte is searched once for a line
//! end (`Parser::scanned`) and moved at most once inside the buffer.
//!
//! A final event whose lines are complete but which is not followed by a blank line is
//! still delivered at the end of the stream. A partial last line is dropped, with the
//! event it belongs to: the caller sees no end marker and reports truncation.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};

/// The longest line, and the largest event (its `data:` lines together), read from a
/// stream; also the largest whole answer read as one JSON document. A real answer is far
/// below it; a stream past it is broken or hostile, and holding it would only eat memory.
pub const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// One SSE event: its `event:` name (`message` when absent) and its joined `data:` lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    pub name: String,
    pub data: String,
}

/// Why the byte stream stopped early.
#[derive(Debug)]
pub enum SseError {
    /// No bytes (not even a keep-alive comment) for this long.
    ReadTimeout(Duration),
    /// The connection failed while reading.
    Transport(String),
    /// The bytes are not UTF-8.
    Invalid(String),
    /// A line or an event is longer than the cap (`limit` bytes). `start` is the
    /// beginning of the offending line, for the error message.
    TooLarge { limit: usize, start: String },
}

/// SSE events from a byte stream; each read waits at most `read_timeout`.
pub fn events<S, E>(
    body: S,
    read_timeout: Duration,
) -> impl Stream<Item = Result<SseEvent, SseError>> + Send
where
    S: Stream<Item = Result<Bytes, E>> + Send + Unpin + 'static,
    E: std::fmt::Display + Send + 'static,
{
    events_with_limit(body, read_timeout, MAX_EVENT_BYTES)
}

/// [`events`] with a cap of `limit` bytes on a line and an event (tests use a small one).
pub fn events_with_limit<S, E>(
    body: S,
    read_timeout: Duration,
    limit: usize,
) -> impl Stream<Item = Result<SseEvent, SseError>> + Send
where
    S: Stream<Item = Result<Bytes, E>> + Send + Unpin + 'static,
    E: std::fmt::Display + Send + 'static,
{
    let state = State {
        body,
        parser: Parser::new(limit),
        ready: VecDeque::new(),
        failed: None,
        finished: false,
    };
    futures::stream::unfold(state, move |mut st| async move {
        loop {
            // Events completed before a failure are delivered first, then the failure.
            if let Some(ev) = st.ready.pop_front() {
                return Some((Ok(ev), st));
            }
            if let Some(e) = st.failed.take() {
                return Some((Err(e), st));
            }
            if st.finished {
                return None;
            }
            match tokio::time::timeout(read_timeout, st.body.next()).await {
                Err(_) => st.fail(SseError::ReadTimeout(read_timeout)),
                Ok(Some(Ok(chunk))) => {
                    if let Err(e) = st.parser.feed(&chunk, &mut st.ready) {
                        st.fail(e);
                    }
                }
                Ok(Some(Err(e))) => st.fail(SseError::Transport(e.to_string())),
                Ok(None) => {
                    st.finished = true;
                    st.ready.extend(st.parser.finish());
                }
            }
        }
    })
}

/// Whether `head`, the first bytes of a body, starts like an event stream: a blank line,
/// a comment, or a `data`, `event`, `id` or `retry` field.
pub fn looks_like_sse(head: &[u8]) -> bool {
    let head = head.strip_prefix(b"\xef\xbb\xbf").unwrap_or(head);
    let end = head
        .iter()
        .position(|&b| b == b'\n' || b == b'\r')
        .unwrap_or(head.len());
    let line = &head[..end];
    let ended = end < head.len();
    let field = line.split(|&b| b == b':').next().unwrap_or(line);
    match line.first() {
        None => ended,
        Some(b':') => true,
        Some(_) => {
            matches!(field, b"data" | b"event" | b"id" | b"retry")
                && (ended || field.len() < line.len())
        }
    }
}

struct State<S> {
    body: S,
    parser: Parser,
    ready: VecDeque<SseEvent>,
    failed: Option<SseError>,
    finished: bool,
}

impl<S> State<S> {
    fn fail(&mut self, e: SseError) {
        self.failed = Some(e);
        self.finished = true;
    }
}

/// Splits bytes into lines (`\n`, `\r\n` or `\r`), and lines into events.
struct Parser {
    /// Bytes not yet consumed: the start of a line whose end has not arrived.
    buf: Vec<u8>,
    /// How much of `buf` is known to hold no line end: the next search starts there.
    scanned: usize,
    /// The last line ended with `\r`: a `\n` at the start of the next chunk belongs to it.
    after_cr: bool,
    /// Still at the very start of the stream (a byte order mark is skipped there).
    at_start: bool,
    event: Event,
}

impl Parser {
    fn new(limit: usize) -> Self {
        Self {
            buf: Vec::new(),
            scanned: 0,
            after_cr: false,
            at_start: true,
            event: Event {
                limit,
                ..Event::default()
            },
        }
    }

    /// Takes one chunk; completed events go to `out`.
    fn feed(&mut self, mut chunk: &[u8], out: &mut VecDeque<SseEvent>) -> Result<(), SseError> {
        if self.after_cr && !chunk.is_empty() {
            self.after_cr = false;
            if chunk[0] == b'\n' {
                chunk = &chunk[1..];
            }
        }
        self.buf.extend_from_slice(chunk);
        if self.at_start {
            const BOM: &[u8] = b"\xef\xbb\xbf";
            if self.buf.len() < BOM.len() && BOM.starts_with(&self.buf) {
                return Ok(()); // perhaps a byte order mark, not whole yet
            }
            if self.buf.starts_with(BOM) {
                self.buf.drain(..BOM.len());
            }
            self.at_start = false;
        }
        // Lines before `start` are consumed; the search resumes where the last one stopped.
        let mut start = 0;
        let mut from = self.scanned;
        while let Some(i) = self.buf[from..]
            .iter()
            .position(|&b| b == b'\n' || b == b'\r')
        {
            let end = from + i;
            let mut next = end + 1;
            if self.buf[end] == b'\r' {
                match self.buf.get(next) {
                    Some(b'\n') => next += 1,
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
            self.event.line(&self.buf[start..end], out)?;
            start = next;
            from = next;
        }
        // The unfinished line moves to the front: only the bytes after the last line end
        // of this chunk, so each byte moves at most once.
        self.buf.drain(..start);
        self.scanned = self.buf.len();
        if self.buf.len() > self.event.limit {
            return Err(too_large(self.event.limit, &self.buf));
        }
        Ok(())
    }

    /// The end of the stream: the event in progress, if its last line was complete.
    fn finish(&mut self) -> Option<SseEvent> {
        if !self.buf.is_empty() {
            return None; // a partial last line: the event is cut
        }
        self.event.dispatch()
    }
}

/// The event being read.
#[derive(Default)]
struct Event {
    name: String,
    data: String,
    /// A `data:` line was seen (an empty one too: `data:` alone is an empty event).
    has_data: bool,
    limit: usize,
}

impl Event {
    fn line(&mut self, line: &[u8], out: &mut VecDeque<SseEvent>) -> Result<(), SseError> {
        if line.len() > self.limit {
            return Err(too_large(self.limit, line));
        }
        let line = std::str::from_utf8(line)
            .map_err(|e| SseError::Invalid(format!("the stream is not UTF-8: {e}")))?;
        if line.is_empty() {
            out.extend(self.dispatch());
            return Ok(());
        }
        if line.starts_with(':') {
            return Ok(()); // a comment (keep-alive)
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => self.name = value.to_string(),
            "data" => {
                if self.data.len() + value.len() + 1 > self.limit {
                    return Err(too_large(self.limit, line.as_bytes()));
                }
                self.data.push_str(value);
                self.data.push('\n');
                self.has_data = true;
            }
            _ => {} // id, retry and unknown fields mean nothing to an API stream
        }
        Ok(())
    }

    /// Ends the event; `None` when it had no data line (SSE drops such events).
    fn dispatch(&mut self) -> Option<SseEvent> {
        let name = std::mem::take(&mut self.name);
        let mut data = std::mem::take(&mut self.data);
        if !std::mem::take(&mut self.has_data) {
            return None;
        }
        data.pop(); // the newline after the last data line
        let name = if name.is_empty() {
            "message".to_string()
        } else {
            name
        };
        Some(SseEvent { name, data })
    }
}

fn too_large(limit: usize, line: &[u8]) -> SseError {
    // The field's value: the error shows it as the answer's data (not `data: data: ...`).
    let line = line
        .strip_prefix(b"data:")
        .map_or(line, |v| v.strip_prefix(b" ").unwrap_or(v));
    let head = &line[..line.len().min(200)];
    SseError::TooLarge {
        limit,
        start: String::from_utf8_lossy(head).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn collect(chunks: &[&'static [u8]]) -> Vec<Result<SseEvent, String>> {
        let items: Vec<Result<Bytes, std::io::Error>> =
            chunks.iter().map(|c| Ok(Bytes::from_static(c))).collect();
        events(futures::stream::iter(items), Duration::from_secs(1))
            .map(|r| r.map_err(|e| format!("{e:?}")))
            .collect()
            .await
    }

    fn ev(name: &str, data: &str) -> Result<SseEvent, String> {
        Ok(SseEvent {
            name: name.into(),
            data: data.into(),
        })
    }

    #[tokio::test]
    async fn final_event_without_blank_line_is_kept() {
        let got = collect(&[b"data: a\n\ndata: [DONE]\n"]).await;
        assert_eq!(got, vec![ev("message", "a"), ev("message", "[DONE]")]);
        let got = collect(&[b"data: a\r\n\r\ndata: [DONE]\r"]).await;
        assert_eq!(got, vec![ev("message", "a"), ev("message", "[DONE]")]);
    }

    #[tokio::test]
    async fn partial_last_line_is_dropped() {
        let got = collect(&[b"data: a\n\ndata: {\"cho"]).await;
        assert_eq!(got, vec![ev("message", "a")]);
    }

    #[tokio::test]
    async fn comments_names_multiline_and_split_utf8() {
        let got = collect(&[
            b": keep-alive\n\nevent: ping\ndata: {}\n\ndata:x\ndata: y\n\ndata: \xc3",
            b"\xa9\n\n",
        ])
        .await;
        assert_eq!(
            got,
            vec![ev("ping", "{}"), ev("message", "x\ny"), ev("message", "é")]
        );
    }

    /// `body` cut into `size`-byte chunks, parsed with a cap of `limit` bytes.
    async fn collect_chunked(
        body: &[u8],
        size: usize,
        limit: usize,
    ) -> Vec<Result<SseEvent, String>> {
        let items: Vec<Result<Bytes, std::io::Error>> = body
            .chunks(size)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        events_with_limit(futures::stream::iter(items), Duration::from_secs(1), limit)
            .map(|r| r.map_err(|e| format!("{e:?}")))
            .collect()
            .await
    }

    #[tokio::test]
    async fn a_multi_megabyte_line_in_small_chunks_is_one_event() {
        let text = "0123456789abcdef".repeat(256 * 1024); // 4 MiB
        let body = format!("data: {text}\r\n\r\ndata: [DONE]\r\n\r\n");
        // 1000-byte chunks: not a divisor of anything above, so the CR LF pairs and the
        // field name are cut in every way along the stream.
        let started = std::time::Instant::now();
        let got = collect_chunked(body.as_bytes(), 1000, MAX_EVENT_BYTES).await;
        let took = started.elapsed();
        assert_eq!(got.len(), 2);
        assert!(
            got[0] == ev("message", &text),
            "the long event came back changed"
        );
        assert_eq!(got[1], ev("message", "[DONE]"));
        eprintln!("4 MiB line in 1000-byte chunks parsed in {took:?}");
    }

    #[tokio::test]
    async fn line_ends_split_between_chunks() {
        for size in 1..8 {
            let got = collect_chunked(
                b"\xef\xbb\xbfdata: a\r\n\r\ndata: b\r\rdata: c\n\n",
                size,
                64,
            )
            .await;
            assert_eq!(
                got,
                vec![ev("message", "a"), ev("message", "b"), ev("message", "c")],
                "chunks of {size}"
            );
        }
    }

    #[tokio::test]
    async fn a_line_over_the_cap_is_an_error_after_the_events_before_it() {
        let long = format!("data: {}", "x".repeat(100));
        let body = format!("data: ok\n\n{long}\n\ndata: never\n\n");
        // The over-long line arrives whole, then in pieces that never show its end.
        for size in [body.len(), 7] {
            let got = collect_chunked(body.as_bytes(), size, 64).await;
            assert_eq!(got.len(), 2, "{got:?}");
            assert_eq!(got[0], ev("message", "ok"));
            let err = got[1].as_ref().unwrap_err();
            assert!(
                err.starts_with("TooLarge { limit: 64, start: \"xxx"),
                "chunks of {size}: {err}"
            );
        }
        // At the cap exactly: fine.
        let line = format!("data: {}", "y".repeat(58));
        let got = collect_chunked(format!("{line}\n\n").as_bytes(), 5, 64).await;
        assert_eq!(got, vec![ev("message", &"y".repeat(58))]);
    }

    #[tokio::test]
    async fn an_event_over_the_cap_is_an_error() {
        let body = "data: 0123456789\n".repeat(10) + "\n";
        let got = collect_chunked(body.as_bytes(), 16, 64).await;
        assert!(
            matches!(got.as_slice(), [Err(e)] if e.starts_with("TooLarge { limit: 64")),
            "{got:?}"
        );
    }

    #[test]
    fn what_looks_like_an_event_stream() {
        for head in [
            &b"data: {}\n"[..],
            b"data:{\"choices\"",
            b"event: message_start\r\n",
            b": keep-alive\n",
            b"\n\ndata: x",
            b"\xef\xbb\xbfid: 1\n",
            b"data\n",
        ] {
            assert!(looks_like_sse(head), "{}", String::from_utf8_lossy(head));
        }
        for head in [
            &b""[..],
            b"OK",
            b"Service is up.\n",
            b"database: ready\n",
            b"data",
            b"<html>",
            b"{\"error\": \"x\"}",
        ] {
            assert!(!looks_like_sse(head), "{}", String::from_utf8_lossy(head));
        }
    }

    #[tokio::test]
    async fn idle_gap_is_a_read_timeout() {
        let slow = futures::stream::once(async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok::<_, std::io::Error>(Bytes::from_static(b"data: late\n\n"))
        });
        let got: Vec<_> = events(Box::pin(slow), Duration::from_millis(50))
            .collect()
            .await;
        assert!(
            matches!(got.as_slice(), [Err(SseError::ReadTimeout(_))]),
            "{got:?}"
        );
    }
}
