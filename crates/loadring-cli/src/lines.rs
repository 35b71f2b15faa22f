//! Reading input lines of bounded length, as bytes.
//!
//! `place` and `shell` read their input with this instead of
//! `BufRead::read_line`, which holds a whole line however long it is and
//! insists on UTF-8: keys are bytes (memcached keys, binary ids), and a
//! stream without a newline must not grow one line until memory runs out.

use std::io::{self, BufRead};

/// The longest input line `place` and `shell` accept, in bytes, not counting
/// its `\n`.
pub const MAX_LINE: usize = 64 * 1024;

/// What [`read_line`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// `line` holds the bytes before the next `\n` (or before the end of the
    /// input); the `\n` is consumed.
    Complete,
    /// The line is longer than the limit: `line` holds its first bytes and
    /// the rest is still unread (see [`skip_line`]).
    TooLong,
    /// The input is over.
    End,
}

/// Reads the next line into `line` (cleared first), holding at most `max`
/// bytes of it.
pub fn read_line(input: &mut impl BufRead, line: &mut Vec<u8>, max: usize) -> io::Result<Line> {
    line.clear();
    let mut started = false;
    loop {
        let available = match input.fill_buf() {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(if started { Line::Complete } else { Line::End });
        }
        started = true;
        let (taken, newline) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (available.len(), false),
        };
        if line.len() + taken > max {
            let room = max - line.len();
            line.extend_from_slice(&available[..room]);
            input.consume(room);
            return Ok(Line::TooLong);
        }
        line.extend_from_slice(&available[..taken]);
        input.consume(taken + usize::from(newline));
        if newline {
            return Ok(Line::Complete);
        }
    }
}

/// Consumes the rest of the current line and its `\n`, holding none of it.
pub fn skip_line(input: &mut impl BufRead) -> io::Result<()> {
    loop {
        let available = match input.fill_buf() {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(());
        }
        match available.iter().position(|&b| b == b'\n') {
            Some(i) => {
                input.consume(i + 1);
                return Ok(());
            }
            None => {
                let n = available.len();
                input.consume(n);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], max: usize) -> Vec<(Line, Vec<u8>)> {
        // A tiny buffer so that lines span several refills.
        let mut reader = io::BufReader::with_capacity(3, input);
        let mut out = Vec::new();
        let mut line = Vec::new();
        loop {
            match read_line(&mut reader, &mut line, max).unwrap() {
                Line::End => return out,
                Line::TooLong => {
                    out.push((Line::TooLong, line.clone()));
                    skip_line(&mut reader).unwrap();
                }
                Line::Complete => out.push((Line::Complete, line.clone())),
            }
        }
    }

    #[test]
    fn lines_are_the_bytes_before_each_newline() {
        let got = lines(b"ab\n\ncd\xff\r\nlast", 5);
        let want: Vec<(Line, Vec<u8>)> = vec![
            (Line::Complete, b"ab".to_vec()),
            (Line::Complete, b"".to_vec()),
            (Line::Complete, b"cd\xff\r".to_vec()),
            (Line::Complete, b"last".to_vec()),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn a_line_over_the_limit_is_cut_and_skipped() {
        let got = lines(b"12345\n123456\nok", 5);
        let want: Vec<(Line, Vec<u8>)> = vec![
            (Line::Complete, b"12345".to_vec()),
            (Line::TooLong, b"12345".to_vec()),
            (Line::Complete, b"ok".to_vec()),
        ];
        assert_eq!(got, want);
    }
}
