//! JSON-RPC 1.0 over a byte stream (RFC 7047 §4): messages are JSON
//! objects sent back to back with no framing.
//!
//! [`Framer`] finds where each object ends by tracking brace depth outside
//! strings (so each byte is scanned once however the stream is split, and
//! with `memchr` from one quote, backslash or brace to the next),
//! then parses that slice. A message larger than the limit is an error
//! before it is buffered whole. Nothing here panics on any input (fuzzed by
//! `fuzz/fuzz_targets/framer.rs`).

use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::datum::short;
use crate::Error;

/// The default bound on one message: 64 MiB.
pub const DEFAULT_MAX_MESSAGE: usize = 64 << 20;

/// Splits a byte stream into JSON objects.
#[derive(Debug)]
pub struct Framer {
    buf: Vec<u8>,
    /// Bytes of `buf` already returned as messages or skipped whitespace.
    consumed: usize,
    /// Bytes of `buf` scanned so far.
    scanned: usize,
    /// Start of the object being scanned, if any.
    start: Option<usize>,
    depth: usize,
    in_string: bool,
    escaped: bool,
    limit: usize,
}

impl Framer {
    /// A framer that fails on messages longer than `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Framer {
            buf: Vec::new(),
            consumed: 0,
            scanned: 0,
            start: None,
            depth: 0,
            in_string: false,
            escaped: false,
            limit,
        }
    }

    /// The buffer to read more bytes into (append only), after dropping
    /// what was consumed. Capacity a large message needed is given back once
    /// it is consumed (down to [`Self::KEPT_CAPACITY`]): a database's initial
    /// update may be tens of MB, and would otherwise stay resident for the
    /// connection's life.
    pub fn buffer(&mut self) -> &mut Vec<u8> {
        if self.consumed > 0 {
            self.buf.drain(..self.consumed);
            self.scanned -= self.consumed;
            self.start = self.start.map(|s| s - self.consumed);
            self.consumed = 0;
            if self.buf.capacity() > Self::KEPT_CAPACITY {
                self.buf.shrink_to(Self::KEPT_CAPACITY.max(self.buf.len()));
            }
        }
        &mut self.buf
    }

    /// The most buffer capacity kept beyond what unconsumed bytes need (bytes).
    pub const KEPT_CAPACITY: usize = 1 << 20;

    /// Appends bytes (for tests and fuzzing).
    pub fn push(&mut self, bytes: &[u8]) {
        self.buffer().extend_from_slice(bytes);
    }

    /// The next complete message, `Ok(None)` when more bytes are needed.
    ///
    /// # Errors
    ///
    /// [`Error::Protocol`] for anything but an object at the top level or an
    /// object that is not valid JSON; [`Error::MessageTooLarge`]. After an
    /// error the stream cannot be resynchronised: drop the connection.
    pub fn next_message(&mut self) -> Result<Option<Value>, Error> {
        let Some(frame) = self.next_frame()? else {
            return Ok(None);
        };
        serde_json::from_slice(frame)
            .map(Some)
            .map_err(|e| Error::Protocol(format!("invalid JSON: {e}")))
    }

    /// The next complete message's bytes (one JSON object, not yet checked
    /// beyond its braces and strings), `Ok(None)` when more bytes are needed.
    ///
    /// # Errors
    ///
    /// As [`next_message`](Self::next_message), but for invalid JSON inside
    /// the object.
    pub fn next_frame(&mut self) -> Result<Option<&[u8]>, Error> {
        while self.scanned < self.buf.len() {
            let b = self.buf[self.scanned];
            let Some(start) = self.start else {
                match b {
                    b' ' | b'\t' | b'\r' | b'\n' => self.consumed = self.scanned + 1,
                    b'{' => {
                        self.start = Some(self.scanned);
                        self.depth = 1;
                    }
                    _ => {
                        return Err(Error::Protocol(format!(
                            "expected a JSON object, found byte {b:#04x}"
                        )))
                    }
                }
                self.scanned += 1;
                continue;
            };
            // Jump to the next byte that matters: a quote or backslash in a
            // string, a quote or brace outside (most of a large update is text).
            let rest = &self.buf[self.scanned..];
            let found = if self.escaped {
                self.escaped = false;
                self.scanned += 1;
                continue;
            } else if self.in_string {
                memchr::memchr2(b'"', b'\\', rest)
            } else {
                memchr::memchr3(b'"', b'{', b'}', rest)
            };
            let Some(at) = found else {
                self.scanned = self.buf.len();
                break;
            };
            self.scanned += at + 1;
            match (self.in_string, rest[at]) {
                (true, b'\\') => self.escaped = true,
                (_, b'"') => self.in_string = !self.in_string,
                (_, b'{') => self.depth += 1,
                _ => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        self.consumed = self.scanned;
                        self.start = None;
                        return Ok(Some(&self.buf[start..self.scanned]));
                    }
                }
            }
            if self.scanned - start > self.limit {
                return Err(Error::MessageTooLarge { limit: self.limit });
            }
        }
        if let Some(start) = self.start {
            if self.scanned - start > self.limit {
                return Err(Error::MessageTooLarge { limit: self.limit });
            }
        }
        Ok(None)
    }
}

/// A JSON-RPC 1.0 message (RFC 7047 §4).
#[derive(Clone, Debug)]
pub enum Message {
    /// A request: `id` is not null.
    Request {
        /// The method.
        method: String,
        /// The params.
        params: Value,
        /// The id to answer with.
        id: Value,
    },
    /// A notification: `id` is null or absent.
    Notification {
        /// The method, e.g. `update3`.
        method: String,
        /// The params.
        params: Value,
    },
    /// An update notification (`update`, `update2`, `update3`) with its
    /// params as text, for the client to decode straight into rows (a
    /// database's first update may be tens of MB).
    Updates {
        /// The method.
        method: String,
        /// The params, as received.
        params: Box<RawValue>,
    },
    /// A response to one of our requests.
    Response {
        /// The request's id.
        id: Value,
        /// The result (null on error).
        result: Value,
        /// The error (null on success).
        error: Value,
    },
}

/// What [`Message::from_frame`] reads of a message before deciding how to parse
/// it: update notifications keep their params as text.
#[derive(serde::Deserialize)]
struct Head<'a> {
    #[serde(borrow, default)]
    method: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    id: Option<serde::de::IgnoredAny>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
}

impl Message {
    /// Classifies one framed message ([`Framer::next_frame`]): an update
    /// notification becomes [`Message::Updates`], anything else is parsed
    /// whole as by [`from_json`](Self::from_json).
    ///
    /// # Errors
    ///
    /// [`Error::Protocol`] for invalid JSON and as `from_json`.
    pub fn from_frame(frame: &[u8]) -> Result<Self, Error> {
        let invalid = |e: &dyn std::fmt::Display| Error::Protocol(format!("invalid JSON: {e}"));
        let text = std::str::from_utf8(frame).map_err(|e| invalid(&e))?;
        if let Ok(Head {
            method: Some(method),
            id: None,
            params: Some(params),
        }) = serde_json::from_str::<Head<'_>>(text)
        {
            if matches!(&*method, "update" | "update2" | "update3") {
                return Ok(Message::Updates {
                    method: method.into_owned(),
                    params: params.to_owned(),
                });
            }
        }
        Self::from_json(serde_json::from_str(text).map_err(|e| invalid(&e))?)
    }

    /// Classifies a JSON object.
    ///
    /// # Errors
    ///
    /// [`Error::Protocol`] when it is neither a request, a notification nor
    /// a response.
    pub fn from_json(v: Value) -> Result<Self, Error> {
        let Value::Object(mut o) = v else {
            return Err(Error::Protocol("a message is not an object".into()));
        };
        let id = o.remove("id").unwrap_or(Value::Null);
        if let Some(m) = o.get("method") {
            let method = m
                .as_str()
                .ok_or_else(|| Error::Protocol(format!("method {} is not a string", short(m))))?
                .to_owned();
            let params = o.remove("params").unwrap_or(Value::Null);
            return Ok(if id.is_null() {
                Message::Notification { method, params }
            } else {
                Message::Request { method, params, id }
            });
        }
        if o.contains_key("result") || o.contains_key("error") {
            return Ok(Message::Response {
                id,
                result: o.remove("result").unwrap_or(Value::Null),
                error: o.remove("error").unwrap_or(Value::Null),
            });
        }
        Err(Error::Protocol(format!(
            "a message with neither method nor result: {}",
            short(&Value::Object(o))
        )))
    }
}

/// Encodes a request.
pub(crate) fn request(method: &str, params: Value, id: u64) -> Vec<u8> {
    json!({"method": method, "params": params, "id": id})
        .to_string()
        .into_bytes()
}

/// Encodes a response.
pub(crate) fn response(result: Value, id: Value) -> Vec<u8> {
    json!({"result": result, "error": null, "id": id})
        .to_string()
        .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A message of 4 MB is framed whole; once it is consumed the buffer
    /// keeps at most `KEPT_CAPACITY`.
    #[test]
    fn a_large_message_does_not_keep_its_buffer() {
        let mut f = Framer::new(16 << 20);
        let big = format!("{{\"s\":\"{}\"}}", "x".repeat(4 << 20));
        f.push(big.as_bytes());
        assert!(f.buffer().capacity() >= big.len());
        let v = f.next_message().unwrap().expect("one message");
        assert_eq!(v["s"].as_str().map(str::len), Some(4 << 20));
        f.push(b"{\"a\":1}");
        assert!(f.buffer().capacity() <= Framer::KEPT_CAPACITY);
        assert_eq!(f.next_message().unwrap(), Some(serde_json::json!({"a": 1})));
    }

    #[test]
    fn splits_concatenated_objects_however_they_arrive() {
        let stream = br#" {"a":"}{\"","b":{"c":[1,{}]}}
{"id":1,"result":[],"error":null}{"x":"\\"}"#;
        for chunk in 1..stream.len() {
            let mut f = Framer::new(1024);
            let mut got = vec![];
            for c in stream.chunks(chunk) {
                f.push(c);
                while let Some(m) = f.next_message().unwrap() {
                    got.push(m);
                }
            }
            assert_eq!(
                got,
                vec![
                    json!({"a": "}{\"", "b": {"c": [1, {}]}}),
                    json!({"id": 1, "result": [], "error": null}),
                    json!({"x": "\\"}),
                ],
                "chunk {chunk}"
            );
        }
    }

    #[test]
    fn errors() {
        let mut f = Framer::new(16);
        f.push(b"[1]");
        assert!(matches!(f.next_message(), Err(Error::Protocol(_))));
        let mut f = Framer::new(16);
        f.push(br#"{"a": "0123456789abcdef"#);
        assert!(matches!(
            f.next_message(),
            Err(Error::MessageTooLarge { limit: 16 })
        ));
        let mut f = Framer::new(16);
        f.push(br#"{"a": x}"#);
        assert!(matches!(f.next_message(), Err(Error::Protocol(_))));
    }

    #[test]
    fn classify() {
        let m = Message::from_json(json!({"method": "echo", "params": [], "id": "echo"})).unwrap();
        assert!(matches!(m, Message::Request { .. }));
        let m = Message::from_json(json!({"method": "update3", "params": [], "id": null})).unwrap();
        assert!(matches!(m, Message::Notification { .. }));
        let m = Message::from_json(json!({"result": {}, "error": null, "id": 3})).unwrap();
        assert!(matches!(m, Message::Response { .. }));
        assert!(Message::from_json(json!({"id": 3})).is_err());
        assert!(Message::from_json(json!([])).is_err());
    }
}
