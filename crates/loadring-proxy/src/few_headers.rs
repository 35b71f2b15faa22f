//! Whether a message has a header, by comparing names rather than hashing
//! one.
//!
//! A request or response through the gateway has a handful of headers, and
//! each request asks about several it usually does not have (`Connection`,
//! `Upgrade`, `Content-Type` on a `GET`, `Transfer-Encoding` on an answer).
//! A `HeaderMap` lookup hashes the name first, which costs more than
//! comparing it with each of a few names (a name the `http` crate knows is
//! one byte to compare). Up to [`SCAN_UP_TO`] values the names are compared
//! in order, and a header found is then looked up as usual; above, the map
//! is looked up at once, so a message with many headers costs what it did.
//!
//! The answers are the map's own: [`contains`] is
//! `HeaderMap::contains_key`, [`get_all`] yields `HeaderMap::get_all`'s
//! values in their order.

use http::header::{HeaderName, HeaderValue};
use http::HeaderMap;

/// The most values whose names are compared rather than one hashed.
const SCAN_UP_TO: usize = 8;

/// Whether `name` is there, as `headers.contains_key(name)`.
pub(crate) fn contains(headers: &HeaderMap, name: &HeaderName) -> bool {
    if headers.len() > SCAN_UP_TO {
        return headers.contains_key(name);
    }
    headers.keys().any(|n| n == name)
}

/// Whether a lookup of `name` may find it: a long map is looked up as it
/// is (once), a short one only when its names have `name`.
pub(crate) fn worth_a_lookup(headers: &HeaderMap, name: &HeaderName) -> bool {
    headers.len() > SCAN_UP_TO || headers.keys().any(|n| n == name)
}

/// Every value of `name` in order, as `headers.get_all(name)`.
pub(crate) fn get_all<'h>(
    headers: &'h HeaderMap,
    name: &HeaderName,
) -> impl Iterator<Item = &'h HeaderValue> {
    worth_a_lookup(headers, name)
        .then(|| headers.get_all(name))
        .into_iter()
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NAMES: [&str; 6] = [
        "host",
        "connection",
        "x-key",
        "x-forwarded-for",
        "te",
        "cookie",
    ];

    /// Names from a small pool (known and custom ones, so that several
    /// repeat), each with a value naming its place.
    fn map_of(picks: &[usize]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (i, &pick) in picks.iter().enumerate() {
            map.append(HeaderName::from_static(NAMES[pick]), HeaderValue::from(i));
        }
        map
    }

    proptest! {
        /// On both sides of the threshold, each lookup answers what the
        /// map's own does, values in the same order.
        #[test]
        fn lookups_answer_what_the_map_does(
            picks in prop::collection::vec(0..NAMES.len(), 0..=2 * SCAN_UP_TO + 2)
        ) {
            let map = map_of(&picks);
            for name in NAMES.iter().chain(&["x-absent", "upgrade"]) {
                let name = HeaderName::from_static(name);
                prop_assert_eq!(contains(&map, &name), map.contains_key(&name));
                let ours: Vec<_> = get_all(&map, &name).collect();
                let theirs: Vec<_> = map.get_all(&name).iter().collect();
                prop_assert_eq!(ours, theirs);
            }
        }
    }
}
