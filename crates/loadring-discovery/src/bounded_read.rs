//! Files read whole (an endpoints file, a config file, TLS certificates and
//! keys), read with a bound: a path that names a device (`/dev/zero`), a
//! log file or any file far larger than such a file can be is refused with
//! one line rather than read until memory runs out. A FIFO or a socket is
//! refused before it is opened: opening a FIFO waits for a writer, for ever
//! if none comes, and held the thread that read it (a running proxy's
//! follower of its endpoints file, swapped for a FIFO, froze its worker).

use std::io::{self, Read};
use std::path::Path;

/// The most a file read whole may hold: 16 MiB, some 100,000 endpoint
/// lines of 160 bytes, far more than any such file needs.
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// The bytes of the file at `path`.
///
/// # Errors
/// The file's own (missing, unreadable), [`io::ErrorKind::InvalidInput`]
/// for a FIFO or a socket, or [`io::ErrorKind::InvalidData`] when it holds
/// more than [`MAX_FILE_BYTES`].
///
/// ```
/// let err = loadring_discovery::read_file("/dev/zero").unwrap_err();
/// assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
/// assert_eq!(err.to_string(), "more than 16 MiB: not a file to read whole");
/// ```
pub fn read_file(path: impl AsRef<Path>) -> io::Result<Vec<u8>> {
    let path = path.as_ref();
    // Following symlinks, as the open does; looking does not wait.
    if let Some(what) = stream_kind(&std::fs::metadata(path)?.file_type()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("a {what}, not a file to read whole"),
        ));
    }
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

/// What a file of type `kind` is if reading it could wait for a writer.
#[cfg(unix)]
fn stream_kind(kind: &std::fs::FileType) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_fifo() {
        Some("FIFO")
    } else if kind.is_socket() {
        Some("socket")
    } else {
        None
    }
}

#[cfg(not(unix))]
fn stream_kind(_: &std::fs::FileType) -> Option<&'static str> {
    None
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

    /// `read_file(path)` on a thread of its own: its error, or a panic
    /// if it is still waiting after a minute (it used to wait for ever).
    #[cfg(unix)]
    fn refused_at_once(path: &std::path::Path) -> io::Error {
        let (tx, rx) = std::sync::mpsc::channel();
        let path = path.to_path_buf();
        std::thread::spawn(move || tx.send(read_file(&path)));
        match rx.recv_timeout(std::time::Duration::from_secs(60)) {
            Ok(read) => read.unwrap_err(),
            Err(_) => panic!("still waiting for a writer"),
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_or_a_socket_is_refused_without_waiting_for_a_writer() {
        let fifo = temp_file("fifo", 0);
        std::fs::remove_file(&fifo).unwrap();
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo (coreutils)");
        let err = refused_at_once(&fifo);
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(err.to_string(), "a FIFO, not a file to read whole");
        std::fs::remove_file(&fifo).unwrap();

        let socket = temp_file("socket", 0);
        std::fs::remove_file(&socket).unwrap();
        let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let err = refused_at_once(&socket);
        assert_eq!(err.to_string(), "a socket, not a file to read whole");
        drop(listener);
        std::fs::remove_file(&socket).unwrap();
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
