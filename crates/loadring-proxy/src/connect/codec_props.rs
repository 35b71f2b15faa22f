//! Property tests of the upstream HTTP/1.1 codec ([`super::decode`] and
//! [`super::response`]): what the hand-written tables check on a few
//! inputs, held on generated ones, cut anywhere and mangled, since a
//! backend's bytes arrive in whatever reads the network makes of them.
//! The fields and the mangling are shared with the client side's tests
//! (`downstream/head_props.rs`).

use bytes::BytesMut;
use http::header::{HeaderName, HeaderValue};
use http::{HeaderMap, Version};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::{select, Index};

use super::decode::{Decoder, Framing, Step, MAX_LINE};
use super::fields::MAX_HEAD;
use super::response::{body_and_reuse, parse_head};

/// A header field as sent: name, whitespace, value, whitespace.
#[derive(Debug, Clone)]
pub(crate) struct Field {
    pub(crate) name: String,
    pub(crate) before: &'static str,
    pub(crate) value: Vec<u8>,
    pub(crate) after: &'static str,
}

/// A field name (an RFC 9110 token), often one of a few, for duplicates.
fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        select(vec!["x-a", "Set-Cookie", "vary", "X-Dup"]).prop_map(str::to_string),
        "[a-zA-Z0-9!#$%&'*+.^_`|~-]{1,20}",
    ]
}

/// A field value: visible bytes (obs-text too), spaces and tabs only
/// inside it.
fn value() -> impl Strategy<Value = Vec<u8>> {
    let visible = || prop_oneof![0x21u8..=0x7e, 0x80u8..=0xff];
    let inner = prop_oneof![3 => visible(), 1 => select(vec![b' ', b'\t'])];
    prop_oneof![
        Just(Vec::new()),
        visible().prop_map(|b| vec![b]),
        (visible(), vec(inner, 0..30), visible()).prop_map(|(first, mut mid, last)| {
            mid.insert(0, first);
            mid.push(last);
            mid
        }),
    ]
}

pub(crate) fn field() -> impl Strategy<Value = Field> {
    let ows = || select(vec!["", " ", "\t", " \t "]);
    (name(), ows(), value(), ows()).prop_map(|(name, before, value, after)| Field {
        name,
        before,
        value,
        after,
    })
}

pub(crate) fn encode_fields(out: &mut Vec<u8>, fields: &[Field]) {
    for f in fields {
        out.extend_from_slice(f.name.as_bytes());
        out.push(b':');
        out.extend_from_slice(f.before.as_bytes());
        out.extend_from_slice(&f.value);
        out.extend_from_slice(f.after.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// The map the fields should parse to, in their order.
pub(crate) fn map_of(fields: &[Field]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for f in fields {
        map.append(
            HeaderName::from_bytes(f.name.as_bytes()).expect("a token"),
            HeaderValue::from_bytes(&f.value).expect("a field value"),
        );
    }
    map
}

/// Chunk extensions: `;name` or `;name=value`, value a token or quoted,
/// whitespace before the `;`.
fn extensions() -> impl Strategy<Value = String> {
    let one = (
        "[ \t]{0,2}",
        "[a-z0-9!#$%&'*+.^_`|~-]{1,8}",
        prop::option::of("[a-zA-Z0-9]{1,8}|\"[a-z ;=]{0,8}\""),
    )
        .prop_map(|(ws, name, value)| match value {
            Some(v) => format!("{ws};{name}={v}"),
            None => format!("{ws};{name}"),
        });
    // None half the time: the usual last chunk is a bare `0`.
    prop_oneof![Just(String::new()), vec(one, 1..3).prop_map(|v| v.concat())]
}

/// A body as the backend frames it, and what it should decode to.
#[derive(Debug, Clone)]
struct Body {
    framing: Framing,
    wire: Vec<u8>,
    data: Vec<u8>,
    trailers: Option<HeaderMap>,
}

fn length_body() -> impl Strategy<Value = Body> {
    vec(any::<u8>(), 0..600).prop_map(|data| Body {
        framing: Framing::Length(data.len() as u64),
        wire: data.clone(),
        data,
        trailers: None,
    })
}

fn chunked_body() -> impl Strategy<Value = Body> {
    // A chunk: its data, leading zeros and case of its size, extensions.
    let chunk = (
        vec(any::<u8>(), 1..300),
        0..3usize,
        any::<bool>(),
        extensions(),
    );
    let last = (prop_oneof![3 => Just(0), 1 => 1..3usize], extensions());
    let trailers = prop_oneof![Just(Vec::new()), vec(field(), 1..5)];
    (vec(chunk, 0..6), last, trailers).prop_map(|(chunks, (zeros, last), fields)| {
        let mut wire = Vec::new();
        let mut data = Vec::new();
        for (bytes, zeros, upper, ext) in chunks {
            let size = if upper {
                format!("{:X}", bytes.len())
            } else {
                format!("{:x}", bytes.len())
            };
            wire.extend_from_slice(format!("{}{size}{ext}\r\n", "0".repeat(zeros)).as_bytes());
            wire.extend_from_slice(&bytes);
            wire.extend_from_slice(b"\r\n");
            data.extend_from_slice(&bytes);
        }
        wire.extend_from_slice(format!("{}0{last}\r\n", "0".repeat(zeros)).as_bytes());
        encode_fields(&mut wire, &fields);
        Body {
            framing: Framing::Chunked,
            wire,
            data,
            trailers: (!fields.is_empty()).then(|| map_of(&fields)),
        }
    })
}

fn body() -> impl Strategy<Value = Body> {
    prop_oneof![length_body(), chunked_body()]
}

/// `input` cut at the given points (empty pieces too), or a byte at a
/// time.
fn split<'a>(input: &'a [u8], cuts: &[Index], bytewise: bool) -> Vec<&'a [u8]> {
    if bytewise {
        return input.chunks(1).collect();
    }
    let mut at: Vec<usize> = cuts.iter().map(|i| i.index(input.len() + 1)).collect();
    at.sort_unstable();
    let mut pieces = Vec::with_capacity(at.len() + 1);
    let mut from = 0;
    for to in at {
        pieces.push(&input[from..to]);
        from = to;
    }
    pieces.push(&input[from..]);
    pieces
}

/// What a decoder made of the pieces, as the body of a response reads it
/// (body.rs): steps until more bytes are needed, then a read, and EOF
/// after the last piece.
#[derive(Debug, Default)]
struct Outcome {
    data: Vec<u8>,
    trailers: Option<HeaderMap>,
    ends: usize,
    error: Option<String>,
    left: BytesMut,
}

fn drive(framing: Framing, pieces: &[&[u8]]) -> Result<Outcome, TestCaseError> {
    let mut decoder = Decoder::new(framing);
    let mut buf = BytesMut::new();
    let mut out = Outcome::default();
    for piece in pieces {
        buf.extend_from_slice(piece);
        if out.ends == 0 && out.error.is_none() {
            steps(&mut decoder, &mut buf, &mut out)?;
        }
    }
    if out.ends == 0 && out.error.is_none() {
        match decoder.at_eof() {
            Ok(Step::End) => out.ends += 1,
            Ok(other) => return Err(TestCaseError::fail(format!("{other:?} at EOF"))),
            Err(e) => out.error = Some(e.to_string()),
        }
    } else if out.ends == 1 {
        // Ended, the decoder stays so and leaves what follows alone.
        let before = buf.clone();
        prop_assert!(matches!(decoder.step(&mut buf), Ok(Step::End)));
        prop_assert_eq!(&buf, &before);
    }
    out.left = buf;
    Ok(out)
}

fn steps(
    decoder: &mut Decoder,
    buf: &mut BytesMut,
    out: &mut Outcome,
) -> Result<(), TestCaseError> {
    loop {
        let before = buf.len();
        match decoder.step(buf) {
            Err(e) => {
                out.error = Some(e.to_string());
                return Ok(());
            }
            Ok(Step::More) => {
                prop_assert!(
                    buf.len() <= decoder.held_limit(),
                    "more bytes wanted with {} held ({:?})",
                    buf.len(),
                    decoder
                );
                return Ok(());
            }
            Ok(Step::Data(d)) => {
                prop_assert!(!d.is_empty(), "empty data");
                prop_assert!(buf.len() + d.len() <= before, "data not taken off");
                out.data.extend_from_slice(&d);
                decoder.end_if_buffered(buf);
            }
            Ok(Step::Trailers(t)) => {
                prop_assert!(out.trailers.is_none(), "trailers twice");
                // The fewest bytes these fields take on the wire.
                let wire: usize = 2 + t
                    .iter()
                    .map(|(k, v)| k.as_str().len() + 1 + v.len() + 2)
                    .sum::<usize>();
                prop_assert!(wire <= MAX_HEAD, "trailers of {} bytes", wire);
                out.trailers = Some(t);
            }
            Ok(Step::End) => {
                out.ends += 1;
                return Ok(());
            }
        }
    }
}

/// A byte flipped, inserted or deleted, a few times.
pub(crate) fn mutate(mut wire: Vec<u8>, edits: &[(u8, Index, u8)]) -> Vec<u8> {
    for &(kind, at, byte) in edits {
        match kind % 3 {
            0 if !wire.is_empty() => {
                let i = at.index(wire.len());
                wire[i] ^= byte.max(1);
            }
            1 => wire.insert(at.index(wire.len() + 1), byte),
            _ if !wire.is_empty() => {
                wire.remove(at.index(wire.len()));
            }
            _ => {}
        }
    }
    wire
}

pub(crate) fn edits() -> impl Strategy<Value = Vec<(u8, Index, u8)>> {
    vec((any::<u8>(), any::<Index>(), any::<u8>()), 1..4)
}

/// Bytes no backend should send: random ones, pieces of the syntax, and
/// runs of one byte near the limits.
fn hostile() -> impl Strategy<Value = Vec<u8>> {
    let run_len = prop_oneof![
        0..100usize,
        (MAX_LINE - 3)..(MAX_LINE + 3),
        (MAX_HEAD - 40)..(MAX_HEAD + 3),
    ];
    let segment = prop_oneof![
        vec(any::<u8>(), 0..32),
        select(vec![
            &b"0\r\n"[..],
            b"\r\n",
            b"5\r\n",
            b"x-a: 1\r\n",
            b";e=1",
            b"\n",
            b"\r",
            b"ffffffffffffffffff",
            b"HTTP/1.1 200 OK\r\n",
        ])
        .prop_map(<[u8]>::to_vec),
        (
            select(vec![b'0', b'a', b' ', b';', b'x', b':', b'\t']),
            run_len
        )
            .prop_map(|(b, n)| vec![b; n]),
        // Chunk-size lines, often of too many digits.
        "[0-9a-fA-F]{1,24}[ \t;a-z=]{0,4}\r\n".prop_map(String::into_bytes),
    ];
    vec(segment, 0..6).prop_map(|s| s.concat())
}

/// A hostile body, often after a valid start (in a chunk, at the
/// trailers), and sometimes with an end.
fn hostile_body() -> impl Strategy<Value = Vec<u8>> {
    let start = prop_oneof![
        1 => Just(Vec::new()),
        2 => Just(b"0\r\n".to_vec()),
        2 => Just(b"0\r\nx-a: ".to_vec()),
        1 => Just(b"3;e\r\nabc\r\n".to_vec()),
        2 => (body(), any::<Index>()).prop_map(|(b, at)| b.wire[..at.index(b.wire.len() + 1)].to_vec()),
    ];
    let rest = prop_oneof![hostile(), endless_line()];
    let end = select(vec![&b""[..], b"\r\n\r\n"]);
    (start, rest, end).prop_map(|(start, rest, end)| [&start[..], &rest, end].concat())
}

/// A line that does not end before the limits (or just does).
fn endless_line() -> impl Strategy<Value = Vec<u8>> {
    let len = prop_oneof![
        (MAX_LINE - 3)..(MAX_LINE + 3),
        (MAX_HEAD - 40)..(MAX_HEAD + 40),
    ];
    (select(vec![b'0', b'a', b'x', b' ', b';']), len).prop_map(|(b, n)| vec![b; n])
}

/// Every framing with a body.
fn framings(length: u64) -> [Framing; 4] {
    [
        Framing::Chunked,
        Framing::Eof,
        Framing::Length(length),
        Framing::Length(u64::MAX),
    ]
}

/// A hostile body's decoding: never a panic (the driver's steps would
/// unwind), never more bytes held than the limits, never more data than
/// came or than framed.
fn check_hostile(framing: Framing, input: &[u8], cuts: &[Index]) -> Result<(), TestCaseError> {
    // A byte at a time only when short: each step rescans what is held.
    let out = drive(framing, &split(input, cuts, false))?;
    prop_assert!(out.ends <= 1);
    prop_assert!(out.data.len() <= input.len());
    if let Framing::Length(n) = framing {
        prop_assert!(out.data.len() as u64 <= n);
    }
    if input.len() < 512 {
        drive(framing, &split(input, cuts, true))?;
    }
    Ok(())
}

/// A head taken off `input`, checked against its limits whatever it is.
fn check_head(input: &[u8]) -> Result<(), TestCaseError> {
    let mut buf = BytesMut::from(input);
    match parse_head(&mut buf) {
        Ok(None) => {
            prop_assert!(input.len() <= MAX_HEAD, "{} bytes held", input.len());
            prop_assert_eq!(&buf[..], input, "a partial head is left whole");
        }
        Ok(Some(parts)) => {
            prop_assert!(input.len() - buf.len() <= MAX_HEAD);
            prop_assert!(input.ends_with(&buf));
            for to_head in [false, true] {
                let _ = body_and_reuse(to_head, &parts);
            }
        }
        Err(_) => {}
    }
    Ok(())
}

/// A response head as a backend sends it.
#[derive(Debug, Clone)]
struct Head {
    status: u16,
    http10: bool,
    reason: String,
    fields: Vec<Field>,
}

impl Head {
    fn wire(&self) -> Vec<u8> {
        let minor = if self.http10 { 0 } else { 1 };
        let mut wire = format!("HTTP/1.{minor} {} {}\r\n", self.status, self.reason).into_bytes();
        encode_fields(&mut wire, &self.fields);
        wire
    }
}

fn head() -> impl Strategy<Value = Head> {
    (
        100u16..=599,
        any::<bool>(),
        "[ -~]{0,20}",
        vec(field(), 0..=20),
    )
        .prop_map(|(status, http10, reason, fields)| Head {
            status,
            http10,
            reason,
            fields,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// However a framed body is cut into reads, it decodes to its data,
    /// its trailers and one end, and what follows it (the next response
    /// on the connection) stays in the buffer untouched.
    #[test]
    fn a_body_cut_anywhere_decodes_the_same(
        body in body(),
        next in vec(any::<u8>(), 0..40),
        cuts in vec(any::<Index>(), 0..20),
        bytewise in prop::bool::weighted(0.2),
    ) {
        let mut input = body.wire.clone();
        input.extend_from_slice(&next);
        let out = drive(body.framing, &split(&input, &cuts, bytewise))?;
        prop_assert_eq!(out.error, None);
        prop_assert_eq!(out.ends, 1);
        prop_assert_eq!(out.data, body.data);
        prop_assert_eq!(out.trailers, body.trailers);
        prop_assert_eq!(&out.left[..], &next[..]);
    }

    /// Read to EOF, a body is every byte that came, however cut.
    #[test]
    fn a_body_read_to_eof_is_every_byte(
        input in vec(any::<u8>(), 0..600),
        cuts in vec(any::<Index>(), 0..20),
    ) {
        let out = drive(Framing::Eof, &split(&input, &cuts, false))?;
        prop_assert_eq!(out.error, None);
        prop_assert_eq!(out.ends, 1);
        prop_assert_eq!(out.data, input);
    }

    #[test]
    fn hostile_bodies_are_refused_within_the_limits(
        length in 0u64..1000,
        input in hostile_body(),
        cuts in vec(any::<Index>(), 0..8),
    ) {
        for framing in framings(length) {
            check_hostile(framing, &input, &cuts)?;
        }
    }

    #[test]
    fn mangled_bodies_are_refused_within_the_limits(
        body in body(),
        edits in edits(),
        cuts in vec(any::<Index>(), 0..8),
    ) {
        let input = mutate(body.wire, &edits);
        check_hostile(body.framing, &input, &cuts)?;
    }

    #[test]
    fn hostile_heads_are_refused_within_the_limits(
        start in select(vec![&b""[..], b"HTTP/1.1 200 OK\r\n", b"HTTP/1.1 200 OK\r\nx-a: "]),
        rest in prop_oneof![hostile(), endless_line()],
        end in select(vec![&b""[..], b"\r\n\r\n"]),
        cuts in vec(any::<Index>(), 0..4),
    ) {
        let input = [start, &rest, end].concat();
        check_head(&input)?;
        for cut in &cuts {
            check_head(&input[..cut.index(input.len() + 1)])?;
        }
    }

    #[test]
    fn mangled_heads_are_refused_within_the_limits(head in head(), edits in edits()) {
        check_head(&mutate(head.wire(), &edits))?;
    }

    /// A head parses to what was sent, and only once whole: what follows
    /// it is left in the buffer.
    #[test]
    fn a_head_parses_to_what_was_sent(
        head in head(),
        next in vec(any::<u8>(), 0..40),
        cuts in vec(any::<Index>(), 0..8),
    ) {
        let wire = head.wire();
        for cut in &cuts {
            let prefix = &wire[..cut.index(wire.len())];
            let mut buf = BytesMut::from(prefix);
            prop_assert!(matches!(parse_head(&mut buf), Ok(None)), "{:?}", prefix);
            prop_assert_eq!(&buf[..], prefix);
        }
        let mut buf = BytesMut::from(&wire[..]);
        buf.extend_from_slice(&next);
        let parts = parse_head(&mut buf)
            .map_err(|e| TestCaseError::fail(e.to_string()))?
            .ok_or_else(|| TestCaseError::fail("partial"))?
            .into_parts()
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(parts.status.as_u16(), head.status);
        let version = if head.http10 { Version::HTTP_10 } else { Version::HTTP_11 };
        prop_assert_eq!(parts.version, version);
        prop_assert_eq!(parts.headers.len(), head.fields.len());
        prop_assert_eq!(parts.headers, map_of(&head.fields));
        prop_assert_eq!(&buf[..], &next[..]);
    }
}
