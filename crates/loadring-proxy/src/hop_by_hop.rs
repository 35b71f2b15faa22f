//! Fields that describe one connection, not the message (RFC 9110 7.6.1):
//! removed from what the gateway passes on, both ways.

use http::header::{self, HeaderName};
use http::HeaderMap;

/// The hop-by-hop fields every message loses (those its `Connection`
/// names go too).
/// Names, not strings: comparing two names the `http` crate knows is
/// comparing one byte.
pub(crate) const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::UPGRADE,
];

/// Removes hop-by-hop headers, those the `Connection` header names included.
/// `Transfer-Encoding` goes too: hyper frames each side's body itself.
pub(crate) fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // Most messages have none: one pass over their few names, no lookup.
    if !headers.keys().any(is_hop_by_hop) {
        return;
    }
    // Element by element, as bytes: a value with one element that is not
    // a name (not ASCII) still has the others honoured.
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .flat_map(crate::field_list::elements)
        .filter_map(|name| HeaderName::from_bytes(name).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
    headers.remove(header::TRANSFER_ENCODING);
}

/// Whether `name` is one [`strip_hop_by_hop`] may remove (`Connection`
/// names others; any of these means the slow path).
fn is_hop_by_hop(name: &HeaderName) -> bool {
    *name == header::TRANSFER_ENCODING || HOP_BY_HOP.contains(name)
}

/// Whether a field spelled `name` (in any case) is one
/// [`strip_hop_by_hop`] may remove.
pub(crate) fn is_hop_by_hop_spelling(name: &[u8]) -> bool {
    SPELLINGS.iter().any(|h| name.eq_ignore_ascii_case(h))
}

/// [`HOP_BY_HOP`] and `Transfer-Encoding` as bytes: a `HeaderName`'s
/// spelling is looked up in a table each time it is asked for.
const SPELLINGS: [&[u8]; 9] = [
    b"connection",
    b"keep-alive",
    b"proxy-connection",
    b"proxy-authenticate",
    b"proxy-authorization",
    b"te",
    b"trailer",
    b"upgrade",
    b"transfer-encoding",
];

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn hop_by_hop_headers_go_named_ones_too() {
        let mut h = HeaderMap::new();
        h.insert(
            "connection",
            HeaderValue::from_static("keep-alive, x-session-hop"),
        );
        h.insert("x-session-hop", HeaderValue::from_static("1"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert("te", HeaderValue::from_static("trailers"));
        h.insert("x-user", HeaderValue::from_static("alice"));
        strip_hop_by_hop(&mut h);
        let left: Vec<_> = h.keys().map(|k| k.as_str()).collect();
        assert_eq!(left, ["x-user"]);
    }

    #[test]
    fn names_in_a_connection_value_with_other_bytes_go_too() {
        let mut h = HeaderMap::new();
        h.insert(
            "connection",
            HeaderValue::from_bytes(b"x-session-hop, caf\xc3\xa9,\tx-other-hop").unwrap(),
        );
        h.insert("x-session-hop", HeaderValue::from_static("1"));
        h.insert("x-other-hop", HeaderValue::from_static("2"));
        h.insert("x-user", HeaderValue::from_static("alice"));
        strip_hop_by_hop(&mut h);
        let left: Vec<_> = h.keys().map(|k| k.as_str()).collect();
        assert_eq!(left, ["x-user"]);
    }

    #[test]
    fn every_spelling_of_a_hop_by_hop_name_is_one() {
        for name in HOP_BY_HOP.iter().chain([&header::TRANSFER_ENCODING]) {
            let lower = name.as_str();
            assert!(is_hop_by_hop_spelling(lower.as_bytes()), "{lower}");
            assert!(is_hop_by_hop_spelling(
                lower.to_ascii_uppercase().as_bytes()
            ));
            assert!(!is_hop_by_hop_spelling(&lower.as_bytes()[1..]));
        }
        assert_eq!(SPELLINGS.len(), HOP_BY_HOP.len() + 1, "no other name");
        for other in ["x-user", "content-length", "connections", ""] {
            assert!(!is_hop_by_hop_spelling(other.as_bytes()), "{other}");
        }
    }
}
