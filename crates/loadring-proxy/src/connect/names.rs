//! Header names of backends' answers, made once per spelling and thread.
//!
//! A backend answers with the same few names again and again. Making a
//! `HeaderName` costs more than finding the one made before: the bytes are
//! lower-cased and checked, and a name the `http` crate does not know
//! (`x-backend`, `x-request-id`) is copied into an allocation of its own.
//! Here each thread keeps the names it made in a small table, by their
//! spelling (exact bytes: `Content-Length` and `content-length` are two
//! entries of the same name), and hands out clones (a name the crate does
//! not know shares its bytes, counted by reference).
//!
//! Bounded: [`SLOTS`] entries of names up to [`LONGEST`] bytes; a longer
//! name is made each time. A name evicts the one in its slot, so two names
//! that share a slot and come in turn cost what they did without the
//! table, and a hostile backend's ever new names cost that much, no more.

use std::cell::RefCell;

use http::header::{HeaderName, InvalidHeaderName};

/// Entries per thread (a power of two).
const SLOTS: usize = 64;
/// The longest spelling kept.
const LONGEST: usize = 40;

struct Seen {
    spelling: [u8; LONGEST],
    len: u8,
    name: HeaderName,
}

thread_local! {
    static SEEN: RefCell<[Option<Seen>; SLOTS]> = const { RefCell::new([const { None }; SLOTS]) };
}

/// The header name spelled `spelling`, as `HeaderName::from_bytes`.
///
/// # Errors
/// Bytes that are no header name.
pub(crate) fn header_name(spelling: &[u8]) -> Result<HeaderName, InvalidHeaderName> {
    let Some(slot) = slot_of(spelling).filter(|_| spelling.len() <= LONGEST) else {
        return HeaderName::from_bytes(spelling);
    };
    SEEN.with(|seen| {
        let mut seen = seen.borrow_mut();
        if let Some(entry) = &seen[slot] {
            if entry.spelling.get(..usize::from(entry.len)) == Some(spelling) {
                return Ok(entry.name.clone());
            }
        }
        let name = HeaderName::from_bytes(spelling)?;
        let mut kept = [0; LONGEST];
        kept[..spelling.len()].copy_from_slice(spelling);
        seen[slot] = Some(Seen {
            spelling: kept,
            // At most LONGEST.
            len: u8::try_from(spelling.len()).unwrap_or(u8::MAX),
            name: name.clone(),
        });
        Ok(name)
    })
}

/// A spelling's slot, from its length and three of its bytes (common
/// names differ in those); `None` for an empty one.
fn slot_of(spelling: &[u8]) -> Option<usize> {
    let first = *spelling.first()?;
    let last = *spelling.last()?;
    let middle = *spelling.get(spelling.len() / 2)?;
    let mixed = (spelling.len() as u32).wrapping_mul(0x9e37_79b9)
        ^ u32::from(first).wrapping_mul(0x85eb_ca6b)
        ^ u32::from(last).wrapping_mul(0xc2b2_ae35)
        ^ u32::from(middle).wrapping_mul(0x27d4_eb2f);
    Some((mixed >> 26) as usize & (SLOTS - 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever came before, a spelling is the name `from_bytes`
        /// makes of it, or refused as it refuses it.
        #[test]
        fn a_spelling_is_always_its_own_name(
            spellings in prop::collection::vec(
                prop_oneof![
                    Just(b"Content-Length".to_vec()),
                    Just(b"content-length".to_vec()),
                    Just(b"X-Backend".to_vec()),
                    Just(b"x-backend".to_vec()),
                    Just(b"Date".to_vec()),
                    prop::collection::vec(any::<u8>(), 0..48),
                    "[a-zA-Z-]{1,45}".prop_map(String::into_bytes),
                ],
                1..200,
            )
        ) {
            for spelling in &spellings {
                let ours = header_name(spelling).ok();
                let theirs = HeaderName::from_bytes(spelling).ok();
                prop_assert_eq!(ours, theirs);
            }
        }
    }

    #[test]
    fn a_spelling_seen_before_is_found_and_a_new_one_replaces_its_slot() {
        // A thread of its own: its table starts empty.
        std::thread::spawn(|| {
            let found = |spelling: &[u8]| {
                let slot = slot_of(spelling).unwrap();
                SEEN.with(|seen| {
                    seen.borrow()[slot]
                        .as_ref()
                        .is_some_and(|e| &e.spelling[..usize::from(e.len)] == spelling)
                })
            };
            assert!(!found(b"X-Backend"));
            assert_eq!(header_name(b"X-Backend").unwrap(), "x-backend");
            assert!(found(b"X-Backend"));
            assert_eq!(header_name(b"X-Backend").unwrap(), "x-backend");
            // The longest kept, and one byte more: made, not kept.
            let longest = [b'b'; LONGEST];
            header_name(&longest).unwrap();
            assert!(found(&longest));
            let long = [b'a'; LONGEST + 1];
            assert_eq!(header_name(&long).unwrap().as_str().len(), LONGEST + 1);
            assert!(!found(&long));
            // A name is not kept when it is refused.
            assert!(header_name(b"bad name").is_err());
            assert!(!found(b"bad name"));
            // Two names of one slot: the later takes it.
            let first = b"x-backend".to_vec();
            let second = (0..=u8::MAX)
                .map(|b| format!("x-{}d", char::from(b'a' + b % 26)).into_bytes())
                .chain((0..4096).map(|i| format!("x-{i}").into_bytes()))
                .find(|s| slot_of(s) == slot_of(&first) && *s != first)
                .expect("a name sharing the slot");
            header_name(&first).unwrap();
            assert!(found(&first));
            header_name(&second).unwrap();
            assert!(found(&second));
            assert!(!found(&first));
            assert_eq!(header_name(&first).unwrap(), "x-backend");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn common_names_of_answers_have_slots_of_their_own() {
        let common: [&[u8]; 12] = [
            b"Content-Length",
            b"Content-Type",
            b"Date",
            b"Server",
            b"Connection",
            b"Cache-Control",
            b"ETag",
            b"Last-Modified",
            b"Vary",
            b"Transfer-Encoding",
            b"X-Request-Id",
            b"Keep-Alive",
        ];
        let mut slots: Vec<usize> = common.iter().map(|s| slot_of(s).unwrap()).collect();
        slots.sort_unstable();
        slots.dedup();
        assert_eq!(slots.len(), common.len());
    }
}
