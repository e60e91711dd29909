//! SSE framing on top of eventsource-stream, with an idle read timeout on the bytes and
//! a repair for its one gap: a final event whose lines are complete but which is not
//! followed by a blank line is dropped by eventsource-stream, so a terminating blank line
//! is added at end of stream when the last line was complete. A partial last line stays
//! dropped: the caller sees no end marker and reports truncation.

use std::time::Duration;

use bytes::Bytes;
use eventsource_stream::{EventStreamError, Eventsource};
use futures::{Stream, StreamExt};

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
    /// The bytes are not UTF-8 or not SSE.
    Invalid(String),
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
    let state = Body {
        inner: body,
        last: None,
        finished: false,
    };
    let bytes = futures::stream::unfold(state, move |mut st| async move {
        if st.finished {
            return None;
        }
        match tokio::time::timeout(read_timeout, st.inner.next()).await {
            Err(_) => {
                st.finished = true;
                Some((Err(SseError::ReadTimeout(read_timeout)), st))
            }
            Ok(Some(Ok(chunk))) => {
                if let Some(&b) = chunk.last() {
                    st.last = Some(b);
                }
                Some((Ok(chunk), st))
            }
            Ok(Some(Err(e))) => {
                st.finished = true;
                Some((Err(SseError::Transport(e.to_string())), st))
            }
            Ok(None) => {
                st.finished = true;
                // Terminate a final event whose last line is complete.
                let tail: &'static [u8] = match st.last {
                    Some(b'\n') => b"\n",
                    Some(b'\r') => b"\r\n",
                    _ => return None,
                };
                Some((Ok(Bytes::from_static(tail)), st))
            }
        }
    });
    bytes.eventsource().map(|item| match item {
        Ok(ev) => Ok(SseEvent {
            name: ev.event,
            data: ev.data,
        }),
        Err(EventStreamError::Transport(e)) => Err(e),
        Err(EventStreamError::Utf8(e)) => {
            Err(SseError::Invalid(format!("the stream is not UTF-8: {e}")))
        }
        Err(EventStreamError::Parser(e)) => {
            Err(SseError::Invalid(format!("the stream is not SSE: {e}")))
        }
    })
}

struct Body<S> {
    inner: S,
    last: Option<u8>,
    finished: bool,
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
