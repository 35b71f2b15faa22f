//! Files read whole (an endpoints file, a config file, TLS certificates and
//! keys), read with a bound: a path that names a device (`/dev/zero`), a
//! log file or any file far larger than such a file can be is refused with
//! one line rather than read until memory runs out.

use std::io::{self, Read};
use std::path::Path;

/// The most a file read whole may hold: 16 MiB, some 100,000 endpoint
/// lines of 160 bytes, far more than any such file needs.
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// The bytes of the file at `path`.
///
/// # Errors
/// The file's own (missing, unreadable), or [`io::ErrorKind::InvalidData`]
/// when it holds more than [`MAX_FILE_BYTES`].
///
/// ```
/// let err = loadring_discovery::read_file("/dev/zero").unwrap_err();
/// assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
/// assert_eq!(err.to_string(), "more than 16 MiB: not a file to read whole");
/// ```
pub fn read_file(path: impl AsRef<Path>) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "more than {} MiB: not a file to read whole",
                MAX_FILE_BYTES >> 20
            ),
        ));
    }
    Ok(bytes)
}

/// The text of the file at `path`: [`read_file`], in UTF-8.
///
/// # Errors
/// [`read_file`]'s, or [`io::ErrorKind::InvalidData`] for text that is not
/// UTF-8.
pub fn read_text(path: impl AsRef<Path>) -> io::Result<String> {
    String::from_utf8(read_file(path)?).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("not UTF-8 text (byte {})", e.utf8_error().valid_up_to()),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_file(name: &str, len: u64) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!(
            "loadring-bounded-read-{}-{name}",
            std::process::id()
        ));
        let file = std::fs::File::create(&path).unwrap();
        // Sparse: no disk taken for the zeros.
        file.set_len(len).unwrap();
        path
    }

    #[test]
    fn a_file_of_the_most_bytes_is_read_and_one_more_byte_is_refused() {
        let most = temp_file("most", MAX_FILE_BYTES);
        assert_eq!(read_file(&most).unwrap().len() as u64, MAX_FILE_BYTES);
        let over = temp_file("over", MAX_FILE_BYTES + 1);
        let err = read_file(&over).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
        std::fs::remove_file(most).unwrap();
        std::fs::remove_file(over).unwrap();
    }

    #[test]
    fn a_device_without_end_is_refused() {
        let err = read_text("/dev/zero").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
    }

    #[test]
    fn text_that_is_not_utf8_is_refused_with_where() {
        let path = temp_file("latin1", 0);
        std::fs::write(&path, b"10.0.0.1:80\ncaf\xe9:80\n").unwrap();
        let err = read_text(&path).unwrap_err();
        assert_eq!(err.to_string(), "not UTF-8 text (byte 15)");
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn a_missing_file_says_so() {
        let err = read_text("/nonexistent/loadring/endpoints.txt").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }
}
